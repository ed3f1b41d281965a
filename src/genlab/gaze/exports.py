"""Lazy package exports: a package's ``__getattr__`` that imports a name's module on first use.

``import genlab.gaze`` (and ``genlab.gaze.data``) must stay light: the modules behind the
names import OpenCV, h5py and torch at their top, so the package only says where each
public name lives and imports it when it is first asked for.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable


def lazy_getattr(package: str, exports: dict[str, str]) -> Callable[[str], object]:
    """A module ``__getattr__`` resolving ``exports`` (name -> module path) on first use."""

    def __getattr__(name: str):
        if name in exports:
            return getattr(importlib.import_module(exports[name]), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
