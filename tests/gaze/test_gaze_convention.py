"""The gaze commands speak the common convention (docs/cli.md, issue 18): --size N or HxW,
--seeds lists, --threads 0 = torch's default (restored after), --resume a flag that makes a
finished run a no-op, --device, help from the registries, the closing line."""

import gc
import json
import os

import pytest
import torch

from genlab.cli import main
from genlab.core.storage.files import jsonable
from genlab.gaze.studies import bench as bench_mod
from genlab.gaze.studies import paper as paper_mod
from genlab.gaze.studies.bench import BenchConfig, bench_specs
from genlab.gaze.studies.paper import PaperConfig
from genlab.gaze.train import GazeTrainConfig, train_gaze

H, W = 16, 24
TINY = ["--width", "4", "--steps", "2", "--eval-every", "2", "--train-count", "64",
        "--test-count", "16", "--experts", "2"]


def _run(argv, capsys):
    try:
        main(argv)
    except SystemExit as exc:
        code = exc.code or 0
    else:
        code = 0
    return code, capsys.readouterr()


def _stamps(folder):
    return {p.name: (os.stat(p).st_mtime_ns, p.read_bytes()) for p in sorted(folder.iterdir())}


def test_train_resume_on_a_finished_run_rewrites_nothing(tmp_path, capsys):
    out = tmp_path / "run"
    argv = ["gaze", "train", "--out", str(out), *TINY, "--size", f"{H}x{W}"]
    code, first = _run(argv, capsys)
    assert code == 0, first.err
    assert first.out.strip().splitlines()[-1] == f"outputs in {out}"
    gc.collect()  # the run's folder object lets go of its lock (and its .lock file)
    before = _stamps(out)
    assert {"summary.json", "checkpoint.pt", "metrics.jsonl", "config.json",
            "loss_curves.png"} <= set(before)
    code, again = _run([*argv, "--resume"], capsys)
    assert code == 0, again.err
    assert again.out == first.out  # the same figures, read back from summary.json
    gc.collect()
    assert _stamps(out) == before  # no file rewritten: bytes and modification times


def test_train_gaze_resumed_when_finished_returns_summary_and_model(tmp_path):
    cfg = GazeTrainConfig(width=4, appearance_dim=8, gaze_feat_dim=8, steps=2, eval_every=2,
                          train_count=64, test_count=16, size=[H, W], experts=2)
    out = tmp_path / "r"
    model, summary = train_gaze(cfg, None, out, progress_bar=False, plots=False)
    gc.collect()
    before = _stamps(out)
    again_model, again = train_gaze(cfg, None, out, resume=True, progress_bar=False)
    assert again == json.loads(json.dumps(jsonable(summary)))
    for (k, a), b in zip(model.state_dict().items(), again_model.state_dict().values(),
                         strict=True):
        assert torch.equal(a, b), k
    gc.collect()
    assert _stamps(out) == before


@pytest.mark.parametrize("threads", [0, 2])
def test_threads_are_used_recorded_and_restored(threads, tmp_path):
    cfg = GazeTrainConfig(width=4, appearance_dim=8, gaze_feat_dim=8, steps=2, eval_every=2,
                          train_count=64, test_count=16, size=[H, W], experts=2,
                          threads=threads)
    outside = torch.get_num_threads()
    _, summary = train_gaze(cfg, None, tmp_path / "t", progress_bar=False, plots=False)
    assert summary["torch_threads"] == (threads or outside)  # 0: the count torch has
    assert torch.get_num_threads() == outside  # restored after the run
    config = json.loads((tmp_path / "t" / "config.json").read_text())
    assert config["threads"] == threads


def test_cli_threads_zero_is_accepted(tmp_path, capsys):
    out = tmp_path / "t0"
    code, res = _run(["gaze", "train", "--out", str(out), *TINY, "--size", "16",
                      "--threads", "0"], capsys)
    assert code == 0, res.err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["torch_threads"] == torch.get_num_threads()
    config = json.loads((out / "config.json").read_text())
    assert config["threads"] == 0 and config["size"] == [16, 16]  # --size N is square


@pytest.mark.parametrize("size,word", [("7", ">= 8"), ("16x7", ">= 8"), ("16by24", "HEIGHTx")])
def test_bad_size_refused_before_the_folder(size, word, tmp_path, capsys):
    for command in (["train"], ["render", "--count", "2"]):
        out = tmp_path / "s"
        code, res = _run(["gaze", *command, "--out", str(out), "--size", size], capsys)
        assert code == 2 and word in res.err and "--size" in res.err, res.err
        assert len(res.err.strip().splitlines()) == 1 and not out.exists()


def test_render_and_eval_end_with_the_closing_line(tmp_path, capsys):
    code, res = _run(["gaze", "render", "--out", str(tmp_path / "r"), "--count", "4",
                      "--size", "16"], capsys)
    assert code == 0, res.err
    assert res.out.strip().splitlines()[-1] == f"outputs in {tmp_path / 'r'}"
    run = tmp_path / "run"
    assert _run(["gaze", "train", "--out", str(run), *TINY, "--size", "16"], capsys)[0] == 0
    code, res = _run(["gaze", "eval", str(run), "--out", str(tmp_path / "ev"), "--count",
                      "8", "--device", "auto"], capsys)
    assert code == 0, res.err
    assert res.out.strip().splitlines()[-1] == f"outputs in {tmp_path / 'ev'}"


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_device_cuda_without_cuda_refused_before_the_folder(tmp_path, capsys):
    out = tmp_path / "c"
    code, res = _run(["gaze", "train", "--out", str(out), *TINY, "--size", "16",
                      "--device", "cuda"], capsys)
    assert code == 2 and "--device cuda" in res.err and not out.exists()


