"""genlab.nas.studies.repro: a perturbed start with eps = 0 is the plain search, bit for bit."""

import json

import pytest
import torch

import genlab.nas.studies.repro as repro_module
from genlab.nas.search import SearchConfig, run_search


@pytest.fixture(scope="module")
def repro():
    return repro_module


def test_perturbed_starts_and_the_comparison_with_the_reference(repro, tmp_path, monkeypatch):
    monkeypatch.setattr(repro, "VARIANTS", {"threads1": (1, None, True),
                                            "threads1-again": (1, None, True),
                                            "init-eps-0": (1, 0, True),
                                            "no-onednn": (1, None, False)})
    base = SearchConfig(reg="ber", steps=22, channels=4, hessian_points=0)
    for name in repro.VARIANTS:
        repro.run_variant(tmp_path, name, base)
    result = repro.compare(tmp_path, list(repro.VARIANTS), table=None)
    rows = {r["variant"]: r for r in result["rows"]}
    assert rows["threads1-again"]["max |alpha - ref|"] == 0.0  # same command, same row
    assert rows["threads1-again"]["parts at step"] is None and rows["threads1"]["same cell"]
    assert rows["init-eps-0"]["max |alpha - ref|"] > 0  # 1e-6 at the start moves alpha
    assert rows["no-onednn"]["max |alpha - ref|"] > 0  # so does another conv kernel
    assert torch.backends.mkldnn.enabled  # switched back on
    assert result["distance_curves"]["threads1-again"] == [0.0, 0.0]
    # the same start written with eps = 0 is the plain search exactly
    repro.write_perturbed_start(base, tmp_path / "zero", stream=0, eps=0.0)
    zero = run_search(base, tmp_path / "zero", resume=True, progress_bar=False)
    plain = result["rows"][0]
    reference = json.loads((tmp_path / "search" / "threads1" / "summary.json").read_text())
    assert zero["alpha"] == reference["alpha"]
    assert "`" + zero["genotype"].replace("|", "\\|") + "`" == plain["genotype"]
