"""Every bad input of issue 18's review, rerun through the installed ``genlab`` command.

Each case runs as a new process (as a user types it), and passes when it exits with 2,
prints exactly one line on stderr starting with ``genlab: ``, leaves nothing at the paths
it was given, and - where there is one - the corrected command then succeeds in the same
``--out``. Documented behaviours (a warning line and a run) are checked as documented.

    .venv/bin/python experiments/cli_audit.py [--keep DIR]

Prints one row per case and the count of failures (exit 1 when any case fails). Takes
about 5 minutes on 2 cores (every process imports torch).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GENLAB = [str(Path(sys.executable).parent / "genlab")]
REFUSAL_SECONDS = 120  # a refusal takes seconds; a case still running after this ran instead
TINY_OPTIM = ["--epochs", "1", "--no-measure"]
TINY_NAS = ["--steps", "2", "--hessian-points", "1"]
TINY_GAZE = ["--steps", "4", "--eval-every", "2", "--warmup-steps", "1", "--train-count",
             "300", "--test-count", "60"]
CELL = "|nor_conv_3x3~0|+|skip_connect~0|nor_conv_1x1~1|+|skip_connect~0|none~1|avg_pool_3x3~2|"
DARTS = ("Genotype(normal=[('sep_conv_3x3', 0), ('sep_conv_3x3', 1), ('skip_connect', 0), "
         "('sep_conv_3x3', 1), ('skip_connect', 0), ('sep_conv_3x3', 1), ('skip_connect', 0), "
         "('skip_connect', 1)], normal_concat=[2, 3, 4, 5], reduce=[('max_pool_3x3', 0), "
         "('max_pool_3x3', 1), ('skip_connect', 2), ('max_pool_3x3', 0), ('max_pool_3x3', 0), "
         "('skip_connect', 2), ('skip_connect', 2), ('avg_pool_3x3', 0)], "
         "reduce_concat=[2, 3, 4, 5])")


def genlab(*argv: str, timeout: float = 900) -> subprocess.CompletedProcess:
    """The command's outcome; one that runs past ``timeout`` counts as exit code -1."""
    env = dict(os.environ, COLUMNS="100")
    try:
        return subprocess.run([*GENLAB, *argv], capture_output=True, text=True, env=env,
                              timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        return subprocess.CompletedProcess(exc.cmd, -1, "", f"(still running after "
                                           f"{timeout:.0f} s: killed)")


def fixtures(tmp: Path) -> dict:
    """Finished runs of each app, rendered eyes and broken files the cases read."""
    f = {"tmp": str(tmp)}
    steps = [
        ("optim", ["optim", "train", "--out", str(tmp / "optim_run"), *TINY_OPTIM]),
        ("gaze", ["gaze", "train", "--out", str(tmp / "gaze_run"), *TINY_GAZE]),
        ("nas", ["nas", "train", CELL, "--out", str(tmp / "nas_run"), "--epochs", "1"]),
        ("eyes", ["gaze", "render", "--out", str(tmp / "eyes"), "--count", "8", "--png", "2",
                  "--size", "32x48"]),
    ]
    for name, argv in steps:
        if Path(argv[argv.index("--out") + 1]).exists():
            continue  # made by an earlier audit into the same --keep folder
        done = genlab(*argv)
        if done.returncode != 0:
            raise SystemExit(f"fixture {name} failed:\n{done.stderr[-2000:]}")
    (tmp / "latin1.csv").write_bytes("arch,cifar10\ncaf\xe9,1\n".encode("latin-1"))
    for name, payload in (("bad_json", b"{not json"), ("bad_utf8", b"\xff\xfe{\x00")):
        for app in ("optim", "gaze"):
            folder = tmp / f"{app}_{name}"
            shutil.rmtree(folder, ignore_errors=True)
            shutil.copytree(tmp / f"{app}_run", folder)
            (folder / "config.json").write_bytes(payload)
    (tmp / "a_folder").mkdir(exist_ok=True)
    ro = tmp / "ro"
    ro.mkdir(exist_ok=True)
    f["ro_mounted"] = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro", "none", str(ro)],
                                     capture_output=True).returncode == 0
    if not f["ro_mounted"]:
        ro.chmod(0o555)
    eyes = sorted((tmp / "eyes" / "eyes").glob("*.png"))
    f["eye"] = str(eyes[0])
    f["eyes"] = [str(e) for e in eyes]
    f["grid"] = str(tmp / "eyes" / "samples.png")
    return f


