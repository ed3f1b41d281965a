"""Differentiable-search methods as compositions of parts (genlab.nas.methods.base).

``get_method(name)`` returns a registered method (``METHODS``); every module of this package
registers what it defines when imported, and ``get_method`` / ``method_names`` import them
all once, so a new method is a new module here and nothing else changes.
``search_method(cfg)`` builds the parts of one search from a SearchConfig.
"""

from __future__ import annotations

from genlab.core.registry import import_submodules
from genlab.nas.methods.base import (
    METHODS,
    PERTURBATIONS,
    RELAXATIONS,
    SELECTIONS,
    STOPS,
    SUPERNET_OPTIONS,
    Method,
    Perturbation,
    Relaxation,
    SearchMethod,
    Selection,
    SelectionContext,
    StopRule,
    build_parts,
    derive,
    register_method,
)
from genlab.nas.methods.supernet_options import SupernetOption, register_supernet_option


def _load_all() -> None:
    """Import every module of this package once (each registers what it defines)."""
    import_submodules(__name__, __path__)


def method_names() -> tuple[str, ...]:
    """Names of every registered method, in registration order."""
    _load_all()
    return METHODS.names()


def get_method(name: str) -> Method:
    """The method called ``name``; ConfigError naming the known methods otherwise."""
    _load_all()
    return METHODS.get(name)


def row_title(row: str) -> str:
    """A bench row's name for tables and claims: a registered method's ``title`` (its name
    in its paper), any other row (a regulariser, the random row) as it is."""
    _load_all()
    return (METHODS.get(row).title or row) if row in METHODS else row


def part_names() -> dict[str, tuple[str, ...]]:
    """The registered names of every part kind (for help texts and errors)."""
    _load_all()
    return {"relaxation": RELAXATIONS.names(), "perturb": PERTURBATIONS.names(),
            "stop": STOPS.names(), "select": SELECTIONS.names()}


def build_supernet(space, method: str = "darts", num_classes: int = 10, in_channels: int = 3,
                   channels: int | None = None, cells: int | None = None, **options):
    """The supernet of ``method`` in ``space`` (a name or a SearchSpace): the space's upstream
    size when ``channels``/``cells`` are None, the method's structural options (PC-DARTS'
    partial channels, DARTS-' auxiliary skip, ...) and its relaxation set; ``options`` go
    to the space's builder (e.g. ``stem="cifar"``). It has ``weight_parameters()`` and
    ``arch_parameters()`` like every supernet."""
    from genlab.nas.spaces import get_space

    space = get_space(space) if isinstance(space, str) else space
    parts = build_parts(get_method(method))
    net = space.build_supernet(num_classes=num_classes, in_channels=in_channels,
                               channels=channels, cells=cells,
                               **{**parts.supernet_options, **options})
    parts.attach(net)
    return net


def search_method(cfg, method: Method | None = None) -> SearchMethod:
    """The parts of the search ``cfg`` (a resolved SearchConfig); ``method``: its entry, if
    already looked up."""
    _load_all()
    return build_parts(method or get_method(cfg.method), relaxation=cfg.relaxation,
                       perturb=cfg.perturb, stop=cfg.stop, select=cfg.select,
                       supernet=cfg.supernet_params, select_params=cfg.select_params,
                       part_params={"relaxation": cfg.relaxation_params,
                                    "perturb": cfg.perturb_params, "stop": cfg.stop_params})


__all__ = ["METHODS", "PERTURBATIONS", "RELAXATIONS", "SELECTIONS", "STOPS", "SUPERNET_OPTIONS",
           "Method", "Perturbation", "Relaxation", "SearchMethod", "Selection",
           "SelectionContext", "StopRule", "SupernetOption", "build_parts", "build_supernet",
           "derive", "get_method", "method_names", "part_names", "register_method",
           "register_supernet_option", "search_method"]
