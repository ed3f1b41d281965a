"""Side by side: genlab's search step against the authors' own search supernets.

One first-order bilevel step (the architecture parameters' Adam step on a validation batch,
then an SGD step with momentum on the weights on a training batch, gradients clipped at 5) in
the DARTS space at the upstream size (C=16, 8 cells, 32x32 RGB, 10 classes), batch 32 by
default on the CPU and 64 (upstream) on CUDA:

- the authors' ``model_search.Network`` of quark0/darts, PC-DARTS and (optionally) DARTS-,
  stepped as their ``train_search.py`` steps it: their own ``Architect.step`` with
  ``unrolled=False`` (Adam, betas 0.5/0.999), then ``zero_grad``, forward, backward,
  ``clip_grad_norm_`` and ``step`` of an SGD on ``model.parameters()``;
- with ``--autodl-src``, NB-201's DARTS (first order) in AutoDL-Projects (C=16, 5 cells per
  stage, 4 nodes): their ``TinyNetworkDarts`` (BatchNorm with running statistics, as genlab's
  supernet), stepped as their ``exps/NAS-Bench-201-algos/DARTS-V1.py`` steps it: the weights
  first (SGD, Nesterov momentum 0.9, decay 5e-4, clip 5), then alpha (Adam, betas 0.5/0.999),
  without their ``DataParallel`` wrapper (one device);
- genlab's supernet of the same method built and stepped as benchmarks/nas_methods_step.py's
  ``setup`` does (the search loop's own ``bilevel_step``, the method's parts at the middle of
  a 100-step budget), plus R-DARTS (DP), which is measured against genlab's DARTS only.

In one process every step runs once per round (one warm-up round first); the figure is the
median over rounds of the wall seconds per step (on CUDA synchronised before and after the
step), and each ratio is taken within the run. The process CPU seconds of each step are
printed beside it: on a machine loaded by other jobs they vary far less than wall time (with
one thread they are the step's own work). Also printed: the number of weight parameters of
each pair of supernets (they should match).

The authors' code is not part of genlab: pass the paths of their checkouts (for quark0/darts
its ``cnn`` folder; for AutoDL-Projects the repository's root, ``xautodl/`` or the older
``lib/`` layout). ``--device cuda`` runs every supernet on the GPU: the authors' models are
moved there as their ``train_search.py`` does (``model.cuda()``), their own ``.cuda()`` calls
left as they are, so the checkouts are used unedited. On the CPU, quark0/darts' and
PC-DARTS' search networks need their ``.cuda()`` calls dropped (docs/nas_performance.md lists
the edits); DARTS- runs on the CPU with its ``--disable_cuda`` option (given here on the CPU
only); AutoDL's search network has no ``.cuda()`` call.

    python benchmarks/nas_side_by_side.py --darts-src DARTS/cnn --pc-darts-src PC-DARTS \\
        --darts-minus-src DARTS- --rounds 5 --threads 2 [--profile] [--out FILE.json]
    python benchmarks/nas_side_by_side.py --device cuda --darts-src darts/cnn \\
        --pc-darts-src PC-DARTS --darts-minus-src DARTS- --autodl-src AutoDL-Projects \\
        --rounds 10 --out side_by_side_cuda.json               # unedited checkouts, batch 64
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from nas_methods_step import UPSTREAM, setup  # noqa: E402

from genlab.nas.spaces import get_space  # noqa: E402

# quark0/darts train_search.py's defaults: what their Architect and weight optimiser read
# (the rates do not change the cost of a step).
AUTHORS_ARGS = SimpleNamespace(momentum=0.9, weight_decay=3e-4, arch_learning_rate=3e-4,
                               arch_weight_decay=1e-3)
W_LR, GRAD_CLIP = 0.025, 5.0
BETA = 0.5  # DARTS-' auxiliary-skip weight at the middle of its cosine decay, as genlab's
# Module names the authors' checkouts share; cleared between checkouts.
SHARED_NAMES = ("operations", "genotypes", "model_search", "architect", "utils")

# (row, numerator, denominator, {device: goal}): ratios of median step times; the CPU goals
# are issue 35's, the CUDA goals issue 50's (the same GPU, one process, warm).
RATIOS = [
    ("genlab DARTS / quark0/darts", "genlab darts", "authors darts",
     {"cpu": 0.30, "cuda": 0.5}),
    ("genlab PC-DARTS / PC-DARTS' code", "genlab pc-darts", "authors pc-darts",
     {"cpu": 0.40, "cuda": 0.5}),
    ("genlab NB201 DARTS / AutoDL's", "genlab nb201-darts", "authors nb201-darts",
     {"cuda": 0.5}),
    ("genlab DARTS- / DARTS-' code", "genlab darts-minus", "authors darts-minus", {}),
    ("genlab DARTS- / genlab DARTS", "genlab darts-minus", "genlab darts",
     {"cpu": 1.2, "cuda": 1.2}),
    ("genlab R-DARTS (DP) / genlab DARTS", "genlab rdarts-dp", "genlab darts",
     {"cpu": 1.2, "cuda": 1.2}),
    ("PC-DARTS' code / quark0/darts", "authors pc-darts", "authors darts", {}),
    ("DARTS-' code / quark0/darts", "authors darts-minus", "authors darts", {}),
]
# genlab method of each authors' supernet (for the parameter counts and the profile).
PAIRS = {"authors darts": "genlab darts", "authors pc-darts": "genlab pc-darts",
         "authors darts-minus": "genlab darts-minus",
         "authors nb201-darts": "genlab nb201-darts"}
# Why a pair's weight counts differ where they do. AutoDL's ReLU-conv-BN ops give the conv a
# bias when the BN has no affine (bias=not affine): 60 biases of 16, 32 and 64 at C=16, 5 cells
# per stage (6,720 weights); genlab's convolutions have none (the BN follows them).
COUNT_NOTES = {"authors nb201-darts": "their cells' convolutions carry a bias (6,720 at C=16)"}
# AutoDL-Projects' NB-201 DARTS-V1: the search network's size and its weight optimiser
# (configs/nas-benchmark/algos/DARTS.config: SGD 0.025, Nesterov momentum 0.9, decay 5e-4)
AUTODL = SimpleNamespace(C=16, N=5, max_nodes=4, space="nas-bench-201", momentum=0.9,
                         weight_decay=5e-4, nesterov=True)


def _forget(names) -> None:
    for name in list(sys.modules):
        if name in names or name.split(".")[0] in names:
            del sys.modules[name]


def import_from(folder: str, names: list[str], argv: list[str] | None = None) -> list:
    """Import ``names`` from the checkout ``folder`` (first on sys.path, ``sys.argv`` set to
    ``argv`` where its modules parse options at import, their printing silenced), then forget
    the checkout's module names so that the next checkout's modules of the same names load."""
    folder = str(Path(folder).resolve())
    if not Path(folder).is_dir():
        raise SystemExit(f"nas_side_by_side: no folder {folder}")
    tops = set(SHARED_NAMES) | {n.split(".")[0] for n in names}
    _forget(tops)
    saved_argv = sys.argv
    sys.path.insert(0, folder)
    try:
        if argv is not None:
            sys.argv = argv
        with contextlib.redirect_stdout(io.StringIO()):
            return [importlib.import_module(n) for n in names]
    finally:
        sys.path.remove(folder)
        sys.argv = saved_argv
        _forget(tops)


def authors_step(model, architect, train, val):
    """Their train_search.py's step, first order: Architect.step, then the weight step."""
    w_opt = torch.optim.SGD(model.parameters(), W_LR, momentum=AUTHORS_ARGS.momentum,
                            weight_decay=AUTHORS_ARGS.weight_decay)
    criterion = model._criterion

    def step():
        architect.step(train[0], train[1], val[0], val[1], W_LR, w_opt, unrolled=False)
        w_opt.zero_grad()
        loss = criterion(model(train[0]), train[1])
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), GRAD_CLIP)
        w_opt.step()

    return step


