"""Studies of nonuniformity: toy, sparse regression, digits training, correlation, label noise.

Each study is a library function writing a run folder (config.json, metrics.jsonl,
summary.json, plots); the ``genlab optim`` commands are thin wrappers around them.
"""