def cases(f: dict) -> list[dict]:
    t = f["tmp"]
    o = f"{t}/out"
    optim_run, gaze_run, nas_run = f"{t}/optim_run", f"{t}/gaze_run", f"{t}/nas_run"
    c = []

    def bad(name, argv, fixed=None, left=(o,), word=""):
        c.append({"name": name, "argv": argv, "fixed": fixed, "left": list(left), "word": word})

    # options that fail validation must leave no folder, and the corrected command runs
    bad("optim train --arch foo", ["optim", "train", "--out", o, "--arch", "foo"],
        ["optim", "train", "--out", o, *TINY_OPTIM], word="--arch")
    bad("nas search --dataset mnist", ["nas", "search", "--out", o, "--dataset", "mnist"],
        ["nas", "search", "--out", o, *TINY_NAS], word="mnist")
    bad("nas search --dataset cifar10 without --data-root",
        ["nas", "search", "--out", o, "--dataset", "cifar10"],
        ["nas", "search", "--out", o, *TINY_NAS], word="--data-root")
    bad("nas search --size 1", ["nas", "search", "--out", o, "--size", "1"],
        ["nas", "search", "--out", o, *TINY_NAS], word="size")
    bad("nas train --size 1", ["nas", "train", CELL, "--out", o, "--size", "1"],
        ["nas", "train", CELL, "--out", o, "--epochs", "1"], word="size")
    bad("optim train --width 1000000000",
        ["optim", "train", "--out", o, "--width", "1000000000"],
        ["optim", "train", "--out", o, *TINY_OPTIM], word="width")
    bad("optim measure --bn-mode foo",
        ["optim", "measure", optim_run, "--out", o, "--bn-mode", "foo"],
        ["optim", "measure", optim_run, "--out", o, "--samples", "64", "--iterations", "3",
         "--probes", "2"], word="--bn-mode")
    bad("gaze train --routing oracle (default world)",
        ["gaze", "train", "--out", o, "--routing", "oracle", *TINY_GAZE],
        ["gaze", "train", "--out", o, *TINY_GAZE], word="oracle")
    # files that do not decode
    bad("nas lookup: non-UTF-8 NB201 table",
        ["nas", "lookup", CELL, "--nb201-table", f"{t}/latin1.csv"], left=(), word="latin1.csv")
    bad("nas search: non-UTF-8 NB201 table",
        ["nas", "search", "--out", o, "--nb201-table", f"{t}/latin1.csv", *TINY_NAS],
        ["nas", "search", "--out", o, *TINY_NAS], word="latin1.csv")
    for kind in ("bad_json", "bad_utf8"):
        bad(f"optim measure --config {kind}",
            ["optim", "measure", optim_run, "--out", o, "--config",
             f"{t}/optim_{kind}/config.json"],
            ["optim", "measure", optim_run, "--out", o, "--samples", "64", "--iterations", "3",
             "--probes", "2"], word="config.json")
        bad(f"gaze predict: run folder with {kind} config.json",
            ["gaze", "predict", f"{t}/gaze_{kind}", f["eye"]], left=(), word="config.json")
    # outputs that cannot be written
    bad("gaze predict --out noext", ["gaze", "predict", gaze_run, f["eye"], "--out",
                                     f"{t}/noext"], left=(f"{t}/noext",), word="noext")
    bad("gaze predict --out a folder", ["gaze", "predict", gaze_run, f["eye"], "--out",
                                        f"{t}/a_folder"], left=(), word="a_folder")
    bad("gaze predict --out ro/a.png (read-only folder)",
        ["gaze", "predict", gaze_run, f["eye"], "--out", f"{t}/ro/a.png"],
        left=(f"{t}/ro/a.png",), word="write")
    # misleading lines before
    bad("optim measure nonexist.pt", ["optim", "measure", f"{t}/nonexist.pt", "--out", o],
        word="nonexist.pt")
    bad("optim measure of a gaze run", ["optim", "measure", gaze_run, "--out", o],
        word="gaze")
    bad("optim measure of a nas train run", ["optim", "measure", nas_run, "--out", o],
        word="nas")
    bad("gaze predict of an optim run", ["gaze", "predict", optim_run, f["eye"]], left=(),
        word="optim")
    bad("nas train: DARTS genotype without --space darts",
        ["nas", "train", DARTS, "--out", o], word="--space darts")
    # absurd sizes
    bad("nas search --steps 10**12", ["nas", "search", "--out", o, "--steps",
                                      "1000000000000"], word="steps")
    bad("gaze train --steps 10**12", ["gaze", "train", "--out", o, "--steps",
                                      "1000000000000"], word="steps")
    bad("optim train --epochs 10**12", ["optim", "train", "--out", o, "--epochs",
                                        "1000000000000"], word="epochs")
    bad("gaze predict: a grid of eyes (samples.png)", ["gaze", "predict", gaze_run,
                                                       f["grid"]], left=(), word="samples.png")
    return c