def autodl_step(model, train, val):
    """Their DARTS-V1.py's step: the weights first (clip 5), then alpha (Adam)."""
    w_opt = torch.optim.SGD(model.get_weights(), W_LR, momentum=AUTODL.momentum,
                            weight_decay=AUTODL.weight_decay, nesterov=AUTODL.nesterov)
    a_opt = torch.optim.Adam(model.get_alphas(), lr=AUTHORS_ARGS.arch_learning_rate,
                             betas=(0.5, 0.999), weight_decay=AUTHORS_ARGS.arch_weight_decay)
    criterion = nn.CrossEntropyLoss()

    def step():
        w_opt.zero_grad()
        _, logits = model(train[0])
        criterion(logits, train[1]).backward()
        nn.utils.clip_grad_norm_(model.parameters(), GRAD_CLIP)
        w_opt.step()
        a_opt.zero_grad()
        _, logits = model(val[0])
        criterion(logits, val[1]).backward()
        a_opt.step()

    return step


def autodl_model(folder: str, classes: int):
    """AutoDL-Projects' NB-201 DARTS search network (``xautodl/`` layout, or ``lib/``)."""
    root = Path(folder)
    if (root / "xautodl").is_dir():
        names, where = ["xautodl.models.cell_searchs.search_model_darts",
                        "xautodl.models.cell_operations"], folder
    else:
        names, where = ["models.cell_searchs.search_model_darts",
                        "models.cell_operations"], str(root / "lib")
    search_model, operations = import_from(where, names)
    torch.manual_seed(0)
    return search_model.TinyNetworkDarts(AUTODL.C, AUTODL.N, AUTODL.max_nodes, classes,
                                         operations.SearchSpaceNames[AUTODL.space], False, True)


