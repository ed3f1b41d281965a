"""Options declared once: a config dataclass field carries everything about its option.

A command's config dataclass is the only place an option exists. Each field is made with
:func:`option`, which records its help text, its choices (a tuple, or the registry that holds
them, named ``"package.module:attribute"`` so that nothing heavy is imported to list them),
its limits and, for values that are not plain scalars, how the command line spells them::

    @dataclass
    class TrainConfig:
        epochs: int = option(20, help="Epochs.", gt=0)
        model: str = option("small", help="Model.", choices="package.models:MODELS")
        seeds: list[int] = option(factory=lambda: [0, 1, 2], help="Seeds.", parse="seeds")

:func:`check_options` validates a config against those declarations (types, choices,
limits) and the command line (``genlab.cli.commands``) is generated from the same fields.
``None`` is always accepted for a field whose default is ``None`` (it means "resolved later":
the space's proxy default, the method's preset).

Spellings (``parse``) for values that are not one scalar:

- ``"list"``: ``a,b,c`` -> a list of the field's element type (str, int or float); on the
  command line the option may also be repeated (``--target a --target b``);
- ``"seeds"``: ``0,1,2``, ``0-4`` or ``0-2,7`` -> a list of ints;
- ``"size"``: ``32`` or ``32x48`` -> ``[h, w]`` (``ge`` bounds each side);
- ``"square"``: ``32`` or ``32x32`` -> an int (unequal sides are refused);
- ``"params"``: repeated ``KEY=VALUE`` -> a dict (numbers become numbers).
"""

from __future__ import annotations

import dataclasses
import json
import shlex
import typing
from collections.abc import Callable, Sequence
from dataclasses import MISSING, dataclass
from typing import Any

from genlab.core.errors import ConfigError
from genlab.core.registry import import_path

SPELLINGS = ("list", "seeds", "size", "square", "params")
KEY = "genlab_option"  # the metadata key of a field made by ``option``


@dataclass(frozen=True)
class OptionSpec:
    """What the command line and the validation need to know of one field."""

    help: str
    choices: tuple[str, ...] | str | Callable[[], Sequence[str]] | None = None
    checked: bool = True  # False: choices are listed in the help, the command checks values
    more: str | None = None  # "package.module:function" whose text completes the help
    ge: float | None = None  # value >= ge
    gt: float | None = None  # value > gt
    le: float | None = None  # value <= le
    flags: tuple[str, ...] = ()  # extra spellings, e.g. ("-C",)
    parse: str | None = None  # one of SPELLINGS
    argument: bool = False  # a positional argument rather than an option
    required: bool = False  # must be given (a field without a usable default)
    cli: bool = True  # False: a library-only field (not on the command line)
    empty: bool = False  # seeds: an empty list is allowed ("" on the command line: none)


def option(default: Any = MISSING, *, help: str, factory: Callable[[], Any] | None = None,
           choices=None, checked: bool = True, more: str | None = None,
           ge: float | None = None, gt: float | None = None, le: float | None = None,
           flags: Sequence[str] = (), parse: str | None = None,
           argument: bool = False, required: bool = False, cli: bool = True,
           empty: bool = False) -> Any:
    """A dataclass field that declares its option (see the module doc)."""
    if parse is not None and parse not in SPELLINGS:
        raise ValueError(f"parse={parse!r}; expected one of {SPELLINGS}")
    if isinstance(choices, list):
        choices = tuple(choices)
    spec = OptionSpec(help=help, choices=choices, checked=checked, more=more, ge=ge, gt=gt,
                      le=le,
                      flags=tuple(flags), parse=parse, argument=argument, required=required,
                      cli=cli, empty=empty)
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata={KEY: spec})
    return dataclasses.field(default=default, metadata={KEY: spec})


