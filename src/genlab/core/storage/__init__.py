"""How a run folder is written to disk: files written atomically (files), one writer per
folder (locks), checkpoints kept, verified and loaded safely (checkpoints), and the metrics
mirrored as TensorBoard scalars (tensorboard). genlab.core.runs builds a run folder from
them."""