def authors_models(args, C: int, layers: int) -> dict:
    """{name: model} of the authors' search supernets, each built after torch.manual_seed(0)
    and moved to ``args.device`` (their ``model.cuda()`` on CUDA)."""
    classes = UPSTREAM["classes"]
    out = {}
    for name, folder in (("darts", args.darts_src), ("pc-darts", args.pc_darts_src)):
        if not folder:
            continue
        model_search, architect = import_from(folder, ["model_search", "architect"])
        torch.manual_seed(0)
        model = model_search.Network(C, classes, layers, nn.CrossEntropyLoss()).to(args.device)
        out[name] = (model, architect.Architect(model, AUTHORS_ARGS))
    if args.darts_minus_src:
        scratch = tempfile.mkdtemp(prefix="darts_minus_")  # its options module makes a folder
        argv = ["train_search", *(["--disable_cuda"] if args.device == "cpu" else []),
                "--auxiliary_skip", "--space", "s5", "--init_channels", str(C), "--layers",
                str(layers), "--save", scratch]
        model_search, architect, spaces, options = import_from(
            args.darts_minus_src, ["src.search.model_search", "src.search.architect",
                                   "src.spaces", "src.search.args"], argv)
        options.beta_decay_scheduler.decay_rate = BETA
        torch.manual_seed(0)
        model = model_search.Network(C, classes, layers, nn.CrossEntropyLoss(),
                                     spaces.spaces_dict["s5"], steps=4, args=options.args)
        model = model.to(args.device)
        out["darts-minus"] = (model, architect.Architect(model, AUTHORS_ARGS))
    return out


def build(args) -> tuple[dict, dict]:
    """({name: step}, {name: number of weight parameters}) of every supernet compared."""
    space = get_space("darts")
    C, layers = space.upstream["channels"], space.upstream["cells"]
    size, cin = UPSTREAM["size"], UPSTREAM["in_channels"]
    g = torch.Generator().manual_seed(1)
    train, val = [(torch.randn(args.batch, cin, size, size, generator=g).to(args.device),
                   torch.randint(0, UPSTREAM["classes"], (args.batch,), generator=g)
                   .to(args.device)) for _ in range(2)]
    steps, counts = {}, {}
    for name, (model, architect) in authors_models(args, C, layers).items():
        steps[f"authors {name}"] = authors_step(model, architect, train, val)
        counts[f"authors {name}"] = sum(p.numel() for p in model.parameters())
    if args.autodl_src:
        model = autodl_model(args.autodl_src, UPSTREAM["classes"]).to(args.device)
        steps["authors nb201-darts"] = autodl_step(model, train, val)
        counts["authors nb201-darts"] = sum(p.numel() for p in model.get_weights())
    methods = ["darts", "pc-darts", "darts-minus", "rdarts-dp"]
    if not args.darts_minus_src:
        methods.remove("darts-minus")
    if not any((args.darts_src, args.pc_darts_src, args.darts_minus_src)):
        methods = []  # AutoDL's NB-201 row only
    for m in methods:
        net, step = setup("darts", m, True, args.device, sizes={"batch": args.batch})
        steps[f"genlab {m}"] = step
        counts[f"genlab {m}"] = sum(p.numel() for p in net.weight_parameters())
    if args.autodl_src:
        net, step = setup("nb201", "darts", True, args.device, sizes={"batch": args.batch})
        steps["genlab nb201-darts"] = step
        counts["genlab nb201-darts"] = sum(p.numel() for p in net.weight_parameters())
    return steps, counts


def timed(step, device: str = "cpu") -> tuple[float, float]:
    """(wall, process CPU) seconds of one step (on CUDA: synchronised before and after)."""
    cuda = device.startswith("cuda")
    if cuda:
        torch.cuda.synchronize()
    t0, c0 = time.perf_counter(), time.process_time()
    step()
    if cuda:
        torch.cuda.synchronize()
    return time.perf_counter() - t0, time.process_time() - c0