def option_like(cls, name: str, *, default: Any = MISSING,
                factory: Callable[[], Any] | None = None, **changes) -> Any:
    """A field declared as the field ``name`` of the config ``cls`` (its default, help,
    choices, limits), with ``default`` (or ``factory``) and any of ``changes`` (help=...,
    ge=...) replaced: a flat command config that builds a nested one restates none of its
    options."""
    f = cls.__dataclass_fields__[name]
    declared = spec_of(f)
    if declared is None:
        raise ValueError(f"{cls.__name__}.{name} is not declared with option()")
    spec = dataclasses.replace(declared, **changes)
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata={KEY: spec})
    if default is not MISSING:
        return dataclasses.field(default=default, metadata={KEY: spec})
    if f.default_factory is not MISSING:
        return dataclasses.field(default_factory=f.default_factory, metadata={KEY: spec})
    return dataclasses.field(default=f.default, metadata={KEY: spec})


@dataclass(frozen=True)
class Wrapping:
    """What a wrapper command's config takes of the config of the command it wraps (the
    ``wrapping`` of a class made with :func:`takes_options`)."""

    wrapped: type
    names: tuple[str, ...]  # the wrapped options it takes: same meaning, named prefix + name
    sets: tuple[str, ...]  # those it does not take: it sets them for each run itself
    prefix: str = ""

    def values(self, cfg, names: Sequence[str] | None = None,
               but: Sequence[str] = ()) -> dict[str, Any]:
        """{name: value in ``cfg``} of the options taken (those among ``names`` if given, none
        of ``but``; the wrapped config's names): keyword arguments of the wrapped config.
        Lists are copied."""
        return {n: _copied(getattr(cfg, self.prefix + n)) for n in self.names
                if (names is None or n in names) and n not in but}


def _copied(value: Any) -> Any:
    return list(value) if isinstance(value, list) else dict(value) if isinstance(
        value, dict) else value


def takes_options(wrapped, *, sets: Sequence[str] = (), prefix: str = ""):
    """Class decorator, under ``@dataclass``: the config of a command that wraps another
    takes every option of the wrapped config ``wrapped`` except those in ``sets``::

        @dataclass
        @takes_options(TrainConfig, sets=("seed", "model"))  # set per run by the study
        class StudyConfig(Options):
            seeds: list[int] = option(...)                 # its own options
            steps: int = option_like(TrainConfig, "steps", default=20000)  # another default

    Each option of ``wrapped`` that the class does not declare becomes one of its fields,
    declared as ``wrapped`` declares it (default, help, choices, limits), after the class's
    own fields, so a new option of the wrapped command reaches the wrapper with no edit. A
    field the class declares under a wrapped name is its declaration of that option (another
    default or help) and is still taken, unless the name is in ``sets`` (then it is an
    option of the wrapper's own that bears the name). With ``prefix`` each option is named
    ``prefix + name`` (``--retrain-epochs`` for a wrapped ``epochs``), without the wrapped
    option's extra spellings (its short flags). ``cls.wrapping`` (:class:`Wrapping`) records
    which options are taken and ``cls.wrapping.values(cfg)`` are their values; a class that
    wraps several configs (one decorator each) has them all in ``cls.wrappings`` (wrapped
    class -> Wrapping) and no single ``wrapping``."""
    declared = [f.name for f, _ in option_fields(wrapped)]
    unknown = [n for n in sets if n not in declared]
    if unknown:
        raise ValueError(f"sets names {unknown}, which are not options of {wrapped.__name__}")

    def decorate(cls):
        annotations = cls.__dict__.get("__annotations__")
        if annotations is None:
            annotations = {}
            cls.__annotations__ = annotations
        inherited = getattr(cls, "__dataclass_fields__", {})  # a dataclass base's fields
        types = field_types(wrapped)
        for name in declared:
            own = prefix + name
            if name not in sets and own not in annotations and own not in inherited:
                annotations[own] = types[name]
                setattr(cls, own, option_like(wrapped, name, flags=()) if prefix
                        else option_like(wrapped, name))
        wrapping = Wrapping(wrapped, tuple(n for n in declared if n not in sets), tuple(sets),
                            prefix)
        wrappings = dict(cls.__dict__.get("wrappings", {}))
        wrappings[wrapped] = wrapping
        cls.wrappings = wrappings
        cls.wrapping = wrapping if len(wrappings) == 1 else None
        return cls

    return decorate


