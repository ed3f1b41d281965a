"""The gaze commands that wrap another (`paper` and `bench` wrap `gaze train`, `audit` wraps
`bench`) take every option of the wrapped command with its default, except those each sets
for its runs itself; and the values reach the runs."""

import dataclasses
import json

import pytest
from wrappers import check_wraps, default_of

from genlab.cli import main
from genlab.gaze.config import GazeTrainConfig
from genlab.gaze.studies.audit import AuditConfig
from genlab.gaze.studies.bench import BenchCommandConfig, BenchConfig
from genlab.gaze.studies.paper import PaperConfig, paper_specs

# What each wrapper sets for its runs itself, and its own defaults: written out here so that
# a change to either is a change to this test too.
PAPER_SETS = ("model", "source", "targets", "fraction", "seed", "target_fold", "folds")
PAPER_DEFAULTS = {"steps": 20000, "warmup_steps": 500, "eval_every": 1000, "lr": 1e-4,
                  "size": [224, 224], "width": 64, "stem": "imagenet",
                  "input_norm": "imagenet", "device": "auto", "workers": 4, "threads": 0}
BENCH_SETS = ("model", "source", "targets", "fraction", "subject_fraction", "seed", "workers")
BENCH_DEFAULTS = {"steps": 300, "target_scale": 0}  # 0: the sizing plan's scale
QUICK = ("worlds", "seeds", "reference_seeds", "steps", "train_count", "test_count", "workers",
         "n_boot")
AUDIT_SETS = ("worlds", "small_fraction", "small_subjects", "grouping", "router_input",
              "shared_expert", "train_subjects")
DESIGN = {"grouping": "colour", "router_input": "encoder", "shared_expert": True}


@pytest.mark.parametrize("wrapper,wrapped,sets,defaults", [
    (PaperConfig, GazeTrainConfig, PAPER_SETS, PAPER_DEFAULTS),
    (BenchConfig, GazeTrainConfig, BENCH_SETS, BENCH_DEFAULTS),
    (BenchCommandConfig, BenchConfig, (), dict.fromkeys(QUICK)),  # --quick's: unset (None)
    (AuditConfig, BenchConfig, AUDIT_SETS, {}),
])
def test_every_gaze_wrapper_takes_every_option_of_the_command_it_wraps(wrapper, wrapped, sets,
                                                                        defaults):
    assert set(wrapper.wrapping.sets) == set(sets)
    check_wraps(wrapper, wrapped, skip=sets, defaults=defaults)


def test_audit_takes_every_option_of_gaze_train_that_the_bench_takes():
    sets = [n for n in (*BENCH_SETS, *AUDIT_SETS) if n in GazeTrainConfig.__dataclass_fields__]
    check_wraps(AuditConfig, GazeTrainConfig, skip=sets, defaults=BENCH_DEFAULTS)


def test_a_new_option_of_the_wrapped_config_reaches_the_wrapper_with_no_edit():
    from genlab.core.options import option, takes_options

    @dataclasses.dataclass
    class Train(GazeTrainConfig):
        new_knob: float = option(0.25, help="A knob gaze train gained.", ge=0)

    @dataclasses.dataclass
    @takes_options(Train, sets=PAPER_SETS)
    class Paper(PaperConfig):
        pass

    check_wraps(Paper, Train, skip=PAPER_SETS, defaults=PAPER_DEFAULTS)
    assert Paper(new_knob=0.5).wrapping.values(Paper(new_knob=0.5))["new_knob"] == 0.5