def profile(step, rows: int, device: str = "cpu") -> str:
    """torch.profiler's operator table (self CPU time; on CUDA self CUDA time) of one step."""
    activities = [torch.profiler.ProfilerActivity.CPU]
    if device.startswith("cuda"):
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=activities) as prof:
        step()
        if device.startswith("cuda"):
            torch.cuda.synchronize()
    key = "self_cuda_time_total" if device.startswith("cuda") else "self_cpu_time_total"
    return prof.key_averages().table(sort_by=key, row_limit=rows)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--darts-src", default=None, help="quark0/darts' cnn folder")
    p.add_argument("--pc-darts-src", default=None, help="the PC-DARTS checkout")
    p.add_argument("--darts-minus-src", default=None, help="the DARTS- checkout (optional)")
    p.add_argument("--autodl-src", default=None,
                   help="the AutoDL-Projects checkout: NB-201's DARTS-V1 (optional)")
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"),
                   help="where every supernet runs (cuda: the checkouts unedited)")
    p.add_argument("--batch", type=int, default=None,
                   help="batch of each step (default: 32 on cpu, 64, upstream, on cuda)")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--profile", action="store_true",
                   help="after timing, profile one step of genlab's method of each missed goal")
    p.add_argument("--out", type=Path, default=None, help="write the figures as JSON")
    args = p.parse_args(argv)
    if args.batch is None:
        args.batch = 64 if args.device == "cuda" else 32
    if args.batch < 1 or args.rounds < 1 or args.threads < 1:
        p.error("--batch, --rounds and --threads must be positive")
    if not any((args.darts_src, args.pc_darts_src, args.darts_minus_src, args.autodl_src)):
        p.error("give at least one checkout (--darts-src, --pc-darts-src, --darts-minus-src, "
                "--autodl-src)")
    if args.device == "cuda" and not torch.cuda.is_available():
        p.error(f"--device cuda: torch {torch.__version__} sees no CUDA device")
    torch.set_num_threads(args.threads)
    steps, counts = build(args)
    for step in steps.values():  # warm-up round
        step()
    seconds = {name: [] for name in steps}
    cpu = {name: [] for name in steps}
    for r in range(args.rounds):
        for name, step in steps.items():
            wall, c = timed(step, args.device)
            seconds[name].append(wall)
            cpu[name].append(c)
        print(f"round {r + 1}/{args.rounds}: " + ", ".join(
            f"{name} {1000 * s[-1]:.0f} ms" for name, s in seconds.items()), file=sys.stderr,
            flush=True)
    median = {name: statistics.median(v) for name, v in seconds.items()}
    cpu_median = {name: statistics.median(v) for name, v in cpu.items()}

    where = torch.cuda.get_device_name() if args.device == "cuda" else \
        f"{args.threads} thread(s)"
    print(f"DARTS space, C16, 8 cells (NB201: C16, 5 cells per stage), 32x32, batch "
          f"{args.batch}, fp32, {args.device} ({where}), torch {torch.__version__}; ms per "
          f"first-order step, median of {args.rounds} interleaved rounds: wall (each round's), "
          "CPU")
    for name in steps:
        all_ms = ", ".join(f"{1000 * s:.0f}" for s in seconds[name])
        print(f"  {name:22s} wall {1000 * median[name]:9.1f} ms ({all_ms})  "
              f"CPU {1000 * cpu_median[name]:9.1f} ms")
    print("ratios (wall; CPU):")
    ratios, cpu_ratios, missed = {}, {}, []
    for row, num, den, goals in RATIOS:
        if num not in median or den not in median:
            continue
        goal = goals.get(args.device)
        r = median[num] / median[den]
        ratios[row] = r
        cpu_ratios[row] = cpu_median[num] / cpu_median[den]
        verdict = "" if goal is None else f"   goal <= {goal}: {'met' if r <= goal else 'MISSED'}"
        if goal is not None and r > goal:
            missed.append(num)
        print(f"  {row:36s} {r:5.2f}; {cpu_ratios[row]:5.2f}{verdict}")
    print("weight parameters (authors / genlab):")
    for theirs, ours in PAIRS.items():
        if theirs in counts:
            same = "equal" if counts[theirs] == counts[ours] else "DIFFER"
            note = f": {COUNT_NOTES[theirs]}" if same == "DIFFER" and theirs in COUNT_NOTES \
                else ""
            print(f"  {theirs[8:]:12s} {counts[theirs]:9d} / {counts[ours]:9d}  {same}{note}")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({
            "batch": args.batch, "threads": args.threads, "rounds": args.rounds,
            "device": args.device, "device_name": where,
            "torch": torch.__version__, "seconds": seconds, "median": median,
            "cpu_seconds": cpu, "cpu_median": cpu_median, "ratios": ratios,
            "cpu_ratios": cpu_ratios, "weight_parameters": counts}, indent=1))
    if args.profile:
        for name in dict.fromkeys(missed):
            print(f"\nprofile of one step of {name}:")
            print(profile(steps[name], 25, args.device))


if __name__ == "__main__":
    main()
