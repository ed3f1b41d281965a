"""The check that a wrapper command takes every option of the command it wraps.

``check_wraps(wrapper, wrapped, skip=..., prefix=...)``: every declared option of the config
class ``wrapped`` is a declared, command-line option of the config class ``wrapper`` (named
``prefix + name``) with the same default, or the one ``defaults`` gives for it (the
wrapper's own, e.g. a study's budget), except the options named in ``skip`` (those the
wrapper sets itself: a bench's seed per job), each of which must be an option of
``wrapped``. tests/ is on the path: ``from wrappers import check_wraps``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from genlab.core.options import option_fields, spec_of


def default_of(f: dataclasses.Field):
    """A field's default (its factory called)."""
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return f.default


def wrap_problems(wrapper: type, wrapped: type, *, skip: Iterable[str] = (),
                  prefix: str = "", defaults: Mapping[str, Any] | None = None) -> list[str]:
    """What keeps ``wrapper`` from taking every option of ``wrapped`` (empty: nothing)."""
    theirs = {f.name: f for f, _ in option_fields(wrapped)}
    mine = dataclasses.fields(wrapper)
    mine = {f.name: f for f in mine}
    skip, defaults = set(skip), dict(defaults or {})
    problems = [f"skip names {name}, which is no option of {wrapped.__name__}"
                for name in sorted(skip - set(theirs))]
    problems += [f"defaults names {name}, which is no option taken from {wrapped.__name__}"
                 for name in sorted(set(defaults) - (set(theirs) - skip))]
    for name, f in theirs.items():
        if name in skip:
            continue
        own = mine.get(prefix + name)
        want = defaults.get(name, default_of(f))
        if own is None or spec_of(own) is None or not spec_of(own).cli:
            problems.append(f"{wrapper.__name__} has no option {prefix + name}")
        elif default_of(own) != want:
            problems.append(f"{wrapper.__name__}.{prefix + name} defaults to "
                            f"{default_of(own)!r}, expected {want!r}"
                            + ("" if name in defaults else f" ({wrapped.__name__}.{name})"))
    return problems


def check_wraps(wrapper: type, wrapped: type, *, skip: Iterable[str] = (),
                prefix: str = "", defaults: Mapping[str, Any] | None = None) -> None:
    """AssertionError naming every option of ``wrapped`` that ``wrapper`` lacks or defaults
    otherwise (module docstring)."""
    problems = wrap_problems(wrapper, wrapped, skip=skip, prefix=prefix, defaults=defaults)
    assert not problems, "; ".join(problems)
