"""The one command to validate a GPU machine: every method briefly on CUDA, CUDA against CPU.

    python benchmarks/gpu_check.py --out runs/gpu_check

Runs, through the public APIs, an NB201 search of a few steps, a retraining, a digits
training with SAM and a MoEGaze training on the GPU; compares CUDA with CPU on small
cases (gradients of one NB201 network on the same weights and batch; a retraining
epoch's loss); checks mixed precision (bf16, fp16 with loss scaling) with channels_last,
the CUDA RNG state in checkpoints and an exact resume on CUDA (deterministic kernels);
times a few steps of the DARTS ImageNet network (batch 64, 224x224, bf16, channels_last;
skipped on CPU, where --quick runs it at toy sizes), every search method's bilevel step in
the DARTS space at the upstream size, fp32 and bf16, as ratios to DARTS' step beside issue
35's targets, and a RetinaNet step on the DARTS backbone (bf16, cuda only); on CUDA, the
search step captured in a CUDA graph against the eager one (step times, the GPU's busy share,
and the CUDA-marked tests of tests/nas/test_captured_step.py) and, given the authors'
checkouts (--darts-src, --pc-darts-src, --darts-minus-src, --autodl-src), the side by side of
benchmarks/nas_side_by_side.py on the device; prints step times. Every check prints PASS, SKIP
(why) or FAIL with its figures, one line; the exit code is 1 when one fails. gpu_check.json in
--out holds everything. Each check starts from PyTorch's backend defaults (TF32, cuDNN,
deterministic algorithms), whatever the one before it set.

On a machine without CUDA it prints a "no GPU" line and exits 0. ``--device cpu``
runs the same checks on the CPU (CPU against CPU): a dry run of this script. It needs
genlab's base dependencies only (genlab may be on PYTHONPATH=src, not installed), none of
its extras: no pycocotools, ray, tensorboard or nats_bench. benchmarks/nas_methods_step.py,
beside it, provides the method steps.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

import torch
from torch import nn

from genlab.nas.spaces.darts.genotype import DARTS_V2  # the checks' DARTS-space cell

ARCH = "|nor_conv_3x3~0|+|nor_conv_1x1~0|skip_connect~1|+|avg_pool_3x3~0|none~1|nor_conv_3x3~2|"


def environment(device: torch.device) -> dict:
    info = {"torch": torch.__version__, "cuda_build": torch.version.cuda,
            "device": str(device)}
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        info.update(name=props.name, capability=f"{props.major}.{props.minor}",
                    memory_gib=round(props.total_memory / 2**30, 1),
                    devices=torch.cuda.device_count(), bf16=torch.cuda.is_bf16_supported(),
                    cudnn=torch.backends.cudnn.version())
    return info


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def check_nas_search(device, out: Path, quick: bool) -> dict:
    from genlab.nas.search import SearchConfig, run_search

    steps = 4 if quick else 20
    s = run_search(SearchConfig(steps=steps, channels=4 if quick else 8, hessian_points=1,
                                device=str(device), diag_batch=32), out / "search",
                   progress_bar=False)
    assert s["genotype"] and s["processes"] == 1
    return {"steps": steps, "genotype": s["genotype"],
            "seconds_per_step": s["search_seconds"] / steps}


def _retrain(device, out: Path, epochs: int, channels: int) -> dict:
    from genlab.nas.retrain import RetrainConfig, retrain

    s = retrain(RetrainConfig(arch=ARCH, channels=channels, epochs=epochs, device=str(device)),
                out, progress_bar=False)
    first = json.loads((out / "metrics.jsonl").read_text().splitlines()[0])
    return {"test_acc": s["test_acc"], "train_loss_epoch0": first["train_loss"],
            "seconds_per_epoch": s["train_seconds"] / epochs}


def _tf32(on: bool) -> None:
    torch.backends.cuda.matmul.allow_tf32 = on
    torch.backends.cudnn.allow_tf32 = on


def check_nas_retrain(device, out: Path, quick: bool) -> dict:
    """A retraining on the device; its first epoch's loss against the same epoch on CPU, in
    strict float32 (TF32 off: asserted) and with PyTorch's default cuDNN TF32 (reported)."""
    epochs, channels = (1, 4) if quick else (3, 8)
    cpu = _retrain(torch.device("cpu"), out / "retrain_cpu", 1, channels)
    figures: dict = {"cpu_train_loss_epoch0": cpu["train_loss_epoch0"]}
    default_tf32 = torch.backends.cudnn.allow_tf32
    for name, on in (("tf32", True), ("fp32", False)):
        _tf32(on)
        try:
            dev = _retrain(device, out / f"retrain_{name}", epochs, channels)
        finally:
            _tf32(default_tf32)
        rel = abs(dev["train_loss_epoch0"] - cpu["train_loss_epoch0"]) / cpu["train_loss_epoch0"]
        figures.update({f"{name}_{k}": v for k, v in dev.items()})
        figures[f"{name}_relative_diff"] = rel
    rel = figures["fp32_relative_diff"]
    assert rel < 1e-3, f"epoch-0 loss (TF32 off) differs from CPU by {rel:.2e} (relative)"
    return figures


