"""Tuning alike: every bench row tries its own grid of settings, scored the same way.

Each search method declares, in its registry entry, the settings `genlab nas bench --tune`
tries (``Method.tuning``; a regulariser row on DARTS: its penalty's ``tuning``): at most
``TUNING_MAX`` mappings of search options over its preset (the preset itself is ``{}``), so
every method gets the same budget. Each setting is searched and its cell retrained on the
selection seeds (``tune_seeds``), scored by the retrained cell's accuracy on the validation
half of the training data (never the test split, never the NB201 table). A setting is
eligible when no selection seed's cell has more than ``collapse_edges`` parameter-free
edges; the row's choice is its eligible setting of the highest mean validation accuracy
(ties: the earlier setting, the preset first), and when none is eligible the one of the
highest mean, marked so. The chosen setting is then used unchanged on the report seeds.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from pathlib import Path

from genlab.core.errors import ConfigError
from genlab.core.storage.files import read_json
from genlab.nas.methods import get_method
from genlab.nas.methods.base import check_tuning
from genlab.nas.regularizers import PENALTIES
from genlab.nas.search import FOLDED_SUPERNET_FIELDS, SearchConfig

#: a tuning record's score (the retrained cell's validation accuracy, percent)
SCORE = "val_acc"
#: a tuned bench's tuning table and chosen settings (``--settings-from`` reads it)
TUNING_FILE = "tuning.json"


def tuning_grid(row: str, options: dict) -> tuple[dict, ...]:
    """The settings of the bench row whose search options are ``options`` (bench.row_options):
    its regulariser's grid where the row names one (``ber``, ``darts+ber``), else its
    method's."""
    if options.get("reg") is not None:
        grid = PENALTIES.get(options["reg"]).tuning
    else:
        grid = get_method(options["method"]).tuning
    check_setting_keys(row, grid)
    return grid


def check_setting_keys(row: str, grid: Sequence[dict]) -> None:
    """ConfigError unless every key of every setting is a search option."""
    check_tuning(f"row {row}", tuple(grid))
    fields = SearchConfig.__dataclass_fields__
    for setting in grid:
        unknown = sorted(set(setting) - set(fields))
        if unknown:
            raise ConfigError(f"row {row}: tuning setting {setting} names {unknown}, which "
                              "are not search options")


def chosen_settings(path: str, rows: Sequence[str]) -> dict[str, dict]:
    """Each of ``rows``' setting as chosen by the tuned bench at ``path`` (its folder or its
    tuning.json); ConfigError when the file is missing or unreadable or lacks a row."""
    file = Path(path)
    if file.is_dir():
        file = file / TUNING_FILE
    try:
        data = read_json(file)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"--settings-from: cannot read {file} ({exc}); give a bench folder "
                          "run with --tune") from exc
    chosen = data.get("chosen") if isinstance(data, dict) else None
    if not isinstance(chosen, dict):
        raise ConfigError(f"--settings-from: {file} names no chosen settings (a bench's "
                          "tuning.json written by --tune)")
    missing = [row for row in rows if row not in chosen]
    if missing:
        raise ConfigError(f"--settings-from: {file} chose no setting for {', '.join(missing)} "
                          f"(it tuned {', '.join(chosen) or 'nothing'})")
    return {row: upgrade_setting(dict(chosen[row])) for row in rows}


def upgrade_setting(setting: dict) -> dict:
    """A setting of an older tuning.json as this version's: a supernet option it names as a
    search option (``{"partial_channels": 8}``) moves into ``supernet_params``."""
    moved = {k: setting.pop(k) for k in FOLDED_SUPERNET_FIELDS if k in setting}
    if moved:
        setting["supernet_params"] = {**moved, **setting.get("supernet_params", {})}
    return setting


def setting_text(setting: dict) -> str:
    """{} -> 'preset'; {'reg_strength': 20.0} -> 'reg_strength=20'; a part's settings
    flattened as 'relaxation.tau_max=5', the supernet options' as 'drop_path=0.2'."""
    if not setting:
        return "preset"
    parts = []
    for key, value in setting.items():
        if isinstance(value, dict):
            prefix = "" if key == "supernet_params" else f"{key.removesuffix('_params')}."
            parts += [f"{prefix}{k}={v:g}" if isinstance(v, float) else f"{prefix}{k}={v}"
                      for k, v in value.items()]
        else:
            parts.append(f"{key}={value:g}" if isinstance(value, float) else f"{key}={value}")
    return ", ".join(parts)


def score_settings(row: str, grid: Sequence[dict], records: Sequence[dict],
                   collapse_edges: int) -> tuple[list[dict], int]:
    """The tuning table's rows of one bench row and the index of its chosen setting.

    ``records``: one per (setting, seed), each with ``setting_index``, SCORE and
    ``param_free_ops``."""
    rows = []
    for k, setting in enumerate(grid):
        mine = [r for r in records if r["setting_index"] == k]
        if not mine:
            raise ConfigError(f"row {row}: no tuning record of setting {k}")
        scores = [float(r[SCORE]) for r in mine]
        worst = max(int(r["param_free_ops"]) for r in mine)
        rows.append({"row": row, "setting": setting_text(setting), "index": k,
                     "seeds": len(mine), f"{SCORE}_mean": statistics.fmean(scores),
                     f"{SCORE}_std": statistics.stdev(scores) if len(scores) > 1 else 0.0,
                     "max_param_free": worst, "eligible": worst <= collapse_edges})
    eligible = [r for r in rows if r["eligible"]] or rows
    best = max(eligible, key=lambda r: (r[f"{SCORE}_mean"], -r["index"]))
    for r in rows:
        r["chosen"] = r is best
        r["note"] = "" if best["eligible"] else "no setting eligible: the highest mean"
    return rows, best["index"]


__all__ = ["SCORE", "TUNING_FILE", "check_setting_keys", "chosen_settings", "score_settings",
           "setting_text", "tuning_grid", "upgrade_setting"]