def spec_of(f: dataclasses.Field) -> OptionSpec | None:
    return f.metadata.get(KEY)


def option_fields(cls) -> list[tuple[dataclasses.Field, OptionSpec]]:
    """(field, spec) of every declared option of a config class, in field order."""
    return [(f, s) for f in dataclasses.fields(cls) if (s := spec_of(f)) is not None]


def field_default(f: dataclasses.Field) -> Any:
    if f.default is not MISSING:
        return f.default
    if f.default_factory is not MISSING:
        return f.default_factory()
    return None


def field_types(cls) -> dict[str, Any]:
    """Evaluated annotations of a dataclass (they may be strings under postponed
    evaluation)."""
    import sys

    module = sys.modules.get(cls.__module__)
    return typing.get_type_hints(cls, vars(module) if module else None)


def base_type(annotation: Any) -> tuple[Any, bool]:
    """(the type behind Optional[...], whether None is allowed)."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        allows_none = len(args) < len(typing.get_args(annotation))
        return (args[0] if len(args) == 1 else annotation), allows_none
    return annotation, False


def element_type(annotation: Any) -> Any:
    """list[int] -> int; dict[str, float] -> float; anything else -> str."""
    args = typing.get_args(base_type(annotation)[0])
    return args[-1] if args else str


def choice_names(choices) -> tuple[str, ...]:
    """The accepted names of a ``choices`` declaration (a registry is asked for its choices,
    aliases included)."""
    if choices is None:
        return ()
    if isinstance(choices, tuple):
        return choices
    obj = import_path(choices) if isinstance(choices, str) else choices
    if hasattr(obj, "choices") and callable(obj.choices):  # a Registry
        return tuple(obj.choices())
    if callable(obj) and not isinstance(obj, (dict, list, tuple)):
        obj = obj()
    return tuple(obj)


def describe(spec: OptionSpec) -> str:
    """The help text with the choices (from their registry) and the limits appended."""
    text = spec.help.rstrip()
    names = choice_names(spec.choices)
    if names:
        text += f" Choices: {' | '.join(map(str, names))}."
    if spec.more:
        text += " " + import_path(spec.more)()
    bounds = [f">= {_bound(spec.ge)}" if spec.ge is not None else "",
              f"> {_bound(spec.gt)}" if spec.gt is not None else "",
              f"<= {_bound(spec.le)}" if spec.le is not None else ""]
    bounds = [b for b in bounds if b]
    if bounds:
        text += f" ({', '.join(bounds)})"
    return text


# -- spellings: text on a command line -> value --------------------------------------------

def parse_seeds(text: str, name: str = "seeds") -> list[int]:
    """'0,1,2' -> [0, 1, 2]; '0-4' -> [0, 1, 2, 3, 4]; '0-2,7' -> [0, 1, 2, 7]."""
    seeds: list[int] = []
    try:
        for part in (p.strip() for p in str(text).split(",")):
            if not part:
                continue
            first, sep, last = part.partition("-")
            if sep:
                lo, hi = int(first), int(last)
                if hi < lo:
                    raise ValueError(f"range {part!r} runs backwards")
                seeds.extend(range(lo, hi + 1))
            else:
                seeds.append(int(part))
    except ValueError as exc:
        raise ConfigError(f"{name}: expected seeds such as 0,1,2 or 0-4, got {text!r}; "
                          f"{exc}") from exc
    if not seeds:
        raise ConfigError(f"{name}: no seed in {text!r}; give e.g. 0,1,2 or 0-4")
    if len(set(seeds)) != len(seeds):
        raise ConfigError(f"{name}: a seed is repeated in {text!r}")
    if min(seeds) < 0:
        raise ConfigError(f"{name}: seeds are >= 0, got {text!r}")
    return seeds


def parse_size(text: str | int, name: str = "size", *, square: bool = False,
               minimum: int = 1) -> tuple[int, int]:
    """'32' -> (32, 32); '32x48' -> (32, 48). ``square``: refuse unequal sides."""
    parts = str(text).lower().replace(" ", "").split("x")
    try:
        if len(parts) not in (1, 2):
            raise ValueError
        sides = [int(p) for p in parts]
    except ValueError as exc:
        raise ConfigError(f"{name}: expected N or HEIGHTxWIDTH (e.g. 32 or 32x48), got "
                          f"{text!r}") from exc
    h, w = sides if len(sides) == 2 else (sides[0], sides[0])
    if square and h != w:
        raise ConfigError(f"{name}: this command needs a square size, got {text!r}; "
                          f"give one number, e.g. {h}")
    if min(h, w) < minimum:
        raise ConfigError(f"{name}: sides must be >= {minimum} pixels, got {text!r}")
    return h, w


def minimum_side(spec: OptionSpec) -> int:
    return int(spec.ge) if spec.ge is not None else 1


def _scalar(text: str, kind: Any, name: str) -> Any:
    if kind is bool:
        low = str(text).strip().lower()
        if low in ("1", "true", "yes", "on"):
            return True
        if low in ("0", "false", "no", "off"):
            return False
        raise ConfigError(f"{name}: expected true or false, got {text!r}")
    if kind in (int, float):
        try:
            value = float(text)
        except ValueError as exc:
            raise ConfigError(f"{name}: expected a number, got {text!r}") from exc
        if kind is int:
            if value != int(value):
                raise ConfigError(f"{name}: expected an integer, got {text!r}")
            return int(value)
        return value
    return str(text).strip()


def _number_or_text(text: str) -> Any:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return {"true": True, "false": False, "none": None}.get(text.lower(), text)


def parse_value(text: Any, spec: OptionSpec, annotation: Any, name: str) -> Any:
    """A command-line (or config-file) spelling -> the field's value (ConfigError naming the
    field on bad text). Values that already have the field's shape pass through."""
    if text is None:
        return None
    parse = _SPELLING_PARSERS.get(spec.parse)
    return text if parse is None else parse(text, spec, annotation, name)