def _other(value, choices=()):
    """A value unlike ``value`` of its kind (only carried, not validated)."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return value / 2 if value else 0.5
    if isinstance(value, list):  # a size [h, w] stays two sides
        return [v + 1 for v in value] if value else [1]
    if value is None:
        return "a/file.pt"
    return next((c for c in choices if c != value), f"{value}-other")


def _changed(cfg_cls, names):
    from genlab.core.options import choice_names, spec_of

    fields = {f.name: f for f in dataclasses.fields(cfg_cls)}
    return {n: _other(default_of(fields[n]), choice_names(spec_of(fields[n]).choices))
            for n in names}


@pytest.mark.parametrize("wrapper,sets", [(PaperConfig, PAPER_SETS),
                                          (BenchConfig, BENCH_SETS),
                                          (AuditConfig, (*BENCH_SETS, *AUDIT_SETS))])
def test_every_taken_option_of_gaze_train_reaches_the_runs_base(wrapper, sets):
    names = [f.name for f in dataclasses.fields(GazeTrainConfig)
             if f.name not in sets and f.name not in DESIGN]
    changed = _changed(GazeTrainConfig, names)
    base = wrapper(**changed).base()
    for name, value in changed.items():
        assert getattr(base, name) == value, name
        assert value != default_of(GazeTrainConfig.__dataclass_fields__[name]), name


def test_paper_design_and_subject_share_reach_the_moegaze_runs_only(tmp_path):
    for name in ("xgaze", "mpii"):
        (tmp_path / name).mkdir()
    cfg = PaperConfig(xgaze=str(tmp_path / "xgaze"), mpii=str(tmp_path / "mpii"), seeds=[0],
                      reference_seeds=[0], subject_fraction=0.5, **DESIGN)
    specs = {s.name: s.config for s in paper_specs(cfg, tmp_path / "out")}
    assert sorted(specs) == ["mpii__reference__fold0__s0", "mpii__reference__fold1__s0",
                             "xgaze__baseline__f0.1__s0", "xgaze__baseline__f1__s0",
                             "xgaze__moegaze__f0.1__s0", "xgaze__moegaze__f1__s0"]
    plain = GazeTrainConfig()
    for name, run in specs.items():
        for option, value in DESIGN.items():
            want = value if "moegaze" in name else getattr(plain, option)
            assert getattr(run, option) == want, (name, option)
        assert run.subject_fraction == (1.0 if "reference" in name else 0.5), name


@pytest.mark.parametrize("command,sets", [("paper", PAPER_SETS), ("bench", BENCH_SETS),
                                          ("audit", (*BENCH_SETS, *AUDIT_SETS))])
def test_the_commands_accept_every_option_they_take(command, sets, tmp_path, capsys):
    """--config with every option of gaze train that the command takes, each at a value
    unlike its default, is accepted (an unknown key would be refused) and printed back."""
    names = [f.name for f in dataclasses.fields(GazeTrainConfig) if f.name not in sets]
    values = {**_changed(GazeTrainConfig, names), "device": "cpu", "pretrained": None}
    values.update({k: v for k, v in DESIGN.items() if k in values})
    path = tmp_path / "c.json"
    path.write_text(json.dumps(values))
    with pytest.raises(SystemExit) as exc:
        main(["gaze", command, "--config", str(path), "--print-config"])
    printed = capsys.readouterr()
    assert not exc.value.code, printed.err
    shown = json.loads(printed.out)
    assert {k: shown[k] for k in values} == values


# The options of gaze bench before it took every option of gaze train (its bench_config.json)
OLD_BENCH_KEYS = ("worlds", "seeds", "reference_seeds", "steps", "batch_size", "train_count",
                  "test_count", "size", "width", "small_fraction", "small_subjects",
                  "data_seed", "workers", "n_boot", "device", "threads", "grouping",
                  "router_input", "shared_expert")


def test_a_bench_recorded_before_resumes_from_its_config(tmp_path, capsys):
    out = tmp_path / "b"
    tiny = ["--worlds", "control", "--seeds", "0", "--reference-seeds", "0", "--steps", "2",
            "--train-count", "60", "--test-count", "20", "--size", "16x24", "--width", "4",
            "--n-boot", "50", "--workers", "1"]
    with pytest.raises(SystemExit) as exc:
        main(["gaze", "bench", "--out", str(out), *tiny])
    assert not exc.value.code, capsys.readouterr().err
    capsys.readouterr()
    tables = json.loads((out / "bench.json").read_text())["tables"]
    recorded = json.loads((out / "bench_config.json").read_text())
    old = tmp_path / "old_bench_config.json"
    old.write_text(json.dumps({k: recorded[k] for k in OLD_BENCH_KEYS}))
    summaries = sorted((out / "runs").glob("*/summary.json"))
    stamps = {p: p.stat().st_mtime_ns for p in summaries}
    assert len(stamps) == 4
    with pytest.raises(SystemExit) as exc:
        main(["gaze", "bench", "--out", str(out), "--config", str(old)])
    assert not exc.value.code, capsys.readouterr().err
    assert {p: p.stat().st_mtime_ns for p in summaries} == stamps  # every run read back
    assert json.loads((out / "bench.json").read_text())["tables"] == tables
