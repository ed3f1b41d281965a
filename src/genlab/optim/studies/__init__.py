"""Studies of nonuniformity: toy, sparse regression, standard training, transfer, sensitivity,
label noise, depth and width, correlation of the measures with generalization.

Each study is a library function writing a run folder (config.json, metrics.jsonl,
summary.json, plots) and one module that registers it (genlab.core.studies); its
`genlab optim <study>` command is generated from its config. A new study is a new module here.
Beside the studies stands what they share: ``grid`` (a study as a list of trainings, run
through genlab.core.sweep), ``search`` (the hyper-parameter search every comparison uses)
and ``stats`` (the tables' means and paired comparisons). The training they run, one
`optim train` each, is genlab.optim.training's.
"""

from __future__ import annotations

from genlab.core.studies import Studies, Study, register_study  # the study modules import them here

#: the studies of this package, read from its sources to list the commands
STUDIES = Studies(__name__)

#: modules that left this package (genlab.core.registry.import_module): the model record of a
#: checkpoint written before the move names "genlab.optim.studies.models:build_model"
MOVED = {"models": "genlab.optim.training.models"}

__all__ = ["STUDIES", "Study", "register_study"]