def _parse_seeds(text: Any, spec: OptionSpec, annotation: Any, name: str) -> list[int]:
    if isinstance(text, (list, tuple)):
        return list(text)
    return [] if spec.empty and not str(text).strip() else parse_seeds(text, name)


def _parse_list(text: Any, spec: OptionSpec, annotation: Any, name: str) -> list:
    if isinstance(text, (list, tuple)):
        return list(text)
    kind = element_type(annotation)
    return [_scalar(v, kind, name) for v in str(text).split(",") if v.strip()]


def _parse_size(text: Any, spec: OptionSpec, annotation: Any, name: str) -> Any:
    if isinstance(text, (list, tuple)):
        return list(text)
    if isinstance(text, int):
        return text
    return list(parse_size(text, name, minimum=minimum_side(spec)))


def _parse_square(text: Any, spec: OptionSpec, annotation: Any, name: str) -> int:
    return text if isinstance(text, int) else parse_size(text, name, square=True)[0]


def _parse_params(text: Any, spec: OptionSpec, annotation: Any, name: str) -> dict[str, Any]:
    if isinstance(text, dict):
        return dict(text)
    items = [text] if isinstance(text, str) else list(text)
    params: dict[str, Any] = {}
    for item in items:
        key, sep, value = str(item).partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"{name}: expected KEY=VALUE, got {item!r}")
        params[key.strip()] = _number_or_text(value.strip())
    return params


# each spelling of SPELLINGS: (text, spec, annotation, name) -> the value
_SPELLING_PARSERS: dict[str | None, Callable[[Any, OptionSpec, Any, str], Any]] = {
    "seeds": _parse_seeds, "list": _parse_list, "size": _parse_size, "square": _parse_square,
    "params": _parse_params}


