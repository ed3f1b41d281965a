"""tests/nas mirrors src/genlab/nas (one folder per sub-package); this folder's shared helpers
(nas_reference, ber_fixtures, fused_equality, detect_fixtures) are importable from every
sub-folder: pytest puts the folder of a conftest.py on sys.path."""
