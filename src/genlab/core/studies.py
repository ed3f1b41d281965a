"""Studies: an experiment with its own command, registered by the module that defines it.

A study is one module of an app's studies package (the nas, optim and gaze apps' `studies`
packages, or a user's own package) that registers itself at its top level::

    STUDY = register_study(Study("standard", StandardConfig, run_standard, report))

``Study`` holds the command's name, its config dataclass (the command's options, declared
with genlab.core.options), ``run(cfg, out, *, resume)`` (writes the run folder, returns the
summary) and ``report(summary, cfg)``: what the command prints, a list of blocks, each a line
of text or ``(title, rows, columns)`` (an aligned table).

The package declares its studies once, in its ``__init__``::

    STUDIES = Studies(__name__)

and :func:`register_study` files a study under the package whose module defines its ``run``.
A command line lists a package's studies by reading its sources for the ``STUDY = ...``
assignment (:func:`study_modules`, genlab.core.registry.declared_names): neither the package
nor its parents are imported, so listing them imports no torch; a study's module is imported
when its command runs or shows its help. A new study is a new module in the package.
"""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
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


#: package name -> its Studies, filled as each studies package is imported
_PACKAGES: dict[str, Studies] = {}


def package_folder(package: str) -> Path:
    """The folder of the package ``package`` (dotted), found without importing it or its
    parents (their ``__init__`` may import torch)."""
    top, *rest = package.split(".")
    spec = importlib.util.find_spec(top)
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(f"no package {top!r} on the path")
    folder = Path(next(iter(spec.submodule_search_locations))).joinpath(*rest)
    if not (folder / "__init__.py").is_file():
        raise ConfigError(f"no package {package!r} (looked for {folder / '__init__.py'})")
    return folder


def study_modules(package: str) -> dict[str, tuple[str, str]]:
    """Command name -> (module, its docstring's first line) of every study module of
    ``package``, read from the sources (nothing is imported)."""
    return declared_names(package_folder(package), package, STUDY_VARIABLE)


class Studies:
    """The studies of one package (``package``: its import name)."""

    def __init__(self, package: str):
        self.package = package
        self.registry: Registry[Study] = Registry(f"{package} study", check=_check_study)
        _PACKAGES[package] = self

    def register(self, study: Study) -> Study:
        """Register ``study`` under its name (checked)."""
        return self.registry.register(study.name, study)

    def unregister(self, name: str) -> None:
        self.registry.unregister(name)

    def __contains__(self, name: str) -> bool:
        return name in self.registry

    def modules(self) -> dict[str, tuple[str, str]]:
        """The package's study modules (:func:`study_modules`)."""
        return study_modules(self.package)

    def get(self, name: str) -> Study:
        """The study ``name`` (its module imported); ConfigError listing the studies."""
        modules = self.modules()
        if name not in modules:
            raise ConfigError(f"unknown study {name!r}; expected one of: {', '.join(modules)}")
        importlib.import_module(modules[name][0])
        return self.registry.get(name)


def markdown_report(summary: dict, cfg: Any = None) -> list:
    """The report of a study whose summary holds what it prints as ``markdown``."""
    return [summary["markdown"]]


def studies_of(package: str) -> Studies:
    """The Studies that ``package`` declares (the package imported)."""
    if package not in _PACKAGES:
        importlib.import_module(package)
    if package not in _PACKAGES:
        raise ConfigError(f"package {package!r} declares no Studies: its __init__ needs "
                          "STUDIES = Studies(__name__)")
    return _PACKAGES[package]


def register_study(study: Study) -> Study:
    """Register ``study`` with the Studies of the package whose module defines its ``run``;
    assign the result to ``STUDY``."""
    module = getattr(study.run, "__module__", None) or ""
    owners = [p for p in _PACKAGES if module.startswith(p + ".")]
    if not owners:
        raise ConfigError(f"study {study.name!r}: its run ({module or '?'}) is not in a "
                          "package that declares Studies (genlab.core.studies)")
    return _PACKAGES[max(owners, key=len)].register(study)


__all__ = ["STUDY_VARIABLE", "Studies", "Study", "markdown_report", "package_folder",
           "register_study", "studies_of", "study_modules"]