def seed_list(seeds, first: int = 0, name: str = "seeds", *,
              allow_empty: bool = False) -> list[int]:
    """A study's seeds as a list: a list is checked (integers >= 0, no repeat, non-empty
    unless ``allow_empty``); an int n, the count earlier versions took, means
    ``first .. first + n - 1``. The one check of seed lists for every app."""
    if isinstance(seeds, bool):
        raise ConfigError(f"{name}: expected a list of seeds, got {seeds!r}")
    if isinstance(seeds, int):
        if seeds < (0 if allow_empty else 1):
            raise ConfigError(f"{name}: a count of seeds must be >= 1, got {seeds}")
        seeds = range(first, first + seeds)
    try:
        values = [int(s) for s in seeds]
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{name}: expected a list of integer seeds, got {seeds!r}") from exc
    if any(v != s for v, s in zip(values, seeds, strict=True)):
        raise ConfigError(f"{name}: expected integer seeds, got {list(seeds)!r}")
    if not values and not allow_empty:
        raise ConfigError(f"{name}: give at least one seed, e.g. 0,1,2 or 0-4")
    if values and min(values) < 0:
        raise ConfigError(f"{name}: seeds are >= 0, got {values}")
    if len(set(values)) != len(values):
        raise ConfigError(f"{name}: a seed is repeated in {values}")
    return values


class Options:
    """Base of a command's config: a seeds field (``parse="seeds"``) given as a count n, as
    earlier versions took it, becomes the list ``seed .. seed + n - 1`` (``seed``: the
    config's own field if it has one, else 0). The one place of that rule."""

    def __post_init__(self) -> None:
        for f, spec in option_fields(type(self)):
            value = getattr(self, f.name)
            if spec.parse == "seeds" and isinstance(value, int) and not isinstance(value, bool):
                setattr(self, f.name, seed_list(value, getattr(self, "seed", 0), f.name,
                                                allow_empty=spec.empty))


# -- validation ------------------------------------------------------------------------

def _bound(value: float) -> str:
    """A limit as a message states it: 65,536 for an integer, 0.5 for a fraction."""
    return f"{value:,}" if float(value).is_integer() else f"{value:g}"


def _check_bounds(name: str, value: Any, spec: OptionSpec) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return
    if spec.gt is not None and not value > spec.gt:
        raise ConfigError(f"{name} must be > {_bound(spec.gt)}, got {value}")
    if spec.ge is not None and not value >= spec.ge:
        raise ConfigError(f"{name} must be >= {_bound(spec.ge)}, got {value}")
    if spec.le is not None and not value <= spec.le:
        raise ConfigError(f"{name} must be <= {_bound(spec.le)}, got {value:,}")


def _check_type(name: str, value: Any, kind: Any) -> None:
    if kind is bool:
        ok = isinstance(value, bool)
    elif kind is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif kind is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    elif kind is str:
        ok = isinstance(value, str)
    else:
        return
    if not ok:
        raise ConfigError(f"{name} must be {kind.__name__}, got {value!r}")


def check_options(cfg) -> None:
    """Validate every declared field of ``cfg`` against its declaration: its type, its
    choices and its limits (each element of a list). ConfigError names the field."""
    types = field_types(type(cfg))
    for f, spec in option_fields(type(cfg)):
        value = getattr(cfg, f.name)
        kind, allows_none = base_type(types[f.name])
        if value is None:
            if spec.required:
                raise ConfigError(f"{f.name} is required")
            if allows_none or field_default(f) is None:
                continue
            raise ConfigError(f"{f.name} must be given, got None")
        values = value if isinstance(value, (list, tuple)) and spec.parse in (
            "list", "seeds") else [value]
        scalar = element_type(kind) if spec.parse in ("list", "seeds") else kind
        if spec.parse in (None, "list", "seeds"):
            for v in values:
                _check_type(f.name, v, scalar)
        if spec.parse == "seeds":
            seed_list(value, name=f.name, allow_empty=spec.empty)  # integers >= 0, no repeat
        names = choice_names(spec.choices) if spec.checked else ()
        if spec.parse == "size":
            if not (isinstance(value, list) and len(value) == 2
                    and all(isinstance(v, int) and v >= minimum_side(spec) for v in value)):
                raise ConfigError(f"{f.name} must be two sides >= {minimum_side(spec)} pixels, "
                                  f"got {value}")
            continue
        for v in values:
            if names and v not in names:
                raise ConfigError(f"unknown {f.name} {v!r}; expected one of: "
                                  f"{', '.join(map(str, names))}")
            _check_bounds(f.name, v, spec)