def check_optim_train(device, out: Path, quick: bool) -> dict:
    from genlab.optim.training.train import TrainConfig, train_digits

    epochs = 1 if quick else 3
    s = train_digits(TrainConfig(arch="mlp" if quick else "cnn", optimizer="sam", epochs=epochs,
                                 measure=False, device=str(device)), out / "optim",
                     progress_bar=False)
    assert 0 <= s["test_acc"] <= 100  # percent
    return {"optimizer": "sam", "test_acc": s["test_acc"],
            "seconds_per_epoch": s["train_seconds"] / epochs}


def check_gaze_train(device, out: Path, quick: bool) -> dict:
    from genlab.gaze.protocol import load_task_data
    from genlab.gaze.train import GazeTrainConfig, train_gaze

    cfg = GazeTrainConfig(steps=20 if quick else 200, eval_every=20 if quick else 100,
                          warmup_steps=0 if quick else 30, train_count=192 if quick else 1000,
                          test_count=96 if quick else 300, device=str(device))
    _, s = train_gaze(cfg, load_task_data(cfg), out / "gaze", progress_bar=False)
    assert s["target_mean_deg"] == s["target_mean_deg"]  # not NaN
    return {"steps": cfg.steps, "val_mean_deg": s["val_mean_deg"],
            "constant_val_mean_deg": s["constant_val_mean_deg"],
            "target_mean_deg": s["target_mean_deg"],
            "images_per_second": s.get("train_images_per_s")}


def check_gradients_vs_cpu(device, out: Path, quick: bool) -> dict:
    """One NB201 network, same weights and batch: CUDA gradients against CPU (TF32 off)."""
    from genlab.nas.spaces.nb201.network import build_network

    _tf32(False)
    torch.manual_seed(0)
    net = build_network(ARCH, 10, C=8, N=1, in_channels=3)
    x, y = torch.randn(16, 3, 16, 16), torch.randint(0, 10, (16,))
    grads = []
    for dev in (torch.device("cpu"), device):
        model = net.to(dev)
        model.zero_grad()
        nn.functional.cross_entropy(model(x.to(dev)), y.to(dev)).backward()
        grads.append(torch.cat([p.grad.detach().cpu().flatten() for p in model.parameters()]))
    rel = float((grads[0] - grads[1]).norm() / grads[0].norm())
    assert rel < 1e-4, f"relative gradient difference {rel:.2e}"
    return {"relative_gradient_difference": rel}


def _amp_trainer(device, amp, channels_last, quick):
    from genlab.core.trainer import Trainer
    from genlab.nas.spaces.nb201.network import build_network

    torch.manual_seed(0)
    model = build_network(ARCH, 10, C=4 if quick else 16, N=1 if quick else 2,
                          in_channels=3).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    return Trainer(model, opt, nn.CrossEntropyLoss(), device=device, amp=amp,
                   channels_last=channels_last, progress_bar=False)


def check_precisions(device, out: Path, quick: bool) -> dict:
    """fp32, bf16 and fp16 (with channels_last) steps: finite losses and step times."""
    n, side, steps = (16, 16, 2) if quick else (128, 32, 20)
    x = torch.randn(n, 3, side, side, device=device)
    y = torch.randint(0, 10, (n,), device=device)
    result = {}
    for amp, cl in (("off", False), ("bf16", True), ("fp16", True)):
        trainer = _amp_trainer(device, amp, cl, quick)
        xs = x.contiguous(memory_format=torch.channels_last) if cl else x
        if cl:
            trainer.model.to(memory_format=torch.channels_last)
        trainer.step(xs, y)  # warm-up
        _sync(device)
        t0 = time.perf_counter()
        losses = [trainer.step(xs, y) for _ in range(steps)]
        _sync(device)
        assert all(v == v and abs(v) < 1e4 for v in losses), f"{amp}: losses {losses}"
        result[f"{amp}_seconds_per_step"] = (time.perf_counter() - t0) / steps
        result[f"{amp}_last_loss"] = losses[-1]
    return result


