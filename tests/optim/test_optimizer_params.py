"""`optim train --optimizer-param KEY=VALUE`: an optimiser's own settings (CSAM's alpha,
ACSAM's eta) reach its constructor, checked against its settings before a run folder is
made; a setting an option of the command owns is named with that option; a run made before
the option existed resumes."""

import json

import pytest
from torch import nn

from genlab.cli import main
from genlab.core.errors import ConfigError
from genlab.optim.training.train import TrainConfig, build_optimizer


def test_the_settings_reach_the_constructor():
    model = nn.Linear(4, 2)
    cfg = TrainConfig(optimizer="acsam_identity", optimizer_params={"alpha": 0.25, "eta": 0.05})
    cfg.validate()
    opt = build_optimizer(cfg, model, 10)
    group = opt.param_groups[0]
    assert (group["alpha"], group["eta"], group["rho1"]) == (0.25, 0.05, cfg.rho)
    default = build_optimizer(TrainConfig(optimizer="acsam_identity"), model, 10)
    assert (default.param_groups[0]["alpha"], default.param_groups[0]["eta"]) == (0.4, 0.01)


@pytest.mark.parametrize(("optimizer", "params", "words"), [
    ("csam_identity", {"alfa": 0.3}, "unknown setting 'alfa' (did you mean alpha, default 0.4"),
    ("sgd", {"eta": 0.1}, "unknown setting 'eta'"),
    ("sam", {"rho": 0.1}, "set it with --rho"),
    ("cov", {"lam": 0.3}, "set it with --lam"),
    ("sgd", {"lr": 0.3}, "set it with --lr"),
])
def test_bad_settings_are_refused_before_the_run(optimizer, params, words):
    with pytest.raises(ConfigError, match=words.replace("(", r"\(")):
        TrainConfig(optimizer=optimizer, optimizer_params=params).validate()


def test_the_cli_refuses_in_one_line_and_a_run_without_the_option_resumes(tmp_path, capsys):
    out = tmp_path / "run"
    with pytest.raises(SystemExit) as done:
        main(["optim", "train", "--optimizer", "csam_identity", "--optimizer-param",
              "alfa=0.3", "--out", str(out)])
    err = capsys.readouterr().err
    assert done.value.code == 2 and len(err.splitlines()) == 1 and "alfa" in err
    assert not out.exists()
    args = ["optim", "train", "--epochs", "1", "--width", "8", "--no-measure", "--out",
            str(out)]
    with pytest.raises(SystemExit) as done:
        main(args)
    assert done.value.code == 0
    config = json.loads((out / "config.json").read_text())
    del config["optimizer_params"]  # a run made before the option existed
    (out / "config.json").write_text(json.dumps(config))
    (out / "summary.json").unlink()
    with pytest.raises(SystemExit) as done:
        main([*args, "--resume"])
    assert done.value.code == 0, capsys.readouterr().err
