"""The comparison studies end to end at tiny sizes, sharing one store; bad input exits 2."""

import json
import statistics

import pytest

import genlab.optim.studies.grid as grid
from genlab.cli import main
from genlab.optim.studies.sensitivity import SensitivityConfig, grid_specs
from genlab.optim.training.tasks import majority_accuracy, task_data

TINY = ["--grid", "tiny", "--epochs", "1", "--width", "4", "--depth", "1"]


def run_cli(args):
    with pytest.raises(SystemExit) as exc:
        main(args)
    return exc.value.code


def read(path):
    return json.loads(path.read_text())


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return tmp_path_factory.mktemp("studies")


@pytest.fixture
def count_trainings(monkeypatch):
    calls = []
    real = grid.train_digits

    def counted(cfg, out, **kw):
        calls.append(cfg)
        return real(cfg, out, **kw)

    monkeypatch.setattr(grid, "train_digits", counted)
    return calls


STANDARD = ["--archs", "cnn", "--optimizers", "sgd,sam", "--seeds", "0-1", *TINY]


@pytest.fixture(scope="module")
def standard(root):
    """The standard study, run once per test process (the later studies reuse its store,
    whichever test runs first); the configs of the trainings it ran."""
    calls = []
    real = grid.train_digits
    grid.train_digits = lambda cfg, out, **kw: calls.append(cfg) or real(cfg, out, **kw)
    try:
        assert run_cli(["optim", "standard", "--out", str(root / "standard"),
                        *STANDARD]) in (0, None)
    finally:
        grid.train_digits = real
    return root / "standard", calls


def test_standard_then_resume_trains_nothing_new(standard, count_trainings, capsys):
    out, trained = standard
    args = ["optim", "standard", "--out", str(out), *STANDARD]
    assert len(trained) == 4 + 2  # 2 trials x 2 optimisers, then seed 1 of each
    assert read(out / "config.json")["seeds"] == [0, 1]
    summary = read(out / "summary.json")
    (table,) = summary["tables"]
    assert [r["optimizer"] for r in table["rows"]] == ["sgd", "sam"]
    assert {r["optimizer"] for r in table["sanity"]} == {
        "constant predictor (majority class)", "untrained model"}
    assert summary["comparisons"] == []  # SGD and SAM only: no guided optimiser to compare
    assert sorted(table["per_seed"]["sam"]) == ["0", "1"]  # per seed, for paired verdicts
    sam_row = next(r for r in table["rows"] if r["optimizer"] == "sam")
    assert sam_row["test_mean"] == pytest.approx(
        statistics.fmean(table["per_seed"]["sam"].values()))
    search = read(out / "search_cnn.json")
    assert search["budget_per_optimizer"] == {"sgd": 2, "sam": 2}
    for opt, choice in search["choices"].items():  # the choice is the best validation trial
        trials = [r for r in search["records"] if r["optimizer"] == opt]
        assert choice["val_acc"] == max(r["val_acc"] for r in trials)
    assert (out / "standard.png").exists() and (out / "table.md").exists()
    for row in table["rows"]:  # percent, printed as they are stored
        assert 0 <= row["test_mean"] <= 100
        assert row["test_acc"] == f"{row['test_mean']:.1f} ± {row['test_std']:.1f}"
    assert table["sanity"][0]["test_mean"] > 1  # the majority class's share, in percent
    capsys.readouterr()
    assert run_cli([*args, "--resume"]) in (0, None)
    printed = capsys.readouterr().out
    assert "|" not in printed and printed.strip().splitlines()[-1] == f"outputs in {out}"
    assert count_trainings == []
    assert len((out / "metrics.jsonl").read_text().splitlines()) == 6


def test_sensitivity_reuses_the_search_trainings(root, standard, count_trainings):
    out = root / "sensitivity"
    assert run_cli(["optim", "sensitivity", "--out", str(out), "--arch", "cnn",
                    "--optimizers", "sgd,sam", "--seeds", "0,1", *TINY]) in (0, None)
    # seed 0 is the standard study's search; at seed 1 the chosen cells are its final runs
    assert len(count_trainings) == 2
    rows = {r["optimizer"]: r for r in read(out / "summary.json")["rows"]}
    assert rows["sam"]["cells"] == 2 and 0 < rows["sam"]["share_within_1pt"] <= 1
    assert rows["sam"]["spread"] == pytest.approx(rows["sam"]["best"] - rows["sam"]["worst"])
    # seed_std: the mean over the cells of each cell's std over the two seeds, from the
    # stored trainings themselves
    summary = read(out / "summary.json")
    cfg = SensitivityConfig(arch="cnn", optimizers=["sgd", "sam"], seeds=[0, 1], epochs=1,
                            width=4, depth=1, grid="tiny")
    by_cell: dict = {}
    for spec in grid_specs(cfg, root / "trainings"):
        if spec.config.optimizer == "sam":
            by_cell.setdefault((spec.config.lr, spec.config.rho), []).append(
                read(spec.out / "summary.json")["test_acc"])
    assert sorted(len(v) for v in by_cell.values()) == [2, 2]
    assert rows["sam"]["seed_std"] == pytest.approx(
        statistics.fmean(statistics.stdev(v) for v in by_cell.values()))
    (constant,) = summary["sanity"]
    data = task_data("digits", "holdout", data_seed=0)
    assert constant["best"] == pytest.approx(majority_accuracy(data))
    assert rows["sam"]["best"] > constant["best"]
    assert (out / "sensitivity.png").exists()


