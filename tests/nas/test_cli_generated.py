"""`genlab nas ...` generated from their configs (docs/cli.md): every command's options are
exactly its config's fields plus the common ones; --print-config then --config of the printed
file gives the same config; a run's config.json given back with --config repeats the run."""

import json
from dataclasses import asdict

import pytest
import typer
from nas_reference import DARTS_V2, run_cli
from nas_reference import NB201_CELL as NB201

import genlab.nas.retrain as retrain_mod
from genlab.cli import _register, app
from genlab.cli.commands import COMMAND_OPTIONS, RUN_OPTIONS, all_commands
from genlab.core.options import option_fields
from genlab.nas.bench import DEFAULT_REGS, BenchConfig
from genlab.nas.search import SearchConfig

RUN_FOLDER = {"search", "train", "bench", "detect", "score", "fidelity",
              "ber-select", "entropy-peak", "repro"}  # the last three: registered studies
NO_RUN_FOLDER = {"lookup", "table convert", "predict"}
NO_OPTIONS = {"spaces", "methods"}  # listings: nothing to declare


def _nas_commands() -> dict:
    _register()
    nas = typer.main.get_command(app).get_command(None, "nas")
    return {" ".join(path): command for path, command in all_commands(nas)
            if not hasattr(command, "list_commands")}


def test_every_nas_command_has_exactly_its_configs_options():
    commands = _nas_commands()
    assert set(commands) == RUN_FOLDER | NO_RUN_FOLDER | NO_OPTIONS
    for name, command in commands.items():
        names = {p.name for p in command.params}
        cls = getattr(command.callback, "config_class", None)
        if name in NO_OPTIONS:
            assert cls is None and names <= {"help"}, name
            continue
        fields = {f.name for f, spec in option_fields(cls) if spec.cli}
        common = set(RUN_OPTIONS if name in RUN_FOLDER else COMMAND_OPTIONS)
        assert names == fields | common, name


def _printed(argv, capsys) -> dict:
    code, out, err = run_cli(argv, capsys)
    assert code == 0, err
    return json.loads(out)


# (command, its positional arguments, options): each printed config read back is the same
PRINTED = [
    (["search"], ["--steps", "7", "--reg", "ber-kl", "-C", "3"]),
    (["train", NB201], ["--epochs", "2", "--aux-weight", "0.3", "--momentum", "0.8"]),
    (["train", DARTS_V2], ["--space", "darts", "--dataset", "imagenet", "--max-steps", "3"]),
    (["bench"], ["--regs", "none,ber", "--seeds", "0-1,5", "--steps", "4", "--workers", "2"]),
    (["detect", DARTS_V2], ["--lr-steps", "3,5", "--epochs", "6", "--head-norm", "gn"]),
    (["lookup", NB201], ["--nb201-table", "t.csv"]),
    (["table", "convert", "in.csv"], ["--out", "out.csv"]),
]


@pytest.mark.parametrize(("command", "options"), PRINTED,
                         ids=[f"{c[0]}-{i}" for i, (c, _) in enumerate(PRINTED)])
def test_print_config_then_config_gives_the_same_config(command, options, tmp_path, capsys):
    first = _printed(["nas", *command, *options, "--print-config"], capsys)
    path = tmp_path / "printed.json"
    path.write_text(json.dumps(first))
    again = _printed(["nas", *command, "--config", path, "--print-config"], capsys)
    assert again == first
    # the flags reached the config (spelt as the command line spells them)
    flags = dict(zip(options[::2], options[1::2], strict=True))
    for flag, text in flags.items():
        key = {"--aux-weight": "auxiliary_weight", "-C": "channels"}.get(
            flag, flag[2:].replace("-", "_"))
        value = first[key]
        shown = ",".join(map(str, value)) if isinstance(value, list) else str(value)
        assert shown == text or (key == "seeds" and value == [0, 1, 5]), (key, value)


