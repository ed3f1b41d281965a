"""Errors genlab raises for bad input; the CLI prints each on one line and exits with 2."""

from __future__ import annotations


class GenlabError(Exception):
    """Base of every error caused by the user's input (files, options, data)."""

    kind = "error"


class ConfigError(GenlabError, ValueError):
    """An option has a value outside its domain (non-positive size, unknown name, ...)."""

    kind = "bad option"


class DataError(GenlabError):
    """A data file is missing, unreadable, or not in the expected format."""

    kind = "bad data"


class SpecError(GenlabError, ValueError):
    """A textual specification (architecture string, label header, ...) does not parse."""

    kind = "bad specification"


class CheckpointError(GenlabError):
    """A checkpoint is missing, corrupt, or belongs to another configuration."""

    kind = "bad checkpoint"


class RunExistsError(GenlabError):
    """The output folder already holds a run; refuse to overwrite it."""

    kind = "run exists"


class RunInUseError(GenlabError):
    """Another live process is writing the same output folder."""

    kind = "run in use"


class OutputError(GenlabError):
    """The output folder cannot be written (full disk, read-only, no permission)."""

    kind = "cannot write"


class DivergedError(GenlabError):
    """Training produced a non-finite loss; the last good checkpoint is kept."""

    kind = "diverged"


class Interrupted(KeyboardInterrupt):
    """Ctrl-C during a run's loop, where it stopped: ``done`` of ``total`` ``unit``s (a
    KeyboardInterrupt still, so nothing that catches errors takes it for one)."""

    def __init__(self, done: int, total: int, unit: str = "step"):
        super().__init__(f"interrupted at {unit} {done} of {total}")
        self.done, self.total, self.unit = done, total, unit


def require_positive(name: str, value: float, *, allow_zero: bool = False) -> None:
    """Raise ConfigError unless ``value`` is positive (or non-negative with allow_zero)."""
    ok = value >= 0 if allow_zero else value > 0
    if not ok:
        bound = ">= 0" if allow_zero else "> 0"
        raise ConfigError(f"{name} must be {bound}, got {value}")


def require_at_most(name: str, value: float, limit: float) -> None:
    """Raise ConfigError unless ``value`` <= ``limit`` (the message states the limit)."""
    if value > limit:
        raise ConfigError(f"{name} must be <= {limit:,}, got {value:,}")


def require_positive_ints(**values) -> None:
    """Raise ConfigError unless every keyword value is a positive integer."""
    for name, value in values.items():
        if not isinstance(value, int) or isinstance(value, bool):
            raise ConfigError(f"{name} must be an integer, got {value!r}")
        require_positive(name, value)


def require_choice(name: str, value: str, choices) -> None:
    """Raise ConfigError unless ``value`` is one of ``choices``."""
    if value not in choices:
        raise ConfigError(f"unknown {name} {value!r}; expected one of: {', '.join(choices)}")
