"""The official NATS-Bench / NAS-Bench-201 files as accuracy rows, and genlab's accuracy CSV.

``detect`` names the format of a path the user gave:

- ``csv``: genlab's accuracy CSV (table.py), plain text, read without running code;
- ``nats``: the NATS-Bench topology benchmark (tss), a directory such as
  ``NATS-tss-v1_0-3ffb9-simple`` or ``-full`` (``meta.pickle.pbz2`` and one
  ``<index>.pickle.pbz2`` per architecture) or one ``.pickle.pbz2`` file, read by ``nats_bench``;
- ``nb201``: NAS-Bench-201 v1.1, ``NAS-Bench-201-v1_1-096897.pth`` (a torch.save'd dict),
  read by ``nas_201_api`` (the ``nas-bench-201`` package).

The official files are pickles: loading one runs whatever code it holds. genlab opens them only
from a path the user named and only through the official package (``pip install
'genlab[nb201]'``); ``genlab nas table convert`` writes them once as the CSV (``write_csv``).

Each row is the 200-epoch test accuracy (``hp='200'``), the mean over the trained seeds
(``is_random=False``), of ``get_more_info``: CIFAR-10 from the ``cifar10`` entry (trained on
train+valid, tested on the test set, as the NB201 papers report it), CIFAR-100 and
ImageNet16-120 on their test halves.
"""

from __future__ import annotations

import csv
import importlib
import io
import math
import re
from pathlib import Path

from genlab.core.errors import ConfigError, DataError, SpecError
from genlab.core.storage.files import atomic_write_bytes, output_errors
from genlab.nas.spaces.nb201.genotype import Genotype

# genlab's CSV (table.py reads it, write_csv writes it): dataset -> its accuracy column
COLUMNS = {
    "cifar10": "CIFAR10TestAccuracy200Epochs",
    "cifar100": "CIFAR100TestAccuracy200Epochs",
    "imagenet16": "ImageNetTestAccuracy200Epochs",
}
ARCH_COLUMN = "ArchitectureString"
FORMATS = ("the accuracy CSV, the NATS-Bench topology file or directory, or the NAS-Bench-201 "
           "v1.1 .pth")
EXTRA = "pip install 'genlab[nb201]'"
# genlab's dataset -> the official one
OFFICIAL_DATASETS = {"cifar10": "cifar10", "cifar100": "cifar100",
                     "imagenet16": "ImageNet16-120"}
NATS_META = "meta.pickle.pbz2"
BZ2_MAGIC = b"BZh"
TORCH_MAGICS = (b"PK\x03\x04", b"\x80")  # torch.save: a zip archive (torch >= 1.6), a pickle
# format -> (package to import, its pip name, what the file is)
PACKAGES = {"nats": ("nats_bench", "nats_bench", "a NATS-Bench topology benchmark"),
            "nb201": ("nas_201_api", "nas-bench-201", "a NAS-Bench-201 benchmark")}


def detect(p: Path) -> str:
    """'csv' | 'nats' | 'nb201' for an existing path (DataError for a directory of neither)."""
    if p.is_dir():
        if (p / NATS_META).is_file():
            return "nats"
        raise DataError(f"NAS-Bench-201 table {p} is a directory without {NATS_META}, not a "
                        f"NATS-Bench topology directory; pass {FORMATS}")
    try:
        with p.open("rb") as fh:
            head = fh.read(4)
    except OSError as exc:
        raise DataError(f"cannot read NAS-Bench-201 table {p}: {exc}") from exc
    if head.startswith(BZ2_MAGIC):
        return "nats"
    if head.startswith(TORCH_MAGICS):
        return "nb201"
    return "csv"


def read_official(p: Path, kind: str) -> dict[str, dict[str, float]]:
    """{arch string: {'cifar10', 'cifar100', 'imagenet16'}} (%) of an official file or dir."""
    module, pip_name, what = PACKAGES[kind]
    try:
        package = importlib.import_module(module)
    except ImportError as exc:
        raise ConfigError(f"NAS-Bench-201 table {p} is {what}, read through the {pip_name} "
                          f"package, which is not installed: {EXTRA}") from exc
    try:
        if kind == "nats":
            api = package.create(str(p), "tss", fast_mode=p.is_dir(), verbose=False)
        else:
            api = package.NASBench201API(str(p), verbose=False)
        archs = list(api.meta_archs)
    except Exception as exc:  # the package raises anything on a file it cannot read
        raise DataError(f"NAS-Bench-201 table {p}: {pip_name} cannot read it as {what} "
                        f"({_reason(exc)})") from exc
    rows = {}
    fast = kind == "nats" and p.is_dir()  # fast mode keeps every architecture it has read
    for index, arch in enumerate(archs):
        key = _arch_key(p, arch)  # before the accuracies: a size (sss) file has none here
        rows[key] = _accuracies(p, api, index, arch, pip_name)
        if fast:
            api.arch2infos_dict.pop(index, None)
    if not rows:
        raise DataError(f"NAS-Bench-201 table {p} holds no architectures")
    return rows


def write_csv(rows: dict[str, dict[str, float]], path: str | Path) -> Path:
    """Write ``rows`` as genlab's accuracy CSV (NB201Table.load reads them back identically);
    atomically (core.files.atomic_write_bytes), its folder made if needed."""
    path = Path(path).expanduser()
    text = io.StringIO(newline="")
    writer = csv.writer(text)
    writer.writerow([*COLUMNS.values(), ARCH_COLUMN])
    for arch, acc in rows.items():
        writer.writerow([*(repr(float(acc[ds])) for ds in COLUMNS), arch])
    with output_errors(path, "cannot write the accuracy CSV"):
        path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, text.getvalue().encode("utf-8"))
    return path


def _arch_key(p: Path, arch) -> str:
    try:
        return Genotype.from_string(arch).to_string()
    except SpecError as exc:
        raise DataError(f"NAS-Bench-201 table {p} holds architecture {arch!r}, not an NB201 "
                        f"cell ({exc}); genlab reads the topology (tss) benchmark") from exc


def _accuracies(p: Path, api, index: int, arch: str, pip_name: str) -> dict[str, float]:
    out = {}
    for ds, name in OFFICIAL_DATASETS.items():
        try:
            acc = float(api.get_more_info(index, name, hp="200",
                                          is_random=False)["test-accuracy"])
        except Exception as exc:
            raise DataError(f"NAS-Bench-201 table {p}, architecture {index} ({arch}): "
                            f"{pip_name} gives no 200-epoch test accuracy on {name} "
                            f"({_reason(exc)})") from exc
        if not (math.isfinite(acc) and 0.0 <= acc <= 100.0):
            raise DataError(f"NAS-Bench-201 table {p}, architecture {index} ({arch}): test "
                            f"accuracy {acc} on {name} is not a percentage")
        out[ds] = acc
    return out


def _reason(exc: BaseException) -> str:
    """One line for an exception from an official package (torch's are many, coloured)."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(exc))
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    line = next((x for x in lines if x.startswith("WeightsUnpickler error")),
                lines[0] if lines else "")
    reason = f"{type(exc).__name__}: {line}" if line else type(exc).__name__
    return reason if len(reason) <= 300 else reason[:297] + "..."