def check_exact_resume(device, out: Path, quick: bool) -> dict:
    """Trainer on the device: 2 epochs, and 1 epoch + resume; the weights must agree.

    Deterministic algorithms are requested (warn-only: some CUDA backward kernels, such as
    adaptive average pooling, have no deterministic version); the figure says whether the
    resume was exact. CPU resumes are exact.
    """
    from genlab.core.data import Batches, Split, augment_images, load_digits_data
    from genlab.core.runs import RunDir
    from genlab.core.seeding import capture_rng_state

    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cudnn.benchmark = False
    n = 64 if quick else 256
    data = load_digits_data(size=16)
    batches = Batches(Split(data.train.images[:n].repeat(1, 3, 1, 1), data.train.labels[:n]),
                      32, seed=0)
    runs = []
    for name, stops in (("full", [2]), ("part", [1, 2])):
        for i, epochs in enumerate(stops):
            run = RunDir(out / "resume" / name, {"x": 1}, resume=i > 0)
            trainer = _amp_trainer(device, "off", False, quick)
            trainer.augment = augment_images
            trainer.fit(batches.epoch, epochs, run=run)
        runs.append({k: v.detach().cpu() for k, v in trainer.model.state_dict().items()})
    torch.use_deterministic_algorithms(False)
    worst = max(float((runs[0][k].double() - runs[1][k].double()).abs().max()) for k in runs[0])
    has_cuda_rng = "cuda" in capture_rng_state()
    assert worst < 1e-4, f"resumed run differs by {worst:.2e}"
    assert has_cuda_rng or device.type != "cuda", "CUDA RNG state missing from checkpoints"
    return {"max_weight_difference": worst, "exact": worst == 0.0,
            "cuda_rng_in_checkpoint": has_cuda_rng}


def check_imagenet_step(device, out: Path, quick: bool) -> dict:
    """DARTS_V2's ImageNet network (C=48, 14 cells, auxiliary head, 1000 classes) trained a few
    steps at batch 64 on synthetic 224x224 tensors, bf16 and channels_last, with the recipe's
    loss and optimiser: step time, images per second, peak memory. On CPU: skipped, or with
    --quick a toy size (C=8, batch 2, 32x32, float32) that only exercises the code."""
    from genlab.core.trainer import Trainer
    from genlab.nas.retrain import ClippedSGD
    from genlab.nas.spaces import build_space_network
    from genlab.nas.supernet.model_cost import count_macs, parameter_counts
    from genlab.nas.transfer.classify.imagenet import smoothed_loss
    from genlab.nas.transfer.classify.recipes import network_options

    cuda = device.type == "cuda"
    if not cuda and not quick:
        return {"skipped": "needs CUDA (--device cpu --quick runs a toy size)"}
    channels, batch, side, amp, steps = (48, 64, 224, "bf16", 4 if quick else 10) if cuda \
        else (8, 2, 32, "off", 2)
    torch.manual_seed(0)
    model = build_space_network("darts", DARTS_V2, 1000, channels=channels, cells=14,
                                options=network_options("darts", 0.4, 0.0)).to(device)
    params, macs = parameter_counts(model), count_macs(model, side)
    opt = ClippedSGD(model.parameters(), max_norm=5.0, lr=0.5, momentum=0.9, weight_decay=3e-5)
    trainer = Trainer(model, opt, smoothed_loss(0.1, 0.4), device=device, amp=amp,
                      channels_last=True, progress_bar=False)
    model.to(memory_format=torch.channels_last).train()
    x = torch.randn(batch, 3, side, side, device=device).contiguous(
        memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (batch,), device=device)
    trainer.step(x, y)  # warm-up (cuDNN autotuning, allocations)
    if cuda:
        torch.cuda.reset_peak_memory_stats(device)
    _sync(device)
    t0 = time.perf_counter()
    losses = [trainer.step(x, y) for _ in range(steps)]
    _sync(device)
    seconds = (time.perf_counter() - t0) / steps
    assert all(v == v and abs(v) < 1e4 for v in losses), f"losses {losses}"
    result = {"batch": batch, "image_size": side, "amp": amp, "seconds_per_step": seconds,
              "images_per_second": batch / seconds, "params_trained": params[0],
              "params": params[1], "macs_per_image": macs, "last_loss": losses[-1]}
    if cuda:
        result["peak_memory_gib"] = torch.cuda.max_memory_allocated(device) / 2**30
    return result


