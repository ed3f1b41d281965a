"""Studies of nonuniformity: toy, sparse regression, digits training, correlation, label noise.

Each study is a library function writing a run folder (config.json, metrics.jsonl,
summary.json, plots) and one module that registers it (genlab.core.studies); its
`genlab optim <study>` command is generated from its config. A new study is a new module here.
"""

from __future__ import annotations

from genlab.core.studies import Studies, Study, register_study  # the study modules import them here

#: the studies of this package, read from its sources to list the commands
STUDIES = Studies(__name__)

__all__ = ["STUDIES", "Study", "register_study"]
