"""Method-agnostic machinery shared by every method package: runs, data, training, reports."""