# Steps per row and precision: warm-up, then timed (median). On an H200 one step of every row
# takes ~11 s in fp32 and ~12 s in bf16 (docs/scale.md), so the full check runs ~75 s.
NAS_METHOD_STEPS = {"warmup": 1, "timed": 2}
NAS_METHOD_QUICK = {"size": 8, "batch": 2, "in_channels": 3, "channels": 4, "cells": 1}


def _benchmarks_on_path() -> None:
    here = str(Path(__file__).resolve().parent)  # benchmarks/ is not a package
    if here not in sys.path:
        sys.path.insert(0, here)


def check_nas_methods(device, out: Path, quick: bool) -> dict:
    """Every search method's bilevel step, the search loop's own (benchmarks/nas_methods_step.py's
    setup, run under the search's autocast, SearchConfig.amp), in the DARTS space at the upstream
    size (C=16, 8 cells, 32x32, batch 64), fp32 and bf16: per row NAS_METHOD_STEPS warm-up then
    timed steps (synchronised wall seconds, median), the ratio to DARTS' step in the same run and
    precision, the allocator's peak (reset per row; cuda). The ratios are set beside issue 35's
    targets (met/missed: informative); the check fails only when a row fails to run.
    --quick: every row at a toy size (NAS_METHOD_QUICK), one timed step: the code path."""
    import statistics

    _benchmarks_on_path()
    from nas_methods_step import TARGETS, setup, timed
    from nas_methods_step import rows as method_rows

    warm, timed_steps = (0, 1) if quick else (NAS_METHOD_STEPS["warmup"],
                                              NAS_METHOD_STEPS["timed"])
    sizes = NAS_METHOD_QUICK if quick else None
    cuda = device.type == "cuda"
    rows = list(method_rows().items())
    table: dict = {}
    summary: dict = {}
    for amp, name in (("off", "fp32"), ("bf16", "bf16")):
        table[name] = {}
        # the first row of a process pays for cuDNN's first plans and the allocator's first
        # blocks (DARTS' row took 900 ms as the first row on an H200 and 572 ms in a process
        # already warm): a discarded DARTS row runs before the timed ones
        for label, keywords in [("warm-up", {"method": "darts"}), *rows]:
            options = {k: v for k, v in keywords.items() if k != "method"}
            net, step = setup("darts", keywords["method"], True, str(device), amp=amp,
                              sizes=sizes, **options)
            for _ in range(warm):
                step()
            if cuda:
                torch.cuda.reset_peak_memory_stats(device)
            seconds = statistics.median(timed(step, str(device)) for _ in range(timed_steps))
            if label == "warm-up":
                del net, step
                continue
            table[name][label] = {"ms": seconds * 1e3}
            if cuda:
                table[name][label]["peak_mib"] = torch.cuda.max_memory_allocated(device) / 2**20
            del net, step  # before the next row's peak
        base = table[name]["darts"]["ms"]
        parts = []
        for label, row in table[name].items():
            row["ratio"] = row["ms"] / base
            target = TARGETS.get(label)
            text = f"{label} {row['ms']:.1f}ms" if label == "darts" else \
                f"{label} x{row['ratio']:.2f}"
            if target is not None:
                row["target"], row["met"] = target, row["ratio"] <= target
                text += f" (<= {target} {'met' if row['met'] else 'missed'})"
            if "peak_mib" in row:
                text += f" {row['peak_mib']:.0f}MiB"
            parts.append(text)
        summary[name] = "; ".join(parts)
    steps = 2 * len(rows) * (warm + timed_steps)
    return {"rows": len(rows), "steps": steps, **summary, "table": table}


