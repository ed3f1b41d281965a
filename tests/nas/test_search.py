"""End-to-end search: output contract, kill-and-resume equality, NaN handling, CLI errors."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest
import torch
from nas_reference import DARTS_V2 as V2
from nas_reference import SEARCH_CONTRACT as CONTRACT

import genlab.nas.search as search_mod
from genlab.core.errors import ConfigError, DivergedError
from genlab.nas.search import SearchConfig, run_search
from genlab.nas.spaces import get_space, space_names

TINY = dict(channels=4, cells=1, steps=33, batch_size=64, hessian_points=2, diag_batch=32)


def _cli(*args, env_extra=None, **kw):
    env = dict(os.environ, OMP_NUM_THREADS="1", GENLAB_QUIET="1", **(env_extra or {}))
    return subprocess.run([sys.executable, "-c", "from genlab.cli import main; main()", *args],
                          capture_output=True, text=True, env=env, **kw)


def test_search_writes_output_contract(tmp_path, nb201_table):
    s = run_search(SearchConfig(**TINY, reg="ber", nb201_table=str(nb201_table)), tmp_path / "r")
    on_disk = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert CONTRACT <= set(on_disk) and set(on_disk["nb201"]) == {"cifar10", "cifar100",
                                                                   "imagenet16"}
    assert on_disk["genotype"] == s["genotype"]
    assert isinstance(on_disk["param_free_ops"], int) and 0 <= on_disk["param_free_ops"] <= 6
    metrics = [json.loads(ln) for ln in (tmp_path / "r" / "metrics.jsonl").read_text().splitlines()]
    assert [m["epoch"] for m in metrics] == list(range(len(metrics)))
    assert all("arch_weights" in m and "cell_batch_entropy" in m for m in metrics)
    for png in ("arch_weights.png", "search_curves.png", "ib_plane.png"):
        assert (tmp_path / "r" / png).stat().st_size > 1000


# every space in first order; second order once per supernet class (it sees only the protocol)
@pytest.mark.parametrize("space, order", [(name, 1) for name in space_names()]
                         + [("nb201", 2), ("darts-7op", 2), ("mobilenet", 2)])
def test_every_space_searches(tmp_path, space, order, nb201_table):
    # tiny sizes; the space's own defaults are what `genlab nas search --space S` uses
    sp = get_space(space)
    cells = None if sp.proxy.cells is None else 3
    cfg = SearchConfig(space=space, order=order, channels=2, cells=cells, steps=2,
                       batch_size=16, hessian_points=1 if space in ("nb201", "s3") else 0,
                       diag_batch=8, nb201_table=str(nb201_table) if sp.table else None)
    s = run_search(cfg, tmp_path / "r")
    assert CONTRACT <= set(s) and s["space"] == space and s["order"] == order
    assert sp.format(sp.parse(s["genotype"])) == s["genotype"]
    assert list(s["alpha"]) == list(sp.alpha_specs())
    assert ("nb201" in s) == (sp.table == "nb201")
    config = json.loads((tmp_path / "r" / "config.json").read_text())
    assert config["size"] == sp.proxy.size and config["order"] == order  # resolved defaults


def test_table_refused_for_spaces_without_one(tmp_path, nb201_table, monkeypatch):
    with pytest.raises(ConfigError, match="no accuracy table"):
        run_search(SearchConfig(space="s2", nb201_table=str(nb201_table), steps=1),
                   tmp_path / "r")
    assert not (tmp_path / "r").exists()
    monkeypatch.setenv("GENLAB_NB201_TABLE", str(nb201_table))  # the environment: ignored
    s = run_search(SearchConfig(space="s2", channels=2, cells=3, steps=2, batch_size=16,
                                hessian_points=0, diag_batch=8), tmp_path / "r2")
    assert "nb201" not in s


def test_search_without_table_has_no_nb201(tmp_path, monkeypatch):
    monkeypatch.delenv("GENLAB_NB201_TABLE", raising=False)
    s = run_search(SearchConfig(**{**TINY, "steps": 11}, reg="none"), tmp_path / "r")
    assert "nb201" not in s and CONTRACT <= set(s)


def test_search_runs_at_its_thread_count_and_records_it(tmp_path, monkeypatch):
    seen = []
    real = search_mod.bilevel_step

    def spy(*args, **kwargs):
        seen.append(torch.get_num_threads())
        return real(*args, **kwargs)

    monkeypatch.setattr(search_mod, "bilevel_step", spy)
    before = torch.get_num_threads()
    run_search(SearchConfig(**{**TINY, "steps": 11, "hessian_points": 0}, reg="none", threads=2),
               tmp_path / "r")
    assert set(seen) == {2} and torch.get_num_threads() == before
    assert json.loads((tmp_path / "r" / "config.json").read_text())["threads"] == 2


def test_kill_and_resume_equals_uninterrupted(tmp_path):
    # two Hessian records in six epochs (the default's six cost 1.5 s each here)
    args = ["nas", "search", "--reg", "beta", "--steps", "66", "-C", "4", "-N", "1",
            "--seed", "3", "--hessian-points", "2"]
    full = _cli(*args, "--out", str(tmp_path / "full"), timeout=300)
    assert full.returncode == 0, full.stderr
    env = dict(os.environ, OMP_NUM_THREADS="1", GENLAB_QUIET="1")
    proc = subprocess.Popen([sys.executable, "-c", "from genlab.cli import main; main()", *args,
                             "--out", str(tmp_path / "killed")], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ckpt = tmp_path / "killed" / "checkpoint.pt"
    deadline = time.time() + 240
    while time.time() < deadline:  # kill once two epochs are checkpointed
        if ckpt.exists():
            try:
                if torch.load(ckpt, weights_only=True)["step"] >= 22:
                    break
            except Exception:  # noqa: BLE001 - being replaced right now
                pass
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (tmp_path / "killed" / "summary.json").exists(), "finished before the kill"
    again = _cli(*args, "--out", str(tmp_path / "killed"), timeout=30)
    assert again.returncode == 2 and "--resume" in again.stderr  # never overwritten silently
    resumed = _cli(*args, "--out", str(tmp_path / "killed"), "--resume", timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    a = json.loads((tmp_path / "full" / "summary.json").read_text())
    b = json.loads((tmp_path / "killed" / "summary.json").read_text())
    assert a["genotype"] == b["genotype"]
    assert a["alpha"] == b["alpha"]
    steps = [json.loads(ln)["step"] for ln in
             (tmp_path / "killed" / "metrics.jsonl").read_text().splitlines()]
    assert steps == sorted(set(steps))  # no duplicated epochs after the resume


def test_nan_loss_stops_and_keeps_last_checkpoint(tmp_path, monkeypatch):
    real = search_mod.bilevel_step
    calls = {"n": 0}

    def poisoned(*args, **kwargs):
        calls["n"] += 1
        tl, vl = real(*args, **kwargs)
        return (float("nan"), vl) if calls["n"] > 15 else (tl, vl)

    monkeypatch.setattr(search_mod, "bilevel_step", poisoned)
    with pytest.raises(DivergedError, match="checkpoint"):
        run_search(SearchConfig(**TINY, reg="none"), tmp_path / "r")
    state = torch.load(tmp_path / "r" / "checkpoint.pt", weights_only=True)
    assert state["step"] == 11 and not (tmp_path / "r" / "summary.json").exists()


@pytest.mark.parametrize("args, needle", [
    (["nas", "lookup", "|nor_conv_3x3~0|+|bogus_op~0|nor_conv_3x3~1|+|skip_connect~0|"
      "nor_conv_3x3~1|nor_conv_1x1~2|", "--nb201-table", "{table}"], "bogus_op"),
    (["nas", "lookup", "|nor_conv_3x3~0|", "--nb201-table", "{table}"], "node"),
    (["nas", "lookup", "|none~0|+|none~0|none~1|+|none~0|none~1|none~2|",
      "--nb201-table", "{missing}"], "missing.csv"),
    (["nas", "lookup", "|none~0|+|none~0|none~1|+|none~0|none~1|none~2|",
      "--nb201-table", "{badcols}"], "ArchitectureString"),
    (["nas", "search", "--out", "{out}", "--dataset", "mnist"], "dataset"),
    (["nas", "search", "--out", "{out}", "--space", "nope"], "space"),
    (["nas", "search", "--out", "{out}", "--steps", "0"], "steps"),
    (["nas", "search", "--out", "{out}", "-C", "-4"], "channels"),
    (["nas", "search", "--out", "{out}", "--dataset", "cifar10", "--data-root", "{empty}"],
     "CIFAR"),
    (["nas", "train", "|nor_conv_3x3~0|+|nor_conv_3x3~0|nor_conv_3x3~9|+|skip_connect~0|"
      "nor_conv_3x3~1|nor_conv_1x1~2|", "--out", "{out}"], "~9"),
    (["nas", "train", V2.replace("dil_conv_3x3", "conv_9x9"), "--space", "darts", "--out",
      "{out}"], "conv_9x9"),
    (["nas", "train", V2.replace("('dil_conv_3x3', 2)", "('dil_conv_3x3', 5)"), "--space",
      "darts", "--out", "{out}"], "input index 5"),
    (["nas", "train", V2.replace(", ('dil_conv_3x3', 2)]", "]"), "--space", "darts", "--out",
      "{out}"], "7 (op, input) genes"),
    (["nas", "train", V2, "--space", "s2", "--out", "{out}"], "'dil_conv_3x3'"),
    (["nas", "train", V2, "--space", "darts9", "--out", "{out}"], "'darts9'"),
    (["nas", "train", ",".join(["3x3_MBConv3"] * 20), "--space", "mobilenet", "--out",
      "{out}"], "20 choice"),
    (["nas", "train", ",".join(["zero"] + ["3x3_MBConv3"] * 20), "--space", "mobilenet",
      "--out", "{out}"], "'zero' of block 0"),
    (["nas", "search", "--out", "{out}", "--space", "mobilenet", "-N", "3"], "cells"),
    (["nas", "search", "--out", "{out}", "--order", "3"], "order"),
])
def test_cli_bad_input_one_line_exit_2(tmp_path, nb201_table, args, needle):
    (tmp_path / "badcols.csv").write_text("a,b\n1,2\n")
    (tmp_path / "empty").mkdir()
    fill = {"table": str(nb201_table), "missing": str(tmp_path / "missing.csv"),
            "badcols": str(tmp_path / "badcols.csv"), "out": str(tmp_path / "out"),
            "empty": str(tmp_path / "empty")}
    res = _cli(*[a.format(**fill) for a in args], timeout=60)
    assert res.returncode == 2, res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and needle in lines[0], res.stderr


def test_cli_lookup_prints_table_values(nb201_table):
    from nb201_world import nb201_arch_string, nb201_synthetic_accuracy

    ops = ["nor_conv_3x3", "nor_conv_3x3", "nor_conv_3x3", "skip_connect", "nor_conv_3x3",
           "nor_conv_1x1"]
    res = _cli("nas", "lookup", nb201_arch_string(ops), "--nb201-table", str(nb201_table),
               timeout=60)
    assert res.returncode == 0
    want = " / ".join(f"{v:.2f}%" for v in nb201_synthetic_accuracy(ops))
    assert res.stdout.strip() == f"{want}  (CIFAR-10 / CIFAR-100 / ImageNet16-120)"


def test_a_search_looks_its_space_and_method_up_once(tmp_path, monkeypatch):
    """The command resolves its config once into the parts it runs and hands them down."""
    from genlab.cli import main
    from genlab.nas.methods.base import METHODS
    from genlab.nas.spaces.base import SPACES

    counts = {"space": 0, "method": 0}

    def counting(registry, key):
        original = registry.get

        def get(name):
            counts[key] += 1
            return original(name)
        monkeypatch.setattr(registry, "get", get)

    counting(SPACES, "space")
    counting(METHODS, "method")
    with pytest.raises(SystemExit) as done:
        main(["nas", "search", "--steps", "2", "--hessian-points", "0", "--out",
              str(tmp_path / "r")])
    assert done.value.code == 0
    assert counts == {"space": 1, "method": 1}
