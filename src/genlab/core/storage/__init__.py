"""How a run folder is written to disk: files written atomically (files), one writer per
folder (locks), checkpoints kept, verified and loaded safely (checkpoints), the metrics
mirrored as TensorBoard scalars (tensorboard), and CSV files written a row at a time that a
killed run resumes from (rows). genlab.core.runs builds a run folder from
them."""