def check_nas_step_profile(device, out: Path, quick: bool) -> dict:
    """Where DARTS' bilevel step spends its time (DARTS space, upstream size, fp32, the
    nas_methods_step row's setup): one step under torch.profiler after a warm-up. Figures: the
    step's wall time, the operators and (cuda) kernels it launches, the kernels' summed time and
    its share of the wall time (low: the GPU waits on the host, launch and Python bound), the top
    operators by self time; the profiler's table goes to nas_step_profile.txt."""
    from torch.profiler import ProfilerActivity, profile

    _benchmarks_on_path()
    from nas_methods_step import setup

    cuda = device.type == "cuda"
    rows = {}
    for method in ("darts", "pc-darts"):
        net, step = setup("darts", method, True, str(device),
                          sizes=NAS_METHOD_QUICK if quick else None)
        step()  # warm-up
        _sync(device)
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
        t0 = time.perf_counter()
        with profile(activities=activities) as prof:
            step()
            _sync(device)
        wall = time.perf_counter() - t0
        events = prof.events()
        kernels = [e for e in events if e.device_type.name == "CUDA"]
        ops = [e for e in events if e.device_type.name == "CPU" and e.name.startswith("aten::")]
        kernel_s = sum(e.time_range.elapsed_us() for e in kernels) / 1e6
        table = prof.key_averages().table(
            sort_by="self_cuda_time_total" if cuda else "self_cpu_time_total", row_limit=25)
        (out / f"nas_step_profile_{method}.txt").write_text(table + "\n")
        averages = sorted(prof.key_averages(), key=lambda a: a.self_cpu_time_total,
                          reverse=True)[:5]
        rows[method] = {"wall_ms": wall * 1e3, "aten_ops": len(ops), "kernels": len(kernels),
                        "kernel_ms": kernel_s * 1e3,
                        "gpu_busy": kernel_s / wall if cuda else None,
                        "top_self_cpu": [f"{a.key} {a.self_cpu_time_total / 1e3:.1f}ms"
                                         for a in averages]}
        del net, step
    summary = "; ".join(f"{m} wall {r['wall_ms']:.0f}ms ops {r['aten_ops']} kernels "
                        f"{r['kernels']} kernel time {r['kernel_ms']:.0f}ms"
                        for m, r in rows.items())
    return {"summary": summary, "table": rows}


# the search step captured in a CUDA graph against the eager one: (space, method) rows at the
# upstream size, and the steps per row (after WARMUP_STEPS eager runs, the capture and a replay)
CAPTURED_ROWS = (("darts", "darts"), ("darts", "pc-darts"), ("nb201", "darts"))
CAPTURED_TIMED = 20
REPO = Path(__file__).resolve().parent.parent


def _gpu_busy(step, device) -> dict:
    """One step under torch.profiler: wall ms, the CUDA kernels it saw, their summed time and
    its share of the wall time (None where the profiler saw no kernel)."""
    from torch.profiler import ProfilerActivity, profile

    _sync(device)
    t0 = time.perf_counter()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        step()
        _sync(device)
    wall = time.perf_counter() - t0
    kernels = [e for e in prof.events() if e.device_type.name == "CUDA"]
    kernel_s = sum(e.time_range.elapsed_us() for e in kernels) / 1e6
    return {"wall_ms": wall * 1e3, "kernels": len(kernels), "kernel_ms": kernel_s * 1e3,
            "gpu_busy": kernel_s / wall if kernels else None}


def _env_with_genlab() -> dict:
    """This process's environment with the genlab it imports first on PYTHONPATH (for the
    subprocesses: genlab may be on PYTHONPATH=src, not installed)."""
    import genlab

    here = str(Path(genlab.__file__).resolve().parents[1])
    return {**os.environ, "PYTHONPATH": os.pathsep.join([here, os.environ.get("PYTHONPATH", "")])}


def _cuda_tests() -> dict:
    """The CUDA-marked tests of the captured step (pytest -m cuda), where pytest and the
    repository's tests are at hand."""
    tests = REPO / "tests" / "nas" / "test_captured_step.py"
    if importlib.util.find_spec("pytest") is None or not tests.is_file():
        return {"cuda_tests": "not run (needs pytest and the repository's tests/)"}
    env = _env_with_genlab()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m",
                           "cuda", str(tests)], capture_output=True, text=True, cwd=REPO,
                          env=env, timeout=900)
    last = (proc.stdout.strip().splitlines() or ["no output"])[-1]
    assert proc.returncode == 0, f"pytest -m cuda {tests.name}: {last}\n{proc.stdout[-3000:]}"
    return {"cuda_tests": last}


