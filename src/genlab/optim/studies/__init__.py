"""Studies of nonuniformity: toy, sparse regression, digits training, correlation, label noise.

Each study is a library function writing a run folder (config.json, metrics.jsonl,
summary.json, plots); the ``genlab optim`` commands are thin wrappers around them.

A study registers itself in the module that defines it, at its top level::

    STUDY = register_study(Study("standard", StandardConfig, run_standard, report))

``Study`` holds the command's name, its config dataclass (the command's options),
``run(cfg, out, *, resume)`` and ``report(summary, cfg)``: what the command prints, a list
of blocks, each a line of text or ``(title, rows, columns)`` (an aligned table). The command
line finds the study modules by reading this package's sources for that assignment
(:func:`study_modules`, genlab.core.registry.declared_names), so ``genlab optim --help``
lists them without importing torch; a study's module is imported when its command runs or
shows its help. A new study is a new module here.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from genlab.core.errors import ConfigError
from genlab.core.registry import Registry, declared_names

#: the top-level name a study module assigns its registered Study to
STUDY_VARIABLE = "STUDY"


@dataclass(frozen=True)
class Study:
    """One study: its command ``name``, its ``config`` dataclass, ``run`` and ``report``."""

    name: str
    config: type
    run: Callable[..., dict]
    report: Callable[[dict, Any], list]
    digits: int = 1  # decimals of the numbers in its tables


def _check_study(name: str, study: Study) -> None:
    if not isinstance(study, Study):
        raise ConfigError(f"study {name!r}: expected a Study, got {study!r}")
    if not name or name != name.lower() or " " in name or "_" in name:
        raise ConfigError(f"study {name!r}: a command name is lower-case words joined by '-'")
    if not dataclasses.is_dataclass(study.config):
        raise ConfigError(f"study {name!r}: its config must be a dataclass")
    if not (callable(study.run) and callable(study.report)):
        raise ConfigError(f"study {name!r}: run and report must be functions")


STUDIES: Registry[Study] = Registry("study", check=_check_study)


def register_study(study: Study) -> Study:
    """Register ``study`` under its name (checked); assign the result to ``STUDY``."""
    return STUDIES.register(study.name, study)


def study_modules() -> dict[str, tuple[str, str]]:
    """Command name -> (module, its docstring's first line) of every study module of this
    package, read from the sources (nothing is imported)."""
    return declared_names(Path(__file__).parent, __name__, STUDY_VARIABLE)


def get_study(name: str) -> Study:
    """The study ``name`` (its module imported); ConfigError listing the studies."""
    modules = study_modules()
    if name not in modules:
        raise ConfigError(f"unknown study {name!r}; expected one of: {', '.join(modules)}")
    importlib.import_module(modules[name][0])
    return STUDIES.get(name)


__all__ = ["STUDIES", "Study", "get_study", "register_study", "study_modules"]
