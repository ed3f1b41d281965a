"""The NAS-Bench-201 accuracy table: judge a searched cell by its 200-epoch test accuracy.

The table is a CSV with one row per architecture and the columns of official.COLUMNS (public
data derived from NATS-Bench). genlab never ships it: the user points at it with
``--nb201-table`` or the environment variable GENLAB_NB201_TABLE. That path may also be the
official NATS-Bench topology file or directory or the NAS-Bench-201 v1.1 .pth, read through
their packages (official.py).
"""

from __future__ import annotations

import bisect
import csv
import math
import os
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from genlab.core.errors import ConfigError, DataError, GenlabError
from genlab.core.options import option
from genlab.nas.spaces.nb201.genotype import Genotype
from genlab.nas.spaces.nb201.official import ARCH_COLUMN, COLUMNS, FORMATS, detect, read_official

ENV_VAR = "GENLAB_NB201_TABLE"
REQUIRED = (*COLUMNS.values(), ARCH_COLUMN)  # other columns (UniqueString...) are not read
DATASETS = tuple(COLUMNS)


TABLE_HELP = ("NB201 accuracy CSV (default: $GENLAB_NB201_TABLE); convert the official files "
              "with `genlab nas table convert`.")


@dataclass
class LookupConfig:
    """The options of `genlab nas lookup`."""

    arch: str = option(None, help="Official NB201 architecture string.", argument=True,
                       required=True)
    nb201_table: str | None = option(None, help=TABLE_HELP)


@dataclass
class ConvertConfig:
    """The options of `genlab nas table convert`."""

    src: str = option(None, help="The table to read: genlab's CSV, the official NATS-Bench "
                      "topology file/dir or the NAS-Bench-201 v1.1 .pth (through their "
                      "packages: pip install 'genlab[nb201]'; those are pickles and run code "
                      "when loaded: only give a file you trust).", argument=True, required=True)
    out: str = option(None, help="The CSV to write (replaced as a whole, atomically).",
                      required=True)


class ArchitectureNotFound(GenlabError, KeyError):
    """The architecture is well formed but absent from the table."""

    kind = "not in table"

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


@dataclass
class NB201Table:
    """Accuracies (percent) of every architecture, keyed by its official string."""

    path: Path
    rows: dict[str, dict[str, float]]
    _sorted: dict[str, list[float]] = field(default_factory=dict, repr=False)

    _cache = {}  # class-level: (resolved path, mtime, size) -> NB201Table

    @classmethod
    def load(cls, path: str | Path | None = None) -> NB201Table:
        """Read the table from ``path`` (or $GENLAB_NB201_TABLE): the CSV, or an official file or
        directory (official.py); cached per file version (a directory's own mtime and size)."""
        if path is None or str(path) == "":
            path = os.environ.get(ENV_VAR, "")
            if not path:
                raise ConfigError("no NAS-Bench-201 table given: pass --nb201-table PATH or set "
                                  f"{ENV_VAR} to the accuracy CSV")
        p = Path(path).expanduser()
        if not (p.is_file() or p.is_dir()):
            raise DataError(f"NAS-Bench-201 table {p} does not exist")
        st = p.stat()
        key = (str(p.resolve()), st.st_mtime_ns, st.st_size)
        if key not in cls._cache:
            kind = detect(p)
            cls._cache[key] = cls(p, _read_rows(p) if kind == "csv" else read_official(p, kind))
        return cls._cache[key]

    def __len__(self) -> int:
        return len(self.rows)

    def __contains__(self, arch) -> bool:
        return _key(arch) in self.rows

    def lookup(self, arch: Genotype | str) -> dict[str, float]:
        """{'cifar10', 'cifar100', 'imagenet16'} test accuracies (%) of one architecture."""
        key = _key(arch)
        if key not in self.rows:
            raise ArchitectureNotFound(f"architecture {key} is not in the NAS-Bench-201 table "
                                       f"{self.path}")
        return dict(self.rows[key])

    def percentile(self, arch: Genotype | str, dataset: str = "cifar10") -> float:
        """Share (%) of all architectures whose accuracy is strictly below this one's."""
        acc = self.lookup(arch)[dataset]
        values = self._values(dataset)
        below = _bisect_left(values, acc)
        return 100.0 * below / len(values)

    def best(self, dataset: str = "cifar10") -> tuple[str, float]:
        """The architecture with the highest accuracy on ``dataset`` and that accuracy."""
        arch = max(self.rows, key=lambda a: self.rows[a][dataset])
        return arch, self.rows[arch][dataset]

    def stats(self, max_param_free: int | None = None) -> dict:
        """Mean/median/max accuracy per dataset of all cells or those with <= k param-free ops."""
        selected = [
            acc for arch, acc in self.rows.items()
            if max_param_free is None
            or Genotype.from_string(arch).param_free_count() <= max_param_free
        ]
        out = {"count": len(selected), "max_param_free": max_param_free}
        for ds in DATASETS:
            vals = [a[ds] for a in selected]
            out[ds] = {
                "mean": statistics.fmean(vals) if vals else math.nan,
                "median": statistics.median(vals) if vals else math.nan,
                "max": max(vals) if vals else math.nan,
            }
        return out

    def chance(self, dataset: str = "cifar10"):
        """The exact distribution of the accuracy of a cell drawn uniformly from the table (a
        random cell of the space: the argmax of i.i.d. alphas picks every op of an edge with
        equal chance, so every cell alike), as a :class:`genlab.core.stats.Distribution`."""
        from genlab.core.stats import distribution_of

        return distribution_of(self._values(dataset))

    def _values(self, dataset: str) -> list[float]:
        if dataset not in COLUMNS:
            raise ConfigError(f"unknown dataset {dataset!r}; expected one of: {', '.join(COLUMNS)}")
        if dataset not in self._sorted:
            self._sorted[dataset] = sorted(a[dataset] for a in self.rows.values())
        return self._sorted[dataset]