@pytest.mark.parametrize("command", ["train", "bench", "paper"])
def test_resume_is_a_flag_without_no_resume(command, capsys):
    code, res = _run(["gaze", command, "--help"], capsys)
    assert code == 0 and "--resume" in res.out and "--no-resume" not in res.out
    code, res = _run(["gaze", command, "--out", "x", "--no-resume"], capsys)
    assert code == 2 and "No such option" in res.err


def test_help_lists_every_registry_choice(capsys):
    from genlab.gaze.data.realdata import REAL_DATASETS
    from genlab.gaze.models.registry import MODELS
    from genlab.gaze.models.routing import BALANCES, ROUTINGS
    from genlab.gaze.protocol import WORLDS
    from genlab.gaze.synth.domains import DOMAINS

    want = {"train": (MODELS, ROUTINGS, BALANCES, DOMAINS, REAL_DATASETS),
            "eval": (DOMAINS, REAL_DATASETS), "render": (DOMAINS,), "bench": (WORLDS,),
            "paper": (MODELS,)}
    for command, registries in want.items():
        code, res = _run(["gaze", command, "--help"], capsys)
        text = " ".join(res.out.split())
        assert code == 0
        for registry in registries:
            for name in registry.choices():
                assert name in text, (command, name)


def _captured(monkeypatch, module, name, result):
    seen = {}

    def fake(cfg, out, **kw):
        seen["cfg"], seen["specs"] = cfg, getattr(module, f"{name}_specs")(cfg, out)
        return result

    monkeypatch.setattr(module, f"run_{name}", fake)
    return seen


def test_bench_seeds_are_a_list(tmp_path, capsys, monkeypatch):
    seen = _captured(monkeypatch, bench_mod, "bench", {"markdown": "table", "seconds": 1.0})
    out = tmp_path / "b"
    code, res = _run(["gaze", "bench", "--out", str(out), "--seeds", "0-2",
                      "--reference-seeds", "4", "--threads", "0", "--resume"], capsys)
    assert code == 0, res.err
    assert seen["cfg"].seeds == [0, 1, 2] and seen["cfg"].reference_seeds == [4]
    assert seen["cfg"].threads == 0 and seen["cfg"].base().threads == 0
    kinds = {(s.name.split("__")[2], s.config.seed) for s in seen["specs"]}
    assert {seed for kind, seed in kinds if kind == "moegaze"} == {0, 1, 2}
    assert {seed for kind, seed in kinds if kind == "reference"} == {4}
    assert res.out.strip().splitlines()[-1] == f"outputs in {out}"
    code, res = _run(["gaze", "bench", "--out", str(out), "--quick"], capsys)
    assert code == 0 and seen["cfg"].seeds == [0, 1] and seen["cfg"].reference_seeds == [0]
    code, res = _run(["gaze", "bench", "--out", str(out)], capsys)
    assert code == 0 and seen["cfg"].seeds == [0, 1, 2, 3, 4]


@pytest.mark.parametrize("seeds,word", [("2-1", "backwards"), ("0,0", "repeated"),
                                        ("x", "expected seeds"), ("", "no seed")])
def test_bad_seeds_exit_2_before_anything(seeds, word, tmp_path, capsys):
    out = tmp_path / "b"
    code, res = _run(["gaze", "bench", "--out", str(out), "--seeds", seeds], capsys)
    assert code == 2 and "--seeds" in res.err and word in res.err, res.err
    assert len(res.err.strip().splitlines()) == 1 and not out.exists()


def test_paper_seeds_and_reference_seeds_are_lists(tmp_path, capsys, monkeypatch):
    seen = _captured(monkeypatch, paper_mod, "paper", {"markdown": "table"})
    for name in ("xgaze", "mpii"):
        (tmp_path / name).mkdir()
    base = ["gaze", "paper", "--out", str(tmp_path / "p"), "--xgaze", str(tmp_path / "xgaze"),
            "--mpii", str(tmp_path / "mpii")]
    code, res = _run([*base, "--seeds", "0-2", "--reference-seeds", ""], capsys)
    assert code == 0, res.err
    assert seen["cfg"].seeds == [0, 1, 2] and seen["cfg"].reference_seeds == []
    assert not [s for s in seen["specs"] if "reference" in s.name]
    assert {s.config.seed for s in seen["specs"]} == {0, 1, 2}
    assert res.out.strip().splitlines()[-1] == f"outputs in {tmp_path / 'p'}"
    code, res = _run([*base, "--size", "64"], capsys)
    assert code == 0 and seen["cfg"].seeds == [0, 1, 2] and seen["cfg"].reference_seeds == [0]
    assert seen["cfg"].size == [64, 64] and seen["cfg"].threads == 0


def test_library_configs_take_lists_and_keep_counts(tmp_path):
    assert BenchConfig(seeds=3, reference_seeds=1).seeds == [0, 1, 2]
    assert BenchConfig(seeds=3, reference_seeds=1).reference_seeds == [0]
    assert PaperConfig(reference_seeds=0).reference_seeds == []
    specs = bench_specs(BenchConfig(worlds=["control"], seeds=[2, 5], reference_seeds=[7]),
                        tmp_path)
    assert sorted({s.config.seed for s in specs if "reference" not in s.name}) == [2, 5]
    assert {s.config.seed for s in specs if "reference" in s.name} == {7}
    from genlab.core.errors import ConfigError

    for bad in ([], [1, 1], [-1], [0.5]):
        with pytest.raises(ConfigError, match="seeds"):
            BenchConfig(seeds=bad).validate()
