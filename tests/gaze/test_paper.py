"""`genlab gaze paper` end to end on tiny files in the real formats, with bounded memory."""

import json
import subprocess
import sys
import textwrap

import pytest

from genlab.cli import main
from genlab.core.errors import ConfigError, DataError
from genlab.gaze.studies.paper import PaperConfig, paper_specs
from tests.gaze.conftest import write_gazehub_root, write_xgaze_release


@pytest.fixture(scope="module")
def roots(tmp_path_factory):
    base = tmp_path_factory.mktemp("paper")
    write_xgaze_release(base / "xgaze", subjects=(0, 1, 2, 3), per_subject=3)
    for kind in ("gaze360", "mpii", "eyediap"):
        write_gazehub_root(base / kind, kind)
    return base


def _paper_args(base, out):
    return ["gaze", "paper", "--out", str(out), "--xgaze", str(base / "xgaze"),
            "--gaze360", str(base / "gaze360"), "--mpii", str(base / "mpii"),
            "--eyediap", str(base / "eyediap"), "--seeds", "0", "--steps", "2",
            "--eval-every", "2", "--batch-size", "4", "--width", "4", "--size", "32x32",
            "--fractions", "1,0.5", "--workers", "0", "--device", "cpu"]


def test_paper_protocol_end_to_end(roots, tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        main(_paper_args(roots, tmp_path / "paper"))
    assert not exc.value.code, capsys.readouterr().err
    out = capsys.readouterr().out
    assert out.strip().splitlines()[-1] == f"outputs in {tmp_path / 'paper'}"
    recorded = json.loads((tmp_path / "paper" / "paper_config.json").read_text())
    assert recorded["seeds"] == [0] and recorded["reference_seeds"] == [0]
    for task in ("E->M", "E->D", "G->M", "G->D"):
        assert f"| {task} |" in out
    result = json.loads((tmp_path / "paper" / "paper.json").read_text())
    main_rows = result["tables"]["worlds"]["paper protocol"]["main"]
    assert all(r["reference"] is not None and r["constant"] > 0 for r in main_rows)
    runs = sorted(p.name for p in (tmp_path / "paper" / "runs").iterdir())
    assert len(runs) == 2 * 2 * 2 + 2 * 2  # sources x models x fractions + targets x folds
    e = json.loads((tmp_path / "paper" / "runs" / "xgaze__moegaze__f1__s0" / "summary.json")
                   .read_text())
    assert set(e["targets"]) == {f"mpii:{roots / 'mpii'}", f"eyediap:{roots / 'eyediap'}"}
    config = json.loads((tmp_path / "paper" / "runs" / "xgaze__moegaze__f1__s0" /
                         "config.json").read_text())
    assert config["input_norm"] == "imagenet" and config["stem"] == "imagenet"
    # the reference of a target covers every target subject, each exactly once
    folds = [json.loads((tmp_path / "paper" / "runs" / f"mpii__reference__fold{k}__s0" /
                         "summary.json").read_text()) for k in (0, 1)]
    subjects = [set(f["targets"][f"mpii:{roots / 'mpii'}"]["per_subject"]) for f in folds]
    assert not subjects[0] & subjects[1] and len(subjects[0] | subjects[1]) == 4
    with pytest.raises(SystemExit):  # rerun: every run is finished and read back
        main(_paper_args(roots, tmp_path / "paper"))
    assert capsys.readouterr().out == out


def test_paper_bad_options(roots, tmp_path):
    with pytest.raises(ConfigError, match="source"):
        paper_specs(PaperConfig(mpii=str(roots / "mpii")), tmp_path)
    with pytest.raises(DataError, match="--eyediap"):
        paper_specs(PaperConfig(xgaze=str(roots / "xgaze"), eyediap=str(tmp_path / "no")),
                    tmp_path)
    with pytest.raises(ConfigError, match="fractions"):
        paper_specs(PaperConfig(xgaze=str(roots / "xgaze"), mpii=str(roots / "mpii"),
                                fractions=[0.0]), tmp_path)


PEAK_RSS = textwrap.dedent("""
    import resource, sys
    from genlab.gaze.studies.paper import PaperConfig, run_paper
    base, out = sys.argv[1], sys.argv[2]
    cfg = PaperConfig(xgaze=base + "/xgaze", mpii=base + "/mpii", models=["baseline"],
                      fractions=[1.0], seeds=1, reference_seeds=0, steps=2, eval_every=2,
                      batch_size=8, eval_batch_size=8, width=4, workers=0, device="cpu",
                      threads=1)
    run_paper(cfg, out, progress_bar=False)
    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
""")


def test_paper_memory_does_not_grow_with_the_data(tmp_path):
    """Peak RSS with 25x more images (224x224 faces) stays within a few MiB of the small
    run (both larger than a batch), while loading the extra faces as float32 would take
    over 150 MiB more."""
    peaks = {}
    for name, per_subject, persons in (("small", 4, 4), ("large", 60, 4)):
        base = tmp_path / name
        write_xgaze_release(base / "xgaze", subjects=(0, 1, 2, 3), per_subject=per_subject,
                            test_subjects=())
        write_gazehub_root(base / "mpii", "mpii", persons=persons, per_person=per_subject // 2)
        done = subprocess.run([sys.executable, "-c", PEAK_RSS, str(base), str(base / "out")],
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-2000:]
        peaks[name] = int(done.stdout.split()[-1]) / 1024  # KiB -> MiB
    extra_images = (240 + 120) - (16 + 8)
    full_load_mib = extra_images * 224 * 224 * 3 * 4 / 2**20
    assert full_load_mib > 150
    assert peaks["large"] - peaks["small"] < 40, peaks