def test_labelnoise_and_transfer(root, standard, count_trainings):
    out = root / "labelnoise"
    assert run_cli(["optim", "labelnoise", "--out", str(out), "--optimizers", "sgd,sam",
                    "--seeds", "0", "--rates", "0.4", "--asymmetric-rates", "0.2",
                    *TINY]) in (0, None)
    summary = read(out / "summary.json")
    assert summary["settings"] == ["sym 40%", "asym 20%"]
    assert len(count_trainings) == 4  # 2 settings x 2 optimisers; the search is reused
    assert all(cfg.label_noise > 0 for cfg in count_trainings)
    assert (out / "labelnoise.png").exists()
    if (out / "results.json").exists():  # a git checkout: the results file, per seed
        from genlab.core.results.files import load_result
        written = load_result(out / "results.json")
        assert written.seeds("sym40", "SAM") == {"0": summary["per_seed"]["sym 40%"]["sam"]["0"]}
        assert set(written.values) == {"sym40", "asym20"}
    out = root / "transfer"
    count_trainings.clear()
    assert run_cli(["optim", "transfer", "--out", str(out), "--optimizers", "sgd,sam",
                    "--seeds", "0", "--per-class", "3", "--target-steps", "2", *TINY]) in (0, None)
    # the pretraining search (2 lrs), the fine-tuning search from the chosen pretraining
    # (2 trials each of sgd and sam), the scratch search (2 lrs); seed 0's final runs are
    # those trials, so nothing more trains
    assert [c.task for c in count_trainings] == ["digits0-4"] * 2 + ["digits5-9"] * 6
    assert [bool(c.init_from) for c in count_trainings] == [False] * 2 + [True] * 4 + [
        False] * 2
    assert all(c.translate == 2 for c in count_trainings)
    assert [c.epochs for c in count_trainings] == [1] * 2 + [2] * 6  # 15 images: 1 step/epoch
    assert [c.translate_copies for c in count_trainings] == [8] * 2 + [1] * 6
    assert [c.val_copies for c in count_trainings] == [1] * 2 + [4] * 6  # the target's search
    summary = read(out / "summary.json")
    assert summary["target_train_images"] == 15
    assert isinstance(summary["transfer_shown"], bool)
    sgd = next(r for r in summary["rows"] if r["optimizer"] == "sgd")
    scratch = next(r for r in summary["sanity"] if "from scratch" in r["optimizer"])
    assert summary["finetune_minus_scratch_per_seed"] == [
        pytest.approx(sgd["test_mean"] - scratch["test_mean"])]  # one seed: the difference
    if (out / "results.json").exists():  # a git checkout: the results file, per seed
        from genlab.core.results.files import load_result
        written = load_result(out / "results.json")
        assert written.seeds("finetune_minus_scratch", "SGD") == {
            "0": pytest.approx(sgd["test_mean"] - scratch["test_mean"])}
        assert set(written.values["test"]) == {"SGD", "SAM", "SGD from scratch"}
    search = read(out / "search_transfer_cnn.json")
    pre = search["choices"]["pretrain"]
    assert pre["val_acc"] == max(r["val_acc"] for r in search["pretrain_records"])
    for opt, choice in search["choices"]["finetune"].items():  # best target validation trial
        trials = [r for r in search["records"] if r["optimizer"] == opt and
                  "finetune" in r["name"]]
        assert len(trials) == 2 and choice["val_acc"] == max(r["val_acc"] for r in trials)
    chosen = [c for c in count_trainings if c.init_from]
    assert {c.init_from for c in chosen} == {
        str(out.parent / "trainings" / next(r["name"] for r in search["pretrain_records"]
                                            if r["lr"] == pre["lr"]) / "checkpoint.pt")}
    assert (out / "transfer.png").exists()


def test_depth_width_cli(tmp_path):
    out = tmp_path / "dw"
    assert run_cli(["optim", "depth-width", "--out", str(out), "--archs", "mlp", "--seeds",
                    "0-1", "--epochs", "1", "--mlp-depths", "1,2", "--mlp-widths", "4",
                    "--measure-samples", "16", "--measure-iterations", "2"]) in (0, None)
    res = read(out / "summary.json")["results"]["mlp"]
    assert [(c["depth"], c["width"], c["seeds"]) for c in res["cells"]] == [(1, 4, 2),
                                                                            (2, 4, 2)]
    assert [t["measure"] for t in res["taus"]] == ["trace_sigma", "curvature_nonuniformity",
                                                   "hessian_top_eigenvalue", "random_sanity"]
    assert (out / "depth_width_mlp.png").exists()


@pytest.mark.parametrize("args", [
    ["standard", "--optimizers", "sgd,adam"],
    ["standard", "--optimizers", "sam"],
    ["standard", "--grid", "huge"],
    ["transfer", "--source", "digits5-9"],
    ["labelnoise", "--rates", "1.5"],
    ["sensitivity", "--seeds", "1-0"],
    ["transfer", "--seeds", "0,0"],
    ["correlate", "--stop-loss", "-1"],
    ["depth-width", "--mlp-widths", "4.5"],
])
def test_bad_options_exit_2(tmp_path, capsys, args):
    assert run_cli(["optim", args[0], "--out", str(tmp_path / "x"), *args[1:]]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("genlab:")