def _key(arch: Genotype | str) -> str:
    """Canonical string of a Genotype or an architecture string (SpecError if malformed)."""
    if isinstance(arch, Genotype):
        return arch.to_string()
    return Genotype.from_string(arch).to_string()


def _bisect_left(values: list[float], x: float) -> int:
    return bisect.bisect_left(values, x)


def _read_rows(p: Path) -> dict[str, dict[str, float]]:
    """Parse the CSV; DataError naming the file for missing columns or unparsable rows."""
    try:
        fh = p.open(newline="", encoding="utf-8")
    except OSError as exc:
        raise DataError(f"cannot read NAS-Bench-201 table {p}: {exc}") from exc
    try:
        with fh:
            return _parse_rows(p, csv.DictReader(fh))
    except UnicodeDecodeError as exc:
        raise DataError(f"NAS-Bench-201 table {p} is not UTF-8 text (byte {exc.start}: "
                        f"{exc.reason}); pass {FORMATS}") from exc
    except csv.Error as exc:
        raise DataError(f"NAS-Bench-201 table {p} is not a readable CSV ({exc}); pass "
                        f"{FORMATS}") from exc


def _parse_rows(p: Path, reader: csv.DictReader) -> dict[str, dict[str, float]]:
    """The rows of an open table (see _read_rows)."""
    header = reader.fieldnames or []
    missing = [c for c in REQUIRED if c not in header]
    if missing:
        raise DataError(f"NAS-Bench-201 table {p} lacks column(s) {', '.join(missing)}; "
                        f"expected columns {', '.join(REQUIRED)}")
    rows = {}
    for lineno, row in enumerate(reader, start=2):
        try:
            arch = row[ARCH_COLUMN].strip()
            rows[arch] = {ds: float(row[col]) for ds, col in COLUMNS.items()}
        except (TypeError, ValueError, AttributeError) as exc:
            raise DataError(f"NAS-Bench-201 table {p}, line {lineno}: cannot parse row "
                            f"({exc}); expected numbers in {', '.join(COLUMNS.values())}"
                            ) from exc
    if not rows:
        raise DataError(f"NAS-Bench-201 table {p} has no rows")
    return rows


def chance_record(table: NB201Table, dataset: str = "cifar10", *, command: str,
                  commit: str) -> dict:
    """The results file (genlab.core.results) of a random cell's exact accuracy distribution
    on ``dataset``: every distinct accuracy of the table (to 4 decimals) and how many cells
    have it."""
    dist = table.chance(dataset)
    counts = [round(p * len(table)) for p in dist.probabilities]
    return {
        "title": f"A random cell of the NAS-Bench-201 space: its {dataset} test accuracy",
        "command": command, "commit": commit,
        "metrics": {dataset: f"{dataset} test accuracy through the NB201 table (%)"},
        "chance": {"metric": dataset, "population": len(table),
                   "values": [round(float(v), 4) for v in dist.values], "counts": counts},
    }