def check_captured_step(device, out: Path, quick: bool) -> dict:
    """The search step captured in one CUDA graph and replayed (genlab.nas.captured, `nas search
    --cuda-graph on`) against the eager step, at the upstream size (DARTS space C=16, 8 cells;
    NB201 C=16, 5 cells per stage; 32x32, batch 64, fp32), each with benchmarks/
    nas_methods_step.py's setup: per row the median synchronised wall ms of CAPTURED_TIMED eager
    and replayed steps and their ratio (below 1: the capture is faster, what AUTO_ON_CUDA waits
    for), the share of DARTS' step the GPU is busy, eager and captured (profiler kernel time /
    wall; issue 50's goal >= 0.8). The CUDA-marked tests are captured_step_tests. cuda only
    (the captured code's CPU checks are tests/nas/test_captured_step.py)."""
    _benchmarks_on_path()
    from nas_methods_step import setup, timed

    from genlab.nas.captured import WARMUP_STEPS

    if device.type != "cuda":
        return {"skipped": "cuda only (on the CPU: tests/nas/test_captured_step.py)"}
    warm, n = WARMUP_STEPS + 2, 3 if quick else CAPTURED_TIMED
    sizes = NAS_METHOD_QUICK if quick else None
    table: dict = {}
    for space, method in CAPTURED_ROWS:
        row: dict = {}
        for mode in ("eager", "captured"):
            net, step = setup(space, method, True, str(device), sizes=sizes,
                              cuda_graph=mode == "captured")
            for _ in range(warm):
                step()
            row[f"{mode}_ms"] = 1e3 * statistics.median(timed(step, str(device))
                                                        for _ in range(n))
            if space == "darts" and method == "darts":
                row[f"{mode}_profile"] = _gpu_busy(step, device)
            if mode == "captured":
                assert step.bilevel.replays >= n, "the captured step did not replay"
            del net, step
        row["ratio"] = row["captured_ms"] / row["eager_ms"]
        table[f"{space} {method}"] = row
    busy = {mode: table["darts darts"][f"{mode}_profile"]["gpu_busy"]
            for mode in ("eager", "captured")}
    summary = "; ".join(f"{label} eager {r['eager_ms']:.1f}ms captured {r['captured_ms']:.1f}ms "
                        f"x{r['ratio']:.2f}" for label, r in table.items())
    return {"summary": summary, "gpu_busy_eager": busy["eager"],
            "gpu_busy_captured": busy["captured"],
            "captured_faster": all(r["ratio"] < 1 for r in table.values()), "table": table}


def check_captured_step_tests(device, out: Path, quick: bool) -> dict:
    """The CUDA-marked tests of tests/nas/test_captured_step.py (the replayed graph against the
    eager step over 10 steps, every method that claims capture); a check of its own, so that a
    failing test leaves captured_step's timings standing. cuda only."""
    if device.type != "cuda":
        return {"skipped": "cuda only (on the CPU: tests/nas/test_captured_step.py)"}
    return _cuda_tests()


# the authors' checkouts for the side by side (gpu_check's --darts-src ... options)
SIDE_BY_SIDE: dict[str, str | None] = {}


def check_side_by_side(device, out: Path, quick: bool) -> dict:
    """benchmarks/nas_side_by_side.py on this device when the authors' checkouts are given
    (--darts-src, --pc-darts-src, --darts-minus-src, --autodl-src; kept outside the repository,
    unedited on CUDA): genlab's step against quark0/darts', PC-DARTS', DARTS-' and AutoDL's
    NB-201 DARTS in one process, at the upstream size (batch 64 on CUDA; --quick batch 2, two
    rounds), the ratios beside issue 50's goals. The script's output goes to side_by_side.txt,
    its figures to side_by_side.json."""
    given = {k: v for k, v in SIDE_BY_SIDE.items() if v}
    if not given:
        return {"skipped": "no checkouts given (--darts-src, --pc-darts-src, --darts-minus-src, "
                           "--autodl-src)"}
    figures = out / "side_by_side.json"
    cmd = [sys.executable, str(REPO / "benchmarks" / "nas_side_by_side.py"), "--device",
           device.type, "--rounds", "2" if quick else "10", "--threads", "1", "--out",
           str(figures), *(["--batch", "2"] if quick else [])]
    for key, path in given.items():
        cmd += [f"--{key.replace('_', '-')}", path]
    env = _env_with_genlab()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
    (out / "side_by_side.txt").write_text(proc.stdout + proc.stderr)
    assert proc.returncode == 0, f"nas_side_by_side.py exited {proc.returncode}: " \
        f"{(proc.stderr.strip().splitlines() or [''])[-1]}"
    result = json.loads(figures.read_text())
    return {"summary": "; ".join(f"{row} {r:.2f}" for row, r in result["ratios"].items()),
            "device_name": result.get("device_name"), "batch": result["batch"],
            "median_ms": {k: 1e3 * v for k, v in result["median"].items()},
            "ratios": result["ratios"]}


