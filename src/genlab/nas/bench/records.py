"""A bench's per-seed records as a small CSV (``runs.csv``): written with every bench, and read
back by ``--records-from`` so that a bench continues, or is reported again, from a file
committed beside a page when its run folder is gone.

A record taken from the file replaces its job (the row and seed of the same name): only the
jobs the file lacks run. The file is checked against the bench it joins through the bench's
``config.json`` beside it (written there with it): the search options that make a job's
result (all but the row's and the seed, and those a resume may change) must be the same.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from genlab.core.errors import ConfigError, DataError
from genlab.core.storage.files import atomic_write_bytes
from genlab.core.storage.rows import append_row, csv_line, read_rows

RUNS_CSV = "runs.csv"
# every figure a bench's report reads from a record (genlab.nas.bench.report.METRICS, but the
# network's size, which comes from the genotype)
INTEGER = ("seed", "param_free_ops", "skip_ops")
FLOAT = ("mean_entropy", "cifar10", "cifar100", "imagenet16", "test_acc", "hessian_eig",
         "force_ratio", "search_seconds", "cpu_seconds")
FIELDS = ["reg", "seed", "genotype", *INTEGER[1:], *FLOAT]
REQUIRED = ("reg", "seed", "genotype")  # a file of an earlier bench may lack the others


def _text(value) -> str:
    return "" if value is None else repr(value) if isinstance(value, float) else str(value)


def write_records(path: Path, records: list[dict]) -> None:
    """``runs.csv``: one line per record (an absent figure is an empty field)."""
    lines = [csv_line(FIELDS), *(csv_line([_text(r.get(f)) for f in FIELDS]) for r in records)]
    atomic_write_bytes(Path(path), ("\n".join(lines) + "\n").encode())


def append_record(path: Path, record: dict) -> None:
    """One finished job's line, appended as soon as it finishes (a killed bench keeps it; the
    bench rewrites the whole file in job order when it ends)."""
    append_row(Path(path), FIELDS, {f: _text(record.get(f)) for f in FIELDS})


def read_records(path: str | Path) -> dict[str, dict]:
    """The records of a ``runs.csv``, by job name (``ROW-sSEED``; a later line of the same
    job replaces an earlier one), figures as numbers."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such records file (a bench's runs.csv)")
    out = {}
    rows = read_rows(path)
    columns = set(rows[0]) if rows else set(REQUIRED)
    if not set(REQUIRED) <= columns or not columns <= set(FIELDS):
        raise DataError(f"{path}: columns {sorted(columns)} are not a bench's runs.csv "
                        f"({', '.join(FIELDS)})")
    for k, row in enumerate(rows, start=2):
        try:
            record = {"reg": row["reg"], "genotype": row["genotype"]}
            record.update({f: int(row[f]) if row.get(f) else None for f in INTEGER})
            record.update({f: float(row[f]) if row.get(f) else None for f in FLOAT})
        except ValueError as exc:
            raise DataError(f"{path}, line {k}: {exc}") from None
        if record["seed"] is None or not row["reg"] or not row["genotype"]:
            raise DataError(f"{path}, line {k}: a record needs its row, seed and genotype")
        if any(isinstance(v, float) and not math.isfinite(v) for v in record.values()):
            raise DataError(f"{path}, line {k}: a figure is not finite")
        out[f"{record['reg']}-s{record['seed']}"] = record
    return out


# the bench options besides the search's that make a job's record: the retraining budget and
# where the rows' settings come from
RESULT_OPTIONS = ("retrain", "retrain_epochs", "retrain_channels", "retrain_cells",
                  "settings_from")


def check_source(path: str | Path, bench: dict, free: tuple[str, ...]) -> None:
    """Refuse records made by another bench: the ``config.json`` beside ``path`` (its bench's)
    must hold the same search options as ``bench`` (a bench's config as a dict) but ``free``
    (the row's and the seed's, and those a resume may change), and the same retraining
    budget. Without that file the records are refused: nothing would say how they were
    made."""
    config = Path(path).with_name("config.json")
    if not config.is_file():
        raise DataError(f"{path}: no config.json beside it (the bench's own, copied with "
                        "runs.csv): the records' options cannot be checked")
    try:
        theirs = json.loads(config.read_text())
        pairs = {f"search.{k}": (v, bench["search"][k]) for k, v in theirs["search"].items()
                 if k in bench["search"] and k not in free}
    except (ValueError, KeyError, TypeError, AttributeError):
        raise DataError(f"{config}: not a bench's config.json (no search options)") from None
    pairs.update({k: (theirs[k], bench[k]) for k in RESULT_OPTIONS if k in theirs})
    differ = sorted(k for k, (a, b) in pairs.items() if a != b)
    if differ:
        raise ConfigError(f"--records-from {path}: made with other options ("
                          + ", ".join(f"{k} {pairs[k][0]!r} there, {pairs[k][1]!r} here"
                                      for k in differ[:4]) + ")")