def check(case: dict) -> tuple[bool, str]:
    for path in case["left"]:
        if os.path.lexists(path):
            shutil.rmtree(path) if os.path.isdir(path) else os.unlink(path)
    done = genlab(*case["argv"], timeout=REFUSAL_SECONDS)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    problems = []
    if done.returncode != 2:
        problems.append(f"exit {done.returncode}")
    if len(lines) != 1 or not lines[0].startswith("genlab: "):
        problems.append(f"{len(lines)} stderr lines")
    if case["word"] and case["word"] not in done.stderr:
        problems.append(f"no {case['word']!r} in the line")
    problems += [f"left {p}" for p in case["left"] if os.path.lexists(p)]
    if case["fixed"] and not problems:
        fixed = genlab(*case["fixed"])
        if fixed.returncode != 0:
            problems.append(f"corrected command exit {fixed.returncode}: "
                            f"{fixed.stderr.strip().splitlines()[-1:]}")
    line = lines[0] if lines else ""
    return not problems, ("; ".join(problems) + " | " if problems else "") + line


def documented(f: dict) -> list[tuple[str, bool, str]]:
    """Behaviours that are not refusals: checked as docs/cli.md states them."""
    t = Path(f["tmp"])
    rows = []
    out = t / "never_ran"
    done = genlab("optim", "train", "--out", str(out), *TINY_OPTIM, "--resume")
    warned = "no run" in done.stderr and done.returncode == 0
    rows.append(("--resume on a folder with no run: warns and runs", warned,
                 done.stderr.strip().splitlines()[-1:] and done.stderr.strip().splitlines()[0]))
    stamp = {p.name: p.stat().st_mtime_ns for p in (t / "nas_run").iterdir()}
    done = genlab("nas", "train", CELL, "--out", str(t / "nas_run"), "--epochs", "1",
                  "--resume")
    same = stamp == {p.name: p.stat().st_mtime_ns for p in (t / "nas_run").iterdir()}
    rows.append(("--resume on a finished nas train: rewrites nothing", same and
                 done.returncode == 0, done.stdout.strip().splitlines()[-1]))
    summary = json.loads((t / "gaze_run" / "summary.json").read_text())
    rows.append(("4-step gaze train worse than constant: warning in summary.json",
                 "warning" in summary, summary.get("warning", "")[:90]))
    leftovers = [str(p.relative_to(t)) for p in t.rglob("*")
                 if p.name == ".lock" or p.name.endswith(".tmp") or p.name == "checkpoint.prev.pt"]
    rows.append(("no .lock, .tmp or checkpoint.prev.pt in any finished folder", not leftovers,
                 ", ".join(leftovers[:4])))
    eyes = genlab("gaze", "predict", str(t / "gaze_run"), *f["eyes"], "--out",
                  str(t / "arrows.png"))
    rows.append(("gaze predict: a batch of rendered eyes and a picture", eyes.returncode == 0
                 and (t / "arrows.png").is_file(), eyes.stdout.strip().splitlines()[-1]))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", type=Path, help="Folder to keep the cases' files in.")
    args = parser.parse_args()
    tmp = Path(args.keep or tempfile.mkdtemp(prefix="genlab-audit-"))
    tmp.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    f = fixtures(tmp)
    rows = []

    def show(name, ok, detail):
        rows.append(ok)
        print(f"{'ok  ' if ok else 'FAIL'}  {name.ljust(52)}  {str(detail)[:150]}", flush=True)

    for case in cases(f):
        show(case["name"], *check(case))
    for row in documented(f):
        show(*row)
    failures = rows.count(False)
    if f["ro_mounted"]:
        subprocess.run(["umount", str(tmp / "ro")], check=False)
    print(f"{len(rows) - failures} of {len(rows)} cases as documented, {failures} failing; "
          f"{time.perf_counter() - t0:.0f} s")
    if not args.keep:
        shutil.rmtree(tmp, ignore_errors=True)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