def test_train_options_reach_the_trainer_of_the_data_set(capsys):
    imagenet = _printed(["nas", "train", DARTS_V2, "--space", "darts", "--dataset", "imagenet",
                         "--print-config"], capsys)
    assert (imagenet["batch_size"], imagenet["image_size"], imagenet["workers"]) == (1024, 224, 8)
    digits = _printed(["nas", "train", NB201, "--print-config"], capsys)
    assert digits["batch_size"] == retrain_mod.RetrainConfig().batch_size
    assert digits["workers"] is None and digits["size"] == 8  # the NB201 proxy's size


@pytest.mark.parametrize(("argv", "word"), [
    (["train", NB201, "--workers", "2"], "--workers is an option of --dataset imagenet"),
    (["train", DARTS_V2, "--space", "darts", "--dataset", "imagenet", "--cutout"],
     "--cutout is not an option of --dataset imagenet"),
    (["bench", "--executor", "cluster"], "unknown --executor 'cluster'"),
    (["bench", "--regs", "none,bogus"], "unknown --regs 'bogus'"),
    (["detect", DARTS_V2, "--head-norm", "bn"], "unknown --head-norm 'bn'"),
    (["detect", DARTS_V2, "--warmup", "-1"], "--warmup must be >= 0"),
    (["table", "convert", "in.csv"], "--out is required"),
])
def test_a_declaration_refuses_with_one_line(argv, word, tmp_path, capsys):
    out = tmp_path / "run"
    has_out = argv[0] != "table"
    code, _, err = run_cli(["nas", *argv, *(["--out", out] if has_out else [])], capsys)
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and word in lines[0], lines
    assert not out.exists()


def test_a_bench_record_gives_back_its_options(tmp_path, capsys):
    """A bench's config.json nests its search template; --config lays it out as the flat
    options, and a template option the command has no flag for is refused."""
    bench = BenchConfig(regs=["none", "beta"], seeds=[2, 4], retrain_epochs=3,
                        search=SearchConfig(space="s2", steps=5, channels=3, order=2,
                                            threads=0))
    record = {**json.loads(json.dumps(asdict(bench))), "genlab_version": "0"}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(record))
    printed = _printed(["nas", "bench", "--config", path, "--print-config"], capsys)
    assert (printed["regs"], printed["seeds"], printed["retrain_epochs"]) == \
        (["none", "beta"], [2, 4], 3)
    assert (printed["space"], printed["steps"], printed["channels"], printed["order"],
            printed["threads"]) == ("s2", 5, 3, 2, 0)
    from genlab.nas.bench import BenchCommandConfig

    rebuilt = BenchCommandConfig(**{k: v for k, v in printed.items()}).bench()
    assert asdict(rebuilt) == asdict(bench)
    assert BenchCommandConfig().bench().regs == list(DEFAULT_REGS)

    record["search"]["hessian_points"] = 1  # every search option is the bench's too
    path.write_text(json.dumps(record))
    assert _printed(["nas", "bench", "--config", path, "--print-config"],
                    capsys)["hessian_points"] == 1
    record["search"]["seed"] = 3  # the bench sets each job's seed: no flag of `nas bench`
    path.write_text(json.dumps(record))
    code, _, err = run_cli(["nas", "bench", "--config", path, "--print-config"], capsys)
    assert code == 2 and "seed" in err and "no option" in err


def test_a_train_config_json_repeats_the_run(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(retrain_mod, "_plot_curves", lambda run: None)
    first, again = tmp_path / "first", tmp_path / "again"
    code, _, err = run_cli(["nas", "train", NB201, "--out", first, "-C", "2", "--epochs", "1",
                            "--batch-size", "32", "--size", "4", "--momentum", "0.8",
                            "--no-nesterov", "--seed", "3"], capsys)
    assert code == 0, err
    config = json.loads((first / "config.json").read_text())
    assert (config["momentum"], config["nesterov"], config["seed"]) == (0.8, False, 3)
    code, _, err = run_cli(["nas", "train", NB201, "--config", first / "config.json", "--out",
                            again], capsys)
    assert code == 0, err
    a, b = (json.loads((p / "summary.json").read_text()) for p in (first, again))
    assert a["test_acc"] == b["test_acc"] and a["params"] == b["params"]
    assert json.loads((again / "config.json").read_text()) == config
