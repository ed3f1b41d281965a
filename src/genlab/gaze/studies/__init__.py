"""Multi-run studies: the synthetic bench (bench), the paper protocol (paper), their
tables (tables) and seed-and-subject bootstrap statistics (stats); runs (runs) trains
one study run as a genlab.core.sweep target."""
