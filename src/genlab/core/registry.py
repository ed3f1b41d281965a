"""One registry shape for every family of interchangeable things.

A :class:`Registry` maps names to entries (a class, a builder, a dataclass of facts, a
penalty object). Entries are registered where they are defined, either directly
(``WIDGETS.register("small", entry)``) or as a decorator (``@BUILDERS.register("mlp")``);
``get`` raises a ConfigError that lists the choices; aliases resolve to their target's
entry and are listed apart, so help texts can say that ``ber`` is another name. A registry
made with ``check=`` runs it on every entry as it is registered, so an entry that lacks
what its family needs is refused where it is defined, not later where it is used.

``import_path`` resolves ``"package.module:attribute"``: the way a checkpoint or a sweep
names a function without core importing the package that defines it. A module that left
its package stays reachable under its old path: the package it left names it in ``MOVED``
(``{"old_name": "its.new.module"}``), so a record written before the move still resolves.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, Generic, TypeVar

from genlab.core.errors import ConfigError

T = TypeVar("T")


class Registry(Generic[T]):
    """Names -> entries of one kind (``kind`` names it in error messages); ``check(name,
    entry)`` (optional) raises ConfigError for an entry the family cannot use."""

    def __init__(self, kind: str, *, check: Callable[[str, T], None] | None = None):
        self.kind = kind
        self.check = check
        self._entries: dict[str, T] = {}
        self._aliases: dict[str, str] = {}

    def register(self, name: str, entry: T | None = None, *, aliases: tuple[str, ...] = (),
                 replace: bool = False) -> Any:
        """Add ``entry`` under ``name`` (and ``aliases``); without ``entry``, a decorator.

        Registering a taken name raises ConfigError unless ``replace`` is set; so does an
        entry that the registry's ``check`` refuses.
        """
        if entry is None:
            def decorator(obj: T) -> T:
                self.register(name, obj, aliases=aliases, replace=replace)
                return obj
            return decorator
        for key in (name, *aliases):
            if not replace and (key in self._entries or key in self._aliases):
                raise ConfigError(f"{self.kind} {key!r} is registered twice")
        if self.check is not None:
            self.check(name, entry)
        self._entries[name] = entry
        for alias in aliases:
            self._aliases[alias] = name
        return entry

    def unregister(self, name: str) -> T:
        """Remove the entry ``name`` and its aliases (a part added for a while, as a test
        does); returns the entry."""
        entry = self._entries.pop(self.canonical(name))
        self._aliases = {a: n for a, n in self._aliases.items() if n in self._entries}
        return entry

    def alias(self, alias: str, name: str) -> None:
        """Let ``alias`` name the entry ``name`` (which must exist); replaces an earlier alias."""
        self.canonical(name)
        if alias in self._entries:
            raise ConfigError(f"{self.kind} {alias!r} is an entry, not an alias")
        self._aliases[alias] = name

    def canonical(self, name: str) -> str:
        """The entry name behind ``name`` (itself, or what the alias points to)."""
        if name in self._entries:
            return name
        if name in self._aliases:
            return self._aliases[name]
        raise ConfigError(f"unknown {self.kind} {name!r}; expected one of: "
                          + ", ".join(self.choices()))

    def get(self, name: str) -> T:
        """The entry registered as ``name`` (or an alias of it); ConfigError listing choices."""
        return self._entries[self.canonical(name)]

    def __getitem__(self, name: str) -> T:
        """``registry[name]``: the same as :meth:`get` (a ConfigError, not a KeyError)."""
        return self.get(name)

    def names(self) -> tuple[str, ...]:
        """Entry names in registration order (aliases excluded)."""
        return tuple(self._entries)

    def aliases(self) -> dict[str, str]:
        """alias -> entry name."""
        return dict(self._aliases)

    def choices(self) -> tuple[str, ...]:
        """Every accepted name: entries, then aliases."""
        return (*self._entries, *self._aliases)

    def items(self) -> Iterator[tuple[str, T]]:
        return iter(self._entries.items())

    def __contains__(self, name: object) -> bool:
        return name in self._entries or name in self._aliases

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, {list(self._entries)})"


_IMPORTED: set[str] = set()


def import_submodules(package: str, path: Iterable[str], skip: tuple[str, ...] = ("base",)
                      ) -> None:
    """Import, once, every module and sub-package of ``package`` (its ``__path__``) except
    ``skip`` and private names: the way a family's registry is filled by the modules that
    define its members, so a new member is a new module and nothing else changes."""
    if package in _IMPORTED:
        return
    for mod in pkgutil.iter_modules(path):
        if mod.name not in skip and not mod.name.startswith("_"):
            importlib.import_module(f"{package}.{mod.name}")
    _IMPORTED.add(package)


def declared_names(folder: Path, package: str, variable: str) -> dict[str, tuple[str, str]]:
    """Name -> (module, the first line of its docstring) of every module under ``folder``
    (the package ``package``, its sub-packages included) that assigns, at its top level,
    ``variable = <call>(<Entry>("name", ...))``, read from the source: nothing is imported.
    How a command line lists the members of a family whose modules import heavy libraries
    (the member registers itself when its module is imported; the two names must agree)."""
    found: dict[str, tuple[str, str]] = {}
    for path in sorted(Path(folder).rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in tree.body:
            if not (isinstance(node, ast.Assign) and any(
                    isinstance(t, ast.Name) and t.id == variable for t in node.targets)):
                continue
            name = next((arg.value for call in ast.walk(node.value)
                         if isinstance(call, ast.Call) for arg in call.args[:1]
                         if isinstance(arg, ast.Constant) and isinstance(arg.value, str)), None)
            if name is None:
                raise ConfigError(f"{path}: {variable} must be made from a literal name")
            parts = path.relative_to(folder).with_suffix("").parts
            module = ".".join((package, *(p for p in parts if p != "__init__")))
            doc = (ast.get_docstring(tree) or "").strip().split("\n\n")[0]
            found[name] = (module, " ".join(doc.split()))
    return found


MOVED = "MOVED"  # a package's table of the modules that left it: old name -> new module


def import_module(name: str) -> Any:
    """``importlib.import_module(name)``, or, for a module that left its package, the module
    its package's ``MOVED`` table names (``{"models": "pkg.new_home.models"}``): the old path
    a checkpoint or a run folder recorded before the move."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        package, _, leaf = name.rpartition(".")
        if exc.name != name or not package:
            raise
        moved = getattr(importlib.import_module(package), MOVED, {})
        if leaf not in moved:
            raise
        return importlib.import_module(moved[leaf])


def import_path(path: str | Callable, *, what: str = "attribute") -> Any:
    """The object behind ``"package.module:attribute"`` (a callable is returned as it is);
    a module that moved is found at its new home (:func:`import_module`)."""
    if callable(path):
        return path
    module_name, _, attr = str(path).partition(":")
    if not module_name or not attr:
        raise ConfigError(f"{path!r}: expected 'package.module:{what}'")
    try:
        obj: Any = import_module(module_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"{path!r} cannot be imported ({exc})") from exc
    return obj


def path_of(obj: Callable) -> str:
    """``"package.module:qualname"`` of a module-level function or class (import_path's inverse)."""
    module, name = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    if not module or not name or "<" in name:
        raise ConfigError(f"{obj!r} is not a module-level function or class")
    return f"{module}:{name}"