# -- config files ---------------------------------------------------------------------------

RECORD_KEY = "genlab_version"  # a key every run's config.json has: the file is a run record


def read_config_file(path) -> dict:
    """The mapping in a config file: JSON (a run's config.json) or YAML (.yaml / .yml)."""
    from pathlib import Path

    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config: no file {path}")
    text = path.read_text()
    if path.suffix.lower() in (".yaml", ".yml"):
        import yaml

        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ConfigError(f"config: {path} is not valid YAML ({exc})") from exc
    else:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"config: {path} is not valid JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"config: {path} must hold a mapping of option names to values")
    return data


def config_values(cls, data: dict, source: str = "config") -> dict:
    """The entries of ``data`` that are fields of ``cls``, parsed to their values.

    A run's config.json (it has ``genlab_version``) also records facts that are not options
    (the resolved regulariser, the version): those are skipped. Any other unknown key is a
    mistake and refused, naming the known ones. A flat command config whose run records nest
    its options (a bench's search template) lays a record out as its fields with a classmethod
    ``record_options(data) -> dict``."""
    adapt = getattr(cls, "record_options", None)
    if adapt is not None and RECORD_KEY in data:  # a run record laid out otherwise (nested)
        data = adapt(data)
    names = {f.name: (f, s) for f, s in option_fields(cls)}
    types = field_types(cls)
    unknown = [k for k in data if k not in names]
    if unknown and RECORD_KEY not in data:
        raise ConfigError(f"{source}: unknown option(s) {', '.join(sorted(unknown))}; "
                          f"expected some of: {', '.join(names)}")
    return {k: parse_value(v, names[k][1], types[k], k) for k, v in data.items() if k in names}


def config_dict(cfg) -> dict:
    """The declared options of ``cfg`` as plain values (what --print-config prints)."""
    return {f.name: getattr(cfg, f.name) for f, _ in option_fields(type(cfg))}


def seed_text(seeds: Sequence[int]) -> str:
    """[0, 1, 2, 3, 7] -> '0-3,7' (the --seeds spelling)."""
    parts, ordered = [], sorted(seeds)
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        parts.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(parts)


def command_line(prefix: str, cfg, out) -> str:
    """The command that makes ``cfg`` in ``out``: ``prefix --out OUT`` and every option that
    differs from its default, as the command line spells it."""
    default, parts = type(cfg)(), [*prefix.split(), "--out", str(out)]
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        if value == getattr(default, f.name):
            continue
        flag, spec = "--" + f.name.replace("_", "-"), spec_of(f)
        parse = spec.parse if spec else None
        if isinstance(value, bool):
            parts.append(flag if value else "--no-" + f.name.replace("_", "-"))
        elif parse == "seeds":
            parts += [flag, seed_text(value)]
        elif parse == "size":
            parts += [flag, "x".join(map(str, value))]
        elif isinstance(value, list):
            parts += [flag, ",".join(map(str, value))]
        elif isinstance(value, dict):  # "params": the flag repeated, KEY=VALUE
            for key, v in value.items():
                parts += [flag, f"{key}={v}"]
        else:
            parts += [flag, str(value)]
    return " ".join(shlex.quote(p) for p in parts)
