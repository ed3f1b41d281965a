"""Every app's studies are modules that register themselves, each a generated command."""

import pytest

from genlab.cli import main
from genlab.core.errors import ConfigError
from genlab.core.studies import studies_of, study_modules

APPS = {"nas": ("genlab.nas.studies", {"ber-select", "entropy-peak", "repro"}),
        "optim": ("genlab.optim.studies", {"standard", "correlate", "toy", "sparse"}),
        "gaze": ("genlab.gaze.studies", {"bench", "audit", "paper"})}


@pytest.mark.parametrize("app", sorted(APPS))
def test_every_study_module_registers_the_name_it_declares(app, capsys):
    package, expected = APPS[app]
    modules = study_modules(package)
    assert set(modules) >= expected
    for name, (module, summary) in modules.items():
        study = studies_of(package).get(name)
        assert study.name == name and study.run.__module__ == module and summary
    with pytest.raises(SystemExit) as exc:
        main([app, "--help"])
    listed = capsys.readouterr().out
    assert exc.value.code == 0 and all(name in listed for name in modules)


def test_a_nas_study_refuses_bad_input_in_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["nas", "ber-select", "--grid", "ber-op", "--out", str(tmp_path / "a")])
    err = capsys.readouterr().err.strip()
    assert exc.value.code != 0 and len(err.splitlines()) == 1 and "--grid 'ber-op'" in err
    with pytest.raises(SystemExit) as exc:
        main(["nas", "repro", "--shard", "2/2", "--out", str(tmp_path / "b")])
    err = capsys.readouterr().err.strip()
    assert exc.value.code != 0 and len(err.splitlines()) == 1 and "0 <= I < N" in err
    with pytest.raises(ConfigError, match="unknown study 'nope'; expected one of: ber-select"):
        studies_of("genlab.nas.studies").get("nope")
    with pytest.raises(ConfigError, match="unknown study 'nope'; expected one of: correlate"):
        studies_of("genlab.optim.studies").get("nope")
