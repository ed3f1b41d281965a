"""The SAM family and the nonuniformity optimisers (COV, SAMGCM), built by name (registry.py)."""
