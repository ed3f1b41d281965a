"""Supernet options: the structural settings a search method gives its supernet.

A supernet option (``SupernetOption``, registered in ``SUPERNET_OPTIONS``) is one declared
setting with its default (the value that changes nothing), its type and limits, and its
use, each optional: the keyword the space's ``build_supernet`` takes (``builds``; passed only
when the value is not the default), the knobs it moves each step (``knobs``: DARTS-'
auxiliary-skip beta, R-DARTS' drop-path probability, through ``net.set_knobs``), and whether
alpha moves at a step (``arch_active``: PC-DARTS' warm-up). A method's registry entry
(``Method.supernet``) holds its authors' values; a search overrides them with
``--supernet-param KEY=VALUE`` (``SearchConfig.supernet_params``), each key checked against
the declared options here. A new option is one ``register_supernet_option`` and its use.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from genlab.core.errors import ConfigError
from genlab.core.registry import Registry

FLAG = "--supernet-param"
_TRUE, _FALSE = ("true", "yes", "on", "1"), ("false", "no", "off", "0")


def _same(value: Any) -> Any:
    return value


@dataclass(frozen=True)
class SupernetOption:
    """One structural option of the supernet (module docstring): ``kind`` bool, int or float;
    ``ge`` / ``lt`` its limits; ``builds``: value -> the builder's keyword value (None: the
    option is no keyword of the builder); ``knobs(value, step, total)`` -> ``set_knobs``
    keywords; ``arch_active(value, step, total)`` -> whether alpha moves at ``step``;
    ``capturable``: its forward reads no value set on the host per step (genlab.nas.captured)."""

    name: str
    default: Any
    help: str
    kind: type = bool
    ge: float | None = None
    lt: float | None = None
    builds: Callable[[Any], Any] | None = _same
    knobs: Callable[[Any, int, int], dict] | None = None
    arch_active: Callable[[Any, int, int], bool] | None = None
    capturable: bool = False

    def value(self, raw: Any, where: str = FLAG) -> Any:
        """``raw`` (a number, a bool or its text) as this option's value; ConfigError naming
        the option and what it expects otherwise."""
        if self.kind is bool:
            text = str(raw).strip().lower()
            if isinstance(raw, bool) or text in _TRUE + _FALSE:
                return raw if isinstance(raw, bool) else text in _TRUE
            raise ConfigError(f"{where} {self.name}: expected true or false, got {raw!r}")
        if isinstance(raw, bool) or not isinstance(raw, (int, float)) or (
                self.kind is int and not isinstance(raw, int)):
            raise ConfigError(f"{where} {self.name}: expected {self._expected()}, got {raw!r}")
        value = self.kind(raw)
        if (self.ge is not None and value < self.ge) or (self.lt is not None
                                                          and value >= self.lt):
            raise ConfigError(f"{where} {self.name}: expected {self._expected()}, got {raw!r}")
        return value

    def _expected(self) -> str:
        what = "an integer" if self.kind is int else "a number"
        if self.ge is not None and self.lt is not None:
            return f"{what} in [{self.ge:g}, {self.lt:g})"
        return f"{what} >= {self.ge:g}" if self.ge is not None else what


SUPERNET_OPTIONS: Registry[SupernetOption] = Registry("supernet option")


def register_supernet_option(option: SupernetOption) -> SupernetOption:
    """Add ``option`` to the registry (called where it is declared)."""
    return SUPERNET_OPTIONS.register(option.name, option)


def supernet_option_help() -> str:
    """Every declared option with its default (the ``--supernet-param`` help, errors)."""
    return "Options (default): " + ", ".join(
        f"{name} ({opt.default}: {opt.help})" for name, opt in SUPERNET_OPTIONS.items()) + "."


def supernet_values(given: Mapping[str, Any], where: str = FLAG) -> dict[str, Any]:
    """``given`` checked against the declared options: their values; ConfigError in one line
    for an unknown key (naming every option) or a bad value."""
    unknown = sorted(set(given) - set(SUPERNET_OPTIONS.names()))
    if unknown:
        names = ", ".join(f"{n} ({o.default})" for n, o in SUPERNET_OPTIONS.items())
        raise ConfigError(f"{where}: no supernet option {', '.join(unknown)}; the options "
                          f"(default): {names}")
    return {k: SUPERNET_OPTIONS.get(k).value(v, where) for k, v in given.items()}


def resolve_supernet(preset: Mapping[str, Any], given: Mapping[str, Any]) -> dict[str, Any]:
    """Every declared option's value: its default, under the method's ``preset``, under the
    search's ``given`` values (both checked)."""
    values = {name: opt.default for name, opt in SUPERNET_OPTIONS.items()}
    values.update(supernet_values(preset, "supernet preset"))
    values.update(supernet_values(given))
    return values


def active(values: Mapping[str, Any]) -> list[tuple[SupernetOption, Any]]:
    """The options of ``values`` set away from their defaults, in registration order."""
    return [(SUPERNET_OPTIONS.get(k), v) for k, v in values.items()
            if k in SUPERNET_OPTIONS and v != SUPERNET_OPTIONS.get(k).default]


def builder_options(values: Mapping[str, Any]) -> dict[str, Any]:
    """The space builder's keywords of ``values`` (the options that build, away from their
    defaults)."""
    return {opt.name: opt.builds(v) for opt, v in active(values) if opt.builds is not None}


def _aux_scale(value: bool, step: int, total: int) -> dict:
    return {"aux_scale": 1.0 - step / total}  # DARTS-: beta 1 -> 0 over the search


def _drop_prob(value: float, step: int, total: int) -> dict:
    return {"drop_prob": value * step / total}  # R-DARTS (DP): 0 -> the final probability


def _after_warm_up(value: float, step: int, total: int) -> bool:
    return step >= value * total


register_supernet_option(SupernetOption(
    "partial_channels", 1, "K: ops see C/K channels (PC-DARTS: 4)", kind=int, ge=1,
    capturable=True))
register_supernet_option(SupernetOption(
    "edge_norm", False, "per-edge betas normalised over each node's inputs (PC-DARTS)",
    capturable=True))
register_supernet_option(SupernetOption(
    "aux_skip", False, "auxiliary skip beta x aux(x) on every edge, beta 1 -> 0 (DARTS-)",
    knobs=_aux_scale))
register_supernet_option(SupernetOption(
    "sampled", False, "only the drawn op runs (GDAS; with a sampling relaxation)"))
register_supernet_option(SupernetOption(
    "drop_path", 0.0, "final drop-path probability, ramped from 0 (R-DARTS DP: 0.6)",
    kind=float, ge=0, lt=1, builds=lambda value: True, knobs=_drop_prob))
register_supernet_option(SupernetOption(
    "arch_start", 0.0, "fraction of the steps before alpha first moves (PC-DARTS: 0.3)",
    kind=float, ge=0, lt=1, builds=None, arch_active=_after_warm_up, capturable=True))

__all__ = ["FLAG", "SUPERNET_OPTIONS", "SupernetOption", "active", "builder_options",
           "register_supernet_option", "resolve_supernet", "supernet_option_help",
           "supernet_values"]
