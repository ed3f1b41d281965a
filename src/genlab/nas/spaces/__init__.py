"""Search spaces: NAS-Bench-201, DARTS (+ RobustDARTS S1-S4), MobileNet-like (one sub-package each).

``get_space(name)`` returns a registered space (genlab.nas.spaces.base describes the
protocol; ``SPACES`` is their core.registry Registry). Every module or sub-package of this
package registers its spaces when imported; ``get_space`` and ``space_names`` import them
all once, so adding a space means adding a module or sub-package here.
"""

from __future__ import annotations

import os

from torch import nn

from genlab.core.errors import ConfigError
from genlab.core.registry import import_submodules
from genlab.nas.spaces.base import (
    SPACES,
    AlphaSpec,
    ProxyDefaults,
    RetrainRecipe,
    SearchSpace,
    register_space,
)


def _load_all() -> None:
    """Import every space module of this package once (each registers what it defines;
    ``backbone`` defines no space)."""
    import_submodules(__name__, __path__, skip=("base", "backbone"))


def space_names() -> tuple[str, ...]:
    """Names of every registered space."""
    _load_all()
    return SPACES.names()


def get_space(name: str) -> SearchSpace:
    """The space called ``name``; ConfigError naming it and the known spaces otherwise."""
    _load_all()
    return SPACES.get(name)


def build_space_supernet(space: str | SearchSpace, num_classes: int, in_channels: int = 3,
                         channels: int | None = None, cells: int | None = None,
                         options: dict | None = None) -> nn.Module:
    """The search supernet of the space named ``space`` (plain values only: the builder that a
    `nas search` checkpoint's model record names, genlab.core.storage.checkpoints; a search passes
    the space it has already looked up)."""
    space = get_space(space) if isinstance(space, str) else space
    return space.build_supernet(num_classes=num_classes, in_channels=in_channels,
                                           channels=channels, cells=cells, **(options or {}))


def build_space_network(space: str, genotype: str, num_classes: int, in_channels: int = 3,
                        channels: int | None = None, cells: int | None = None,
                        options: dict | None = None) -> nn.Module:
    """The discrete network of ``genotype`` (its text) in the space named ``space`` (plain
    values only: the builder that a `nas train` checkpoint's model record names)."""
    return get_space(space).build_network(genotype, num_classes, in_channels=in_channels,
                                          channels=channels, cells=cells, **(options or {}))


def resolve_table(path: str | None):
    """The NB201 table from ``path`` or GENLAB_NB201_TABLE, or None when neither is set."""
    return space_table(get_space("nb201"), path)


def space_table(space: SearchSpace, path: str | None):
    """The table that judges ``space``'s genotypes (``--nb201-table`` or the space's
    environment variable), through the space protocol; None when neither is set."""
    if path and space.table is None:
        raise ConfigError(f"--nb201-table judges NB201 cells; space {space.name} has no "
                          "accuracy table")
    path = path or (os.environ.get(space.table_env) if space.table_env else None)
    return space.load_table(path) if path else None


__all__ = ["AlphaSpec", "ProxyDefaults", "RetrainRecipe", "SearchSpace", "SPACES", "get_space",
           "build_space_network", "build_space_supernet", "register_space", "resolve_table",
           "space_names", "space_table"]