def _detection_batch(n: int, side: int, seed: int = 0):
    """Packed (images, targets) of n random side x side images, 1-4 random boxes each."""
    from genlab.nas.transfer.detection.records import pack

    g = torch.Generator().manual_seed(seed)
    samples = []
    for i in range(n):
        k = int(torch.randint(1, 5, (1,), generator=g))
        xy = torch.rand(k, 2, generator=g) * side * 0.6
        wh = side * (0.1 + 0.3 * torch.rand(k, 2, generator=g))
        rows = torch.cat([xy, (xy + wh).clamp(max=side),
                          torch.randint(0, 20, (k, 1), generator=g).float()], 1)
        samples.append((torch.rand(3, side, side, generator=g), rows, i))
    return pack(samples)


def check_detection(device, out: Path, quick: bool) -> dict:
    """RetinaNet on the DARTS ImageNet backbone (C=48, 14 cells) + FPN, batch 8 at 512 px of
    synthetic tensors, bf16 autocast: finite losses, step time, peak memory (cuda only; the
    imports run everywhere: pycocotools, the detect extra, is needed by COCOeval only)."""
    from genlab.nas.transfer.detection.models import build_detector
    from genlab.nas.transfer.detection.training import DetectionTrainer, IterationSchedule

    if device.type != "cuda":
        return {"skipped": "cuda only"}

    n, side, steps = (2, 256, 2) if quick else (8, 512, 10)
    torch.manual_seed(0)
    model = build_detector("retinanet", 20, backbone=None, space="darts", genotype=DARTS_V2,
                           fpn_channels=256, min_size=side, max_size=side).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=1e-4)
    sched = IterationSchedule(opt, lr=0.01, steps_per_epoch=100, milestones=(8, 11),
                              warmup=500, warmup_ratio=0.001)
    trainer = DetectionTrainer(model, opt, None, device=device, scheduler=sched, amp="bf16",
                               progress_bar=False)
    x, y = (t.to(device) for t in _detection_batch(n, side))
    model.train()
    trainer.step(x, y)  # warm-up
    torch.cuda.reset_peak_memory_stats(device)
    _sync(device)
    t0 = time.perf_counter()
    losses = [trainer.step(x, y) for _ in range(steps)]
    _sync(device)
    assert all(v == v and abs(v) < 1e4 for v in losses), f"losses {losses}"
    return {"batch": n, "side": side, "seconds_per_step": (time.perf_counter() - t0) / steps,
            "images_per_second": n * steps / (time.perf_counter() - t0),
            "peak_memory_gib": torch.cuda.max_memory_allocated(device) / 2**30,
            "params": sum(p.numel() for p in model.parameters()), "last_loss": losses[-1]}


CHECKS = {
    "nas_search": check_nas_search,
    "nas_retrain_vs_cpu": check_nas_retrain,
    "optim_train_sam": check_optim_train,
    "gaze_train": check_gaze_train,
    "gradients_vs_cpu": check_gradients_vs_cpu,
    "precisions_channels_last": check_precisions,
    "exact_resume": check_exact_resume,
    "imagenet_step": check_imagenet_step,
    "nas_methods_step": check_nas_methods,
    "nas_step_profile": check_nas_step_profile,
    "captured_step": check_captured_step,
    "captured_step_tests": check_captured_step_tests,
    "side_by_side": check_side_by_side,
    "detection_retinanet_bf16": check_detection,
}


def _backend_flags() -> dict:
    """The global backend switches a check may set (TF32, cuDNN autotuning, deterministic
    algorithms); run_checks puts them back after each check, so that every check, and the step
    times above all, run under PyTorch's defaults as genlab's commands do."""
    return {"matmul_tf32": torch.backends.cuda.matmul.allow_tf32,
            "cudnn_tf32": torch.backends.cudnn.allow_tf32,
            "cudnn_benchmark": torch.backends.cudnn.benchmark,
            "cudnn_deterministic": torch.backends.cudnn.deterministic,
            "deterministic": (torch.are_deterministic_algorithms_enabled(),
                              torch.is_deterministic_algorithms_warn_only_enabled())}


