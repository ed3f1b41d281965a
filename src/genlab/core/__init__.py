"""Method-agnostic machinery shared by nas, optim and gaze: runs, data, training, reports."""
