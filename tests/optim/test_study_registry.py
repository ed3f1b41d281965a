"""Studies register themselves: the command line lists them by reading the sources, and a
study module with an option-declared config is a generated `genlab optim` command."""

import json
import sys
import textwrap

import pytest

import genlab.cli.optim as cli_optim
from genlab.cli import main
from genlab.core import studies
from genlab.core.errors import ConfigError
from genlab.core.registry import declared_names

TOY_STUDY = '''
"""A toy study: the sum of the seeds, written to the run folder."""

from dataclasses import dataclass

from genlab.core.options import option
from genlab.core.runs import RunDir
from genlab.optim.studies import Study, register_study


@dataclass
class SumConfig:
    seeds: list[int] = option(factory=lambda: [0, 1, 2], parse="seeds", help="Seeds.")
    scale: float = option(1.0, help="Scale of the sum.", gt=0)


def run_sum(cfg, out, *, resume=False):
    with RunDir(out, {"seeds": cfg.seeds, "scale": cfg.scale}, resume=resume) as run:
        summary = {"sum": cfg.scale * sum(cfg.seeds)}
        run.write_summary(summary)
    return summary


def report(summary, cfg):
    return [f"sum {summary['sum']:g}", ("the seeds", [{"seed": s} for s in cfg.seeds], None)]


STUDY = register_study(Study("seed-sum", SumConfig, run_sum, report))
'''


@pytest.fixture
def toy_package(tmp_path, monkeypatch):
    """A package ``toystudies`` holding the toy study, in place of genlab.optim.studies for
    the `genlab optim` command line."""
    package = tmp_path / "toystudies"
    package.mkdir()
    (package / "__init__.py").write_text('"""Toy studies."""\nfrom genlab.core.studies import '
                                         'Studies\nSTUDIES = Studies(__name__)\n')
    (package / "sum.py").write_text(textwrap.dedent(TOY_STUDY))
    (package / "helpers.py").write_text('"""No study here."""\nSTUDIES = 1\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(cli_optim.app, "studies_package", "toystudies")
    monkeypatch.setattr(cli_optim.app, "studies_added", False, raising=False)
    yield package
    cli_optim.app.lazy_commands.pop("seed-sum", None)
    studies._PACKAGES.pop("toystudies", None)
    for name in [m for m in sys.modules if m.split(".")[0] == "toystudies"]:
        del sys.modules[name]


def test_declared_names_reads_the_registrations_without_importing(toy_package):
    found = declared_names(toy_package, "toystudies", "STUDY")
    assert found == {"seed-sum": ("toystudies.sum", "A toy study: the sum of the seeds, "
                                                    "written to the run folder.")}
    assert "toystudies.sum" not in sys.modules
    (toy_package / "bad.py").write_text('"""Bad."""\nNAME = "x"\nSTUDY = make(Study(NAME))\n')
    with pytest.raises(ConfigError, match="literal name"):
        declared_names(toy_package, "toystudies", "STUDY")


def test_a_study_module_is_a_generated_command(toy_package, tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["optim", "--help"])
    assert exc.value.code == 0 and "seed-sum" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exc:
        main(["optim", "seed-sum", "--seeds", "2-4", "--scale", "0.5", "--out",
              str(tmp_path / "r")])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("sum 4.5\nthe seeds\nseed\n") and "outputs in" in out
    assert json.loads((tmp_path / "r" / "summary.json").read_text())["sum"] == 4.5
    with pytest.raises(SystemExit) as exc:  # its declared limits, as for every command
        main(["optim", "seed-sum", "--scale", "0", "--out", str(tmp_path / "s")])
    assert exc.value.code == 2


def test_a_study_registers_with_the_package_that_defines_its_run(toy_package):
    assert studies.study_modules("toystudies") == declared_names(toy_package, "toystudies",
                                                                 "STUDY")
    assert "toystudies" not in sys.modules  # listed from the sources alone
    toy = studies.studies_of("toystudies")
    study = toy.get("seed-sum")
    assert study.run.__module__ == "toystudies.sum" and "seed-sum" in toy
    assert "seed-sum" not in studies.studies_of("genlab.optim.studies")
    with pytest.raises(ConfigError, match="not in a package that declares Studies"):
        studies.register_study(studies.Study("stray", dict, print, print))
    with pytest.raises(ConfigError, match="no package 'nopackage'"):
        studies.study_modules("nopackage.studies")