def _restore_backend_flags(flags: dict) -> None:
    torch.backends.cuda.matmul.allow_tf32 = flags["matmul_tf32"]
    torch.backends.cudnn.allow_tf32 = flags["cudnn_tf32"]
    torch.backends.cudnn.benchmark = flags["cudnn_benchmark"]
    torch.backends.cudnn.deterministic = flags["cudnn_deterministic"]
    on, warn_only = flags["deterministic"]
    torch.use_deterministic_algorithms(on, warn_only=warn_only)


def run_checks(device: torch.device, out: Path, quick: bool, only: list[str]) -> dict:
    """Every check (or those of ``only``): PASS, SKIP (the figures say why: a check that needs
    CUDA on the CPU) or FAIL (its error), one line each; tables stay in the JSON."""
    results = {}
    for name, check in CHECKS.items():
        if only and name not in only:
            continue
        flags = _backend_flags()
        t0 = time.perf_counter()
        try:
            figures = check(device, out, quick)
            status = "SKIP" if "skipped" in figures else "PASS"
        except Exception as exc:  # noqa: BLE001 - every check runs; failures are reported
            figures = {"error": f"{type(exc).__name__}: {exc}",
                       "traceback": traceback.format_exc()}
            status = "FAIL"
        finally:
            _restore_backend_flags(flags)
        figures["seconds"] = time.perf_counter() - t0
        results[name] = {"status": status, **figures}
        shown = ", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}"
                          for k, v in figures.items()
                          if k != "traceback" and not isinstance(v, dict))
        print(f"{status}  {name:26s} {shown}", flush=True)
    return results


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=None, help="Folder for run folders and JSON.")
    ap.add_argument("--device", default="cuda", help="cuda (default), cuda:N, or cpu (dry run).")
    ap.add_argument("--quick", action="store_true", help="Smallest sizes (a smoke test).")
    ap.add_argument("--only", default="", help=f"Comma-separated checks of: {', '.join(CHECKS)}.")
    for name, what in (("darts", "quark0/darts' cnn folder"), ("pc-darts", "PC-DARTS"),
                       ("darts-minus", "DARTS-"), ("autodl", "AutoDL-Projects")):
        ap.add_argument(f"--{name}-src", default=None,
                        help=f"The {what} checkout for the side_by_side check (unedited).")
    args = ap.parse_args(argv)
    SIDE_BY_SIDE.update(darts_src=args.darts_src, pc_darts_src=args.pc_darts_src,
                        darts_minus_src=args.darts_minus_src, autodl_src=args.autodl_src)
    only = [c.strip() for c in args.only.split(",") if c.strip()]
    unknown = sorted(set(only) - set(CHECKS))
    if unknown:
        ap.error(f"unknown check(s) {', '.join(unknown)}; expected some of {', '.join(CHECKS)}")
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print(f"no GPU: torch {torch.__version__} sees no CUDA device "
              f"(CUDA build: {torch.version.cuda}); nothing to check")
        return 0
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # deterministic cuBLAS
    from genlab.core.devices import resolve_device
    from genlab.core.seeding import fixed_threads

    device = resolve_device(args.device)
    out = args.out or Path(tempfile.mkdtemp(prefix="genlab-gpu-check-"))
    out.mkdir(parents=True, exist_ok=True)
    if any(out.iterdir()):
        out = Path(tempfile.mkdtemp(prefix="run-", dir=out))
    env = environment(device)
    print("environment  " + ", ".join(f"{k} {v}" for k, v in env.items()), flush=True)
    t0 = time.perf_counter()
    # the CPU dry run's toy steps are Python-bound: more intra-op threads only spin, and on a
    # loaded machine they slow it several-fold
    with fixed_threads(1 if device.type == "cpu" and args.quick else 0):
        results = run_checks(device, out, args.quick, only)
    (out / "gpu_check.json").write_text(json.dumps({"environment": env, "checks": results},
                                                   indent=2) + "\n")
    failed = [n for n, r in results.items() if r["status"] == "FAIL"]
    skipped = sum(r["status"] == "SKIP" for r in results.values())
    print(f"{len(results) - len(failed) - skipped} passed, {len(failed)} failed, {skipped} "
          f"skipped; {time.perf_counter() - t0:.0f} s; details in {out / 'gpu_check.json'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
