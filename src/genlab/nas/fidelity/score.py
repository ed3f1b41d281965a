"""`genlab nas score`: zero-cost proxies over NB201 cells, and their tau against the table.

Every cell (the protocol's seeded draw, or the cells given with ``--arch``) is built as its
NB201 network (``-C`` channels, ``-N`` cells per stage: NAS-Bench-201's 16 and 5 by default)
for the data set's channels and classes, initialised from ``--seed`` (the same stream for
every cell), and scored by each proxy of ``--proxy`` on one seeded batch of the data set's
training images (genlab.nas.fidelity.zero_cost). One row per cell is appended to scores.csv
as soon as it is scored: ``--resume`` skips the cells already there. With the NB201 table,
taus.json and scores.md hold Kendall's tau-b of each proxy against the table's CIFAR-10,
CIFAR-100 and ImageNet16-120 columns, with bootstrap intervals (genlab.nas.fidelity.report).
"""

from __future__ import annotations

import copy
import time
from dataclasses import asdict, dataclass, replace

import torch

from genlab.core.errors import ConfigError
from genlab.core.options import check_options, option
from genlab.core.progress import progress
from genlab.core.report import markdown_table
from genlab.core.runs import RunDir
from genlab.core.seeding import fixed_threads, make_generator, seed_everything
from genlab.core.storage.files import atomic_write_bytes, write_json
from genlab.core.storage.rows import append_row, read_rows, start_from
from genlab.nas.data import check_dataset, default_size, load_image_data
from genlab.nas.fidelity.draw import CellsOptions, DrawnCell
from genlab.nas.fidelity.report import tau_row
from genlab.nas.fidelity.zero_cost import BATCH, ZERO_COST
from genlab.nas.spaces import resolve_table
from genlab.nas.spaces.nb201.network import build_network

SCORES = "scores.csv"
TABLE_COLUMNS = ("cifar10", "cifar100", "imagenet16")
CELL_FIELDS = ["index", "arch", "group", "param_free"]


@dataclass
class ScoreConfig(CellsOptions):
    """Options of `genlab nas score`."""

    proxy: list[str] = option(factory=lambda: list(ZERO_COST.names()), parse="list",
                              choices="genlab.nas.fidelity.zero_cost:ZERO_COST",
                              help="Zero-cost proxies, comma-separated.")
    dataset: str = option("shapes", help="Data set whose batch the data-dependent proxies "
                          "read (a registered one, or folder:PATH).",
                          choices="genlab.nas.data:DATASETS", checked=False)
    data_root: str | None = option(None, help="Folder with the data set's files.")
    size: int | None = option(None, help="Input side (default: the data set's own, else 32).",
                              gt=0, parse="square")
    channels: int = option(16, help="Width C of the scored networks (NB201: 16).", gt=0,
                           flags=("-C",))
    cells: int = option(5, help="Cells per stage N of the scored networks (NB201: 5).", gt=0,
                        flags=("-N",))
    seed: int = option(0, help="Seed of every network's initialisation and of the batch.",
                       ge=0)
    nb201_table: str | None = option(None, help="NB201 accuracy CSV (default: "
                                     "$GENLAB_NB201_TABLE): the taus; without it, scores only.")
    threads: int = option(1, help="torch CPU threads.", ge=0)
    scores_from: str | None = option(None, help="Begin --out's scores.csv as a copy of this "
                                     "file (another run's, or one committed beside a page): "
                                     "its cells are not scored again; the file is not "
                                     "touched.")

    def validate(self) -> None:
        check_options(self)
        for name in self.proxy:
            ZERO_COST.canonical(name)
        if not self.proxy:
            raise ConfigError("--proxy names no zero-cost proxy")
        check_dataset(self.dataset, self.data_root)
        self.selected_cells()  # malformed --arch, an impossible draw

    def resolved(self) -> ScoreConfig:
        size = self.size or default_size(self.dataset) or 32
        return replace(self, size=size, proxy=[ZERO_COST.canonical(p) for p in self.proxy])


def score_fields(proxies: list[str]) -> list[str]:
    return [*CELL_FIELDS, *proxies, "seconds"]


def run_score(cfg: ScoreConfig, out, *, resume: bool = False, progress_bar=None) -> dict:
    """Score every cell (resumable), then the taus when the table is given; returns them."""
    cfg.validate()
    cfg = cfg.resolved()
    table = resolve_table(cfg.nb201_table)
    cells = cfg.selected_cells()
    run = RunDir(out, asdict(cfg), resume=resume,
                 resume_free=("nb201_table", "threads", "scores_from"))
    path = run.file(SCORES)
    fields = score_fields(cfg.proxy)
    start_from(path, cfg.scores_from, fields)
    done = {r["arch"] for r in read_rows(path, fields)}
    with fixed_threads(cfg.threads):
        data = load_image_data(cfg.dataset, cfg.data_root, size=cfg.size, seed=cfg.seed)
        pick = torch.randperm(len(data.train), generator=make_generator(cfg.seed, 404))[:BATCH]
        images, labels = data.train.images[pick], data.train.labels[pick]
        todo = [c for c in cells if c.arch not in done]
        with progress(len(cells), "zero-cost scores", progress_bar,
                      completed=len(cells) - len(todo)) as tick:
            for cell in todo:
                append_row(path, fields, score_cell(cfg, cell, images, labels, data))
                tick(1)
    rows = read_rows(path, fields)
    result = {"cells": len(rows), "proxies": cfg.proxy,
              "cpu_hours": sum(float(r["seconds"]) for r in rows if r["seconds"]) / 3600}
    if table is not None:
        result["taus"] = score_taus(rows, cfg.proxy, table)
        write_json(run.file("taus.json"), result["taus"])
        atomic_write_bytes(run.file("scores.md"),
                           markdown_table(result["taus"], digits=3).encode())
    run.write_summary(result)
    run.close()
    return result


def score_cell(cfg: ScoreConfig, cell: DrawnCell, images, labels, data) -> dict:
    """One row of scores.csv: the cell and each proxy's score of its fresh network."""
    row = {"index": cell.index, "arch": cell.arch, "group": cell.group,
           "param_free": cell.param_free}
    start = time.process_time()
    seed_everything(cfg.seed)  # every cell: the same initialisation stream
    fresh = build_network(cell.arch, data.num_classes, cfg.channels, cfg.cells,
                          data.in_channels)
    for name in cfg.proxy:  # each proxy scores its own copy of the untouched network
        row[name] = repr(ZERO_COST.get(name).score(copy.deepcopy(fresh), images, labels))
    row["seconds"] = f"{time.process_time() - start:.3f}"
    return row


def score_taus(rows: list[dict], proxies: list[str], table) -> list[dict]:
    """One row per (proxy, column, cell group): tau against the table, bootstrap interval."""
    out = []
    for name in proxies:
        for group in ("all", *sorted({r["group"] for r in rows})):
            chosen = [r for r in rows if group == "all" or r["group"] == group]
            truth = [table.lookup(r["arch"]) for r in chosen]
            x = [float(r[name]) for r in chosen]
            for col in TABLE_COLUMNS:
                row = tau_row(name, x, [t[col] for t in truth])
                out.append({"proxy": name, "cells": group, "column": col,
                            **{k: row[k] for k in ("tau", "low", "high")}, "n": len(chosen)})
    return out
