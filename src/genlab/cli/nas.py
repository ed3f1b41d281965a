"""`genlab nas ...`: search, train, lookup, bench, spaces. Thin wrappers over genlab.nas."""

from __future__ import annotations

from pathlib import Path

import typer

from genlab.cli import options
from genlab.cli.commands import config_command, lazy_app
from genlab.cli.nas_table import OFFICIAL_TABLES, table_app
from genlab.nas.search_config import SearchConfig

app = lazy_app(no_args_is_help=True, rich_markup_mode=None)
app.add_typer(table_app, name="table", help="The NB201 accuracy table: convert the official "
                                            "benchmark files to genlab's CSV.")


def _space_help() -> str:
    from genlab.nas.spaces import space_names

    return f"Search space: {' | '.join(space_names())} (docs/nas_spaces.md; genlab nas spaces)."


def _dataset_help() -> str:
    from genlab.nas.data import DATASETS

    return "; ".join(f"{name}: {entry.description}" + (" (needs --data-root)"
                                                       if entry.needs_root else "")
                     for name, entry in DATASETS.items()) + "."


def _reg_help() -> str:
    from genlab.nas.regularizers import regularizer_help

    return regularizer_help()


def _regs_help() -> str:
    from genlab.nas.regularizers import PENALTIES

    return f"Comma-separated regularisers, of: {', '.join(PENALTIES.choices())}."


def _method_help() -> str:
    from genlab.nas.methods import method_names

    return (f"Search method, its authors' preset: {' | '.join(method_names())} (genlab nas "
            "methods; docs/nas_methods.md); default: DARTS with --reg ber.")


def _part_help(kind: str, what: str):
    def text() -> str:
        from genlab.nas.methods import part_names

        return f"{what}: {' | '.join(part_names()[kind])} (default: the method's)."
    return text


# option -> its help text, made from the registries when help is shown: they import torch,
# which the CLI does not import at start-up
REGISTRY_HELP = {"space": _space_help, "dataset": _dataset_help, "reg": _reg_help,
                 "regs": _regs_help, "method": _method_help,
                 "relaxation": _part_help("relaxation", "Mixing weights from alpha"),
                 "perturb": _part_help("perturb", "Perturbation of the weight step's mixing"),
                 "stop": _part_help("stop", "Stopping rule")}


RegistryHelp = options.registry_help_command(REGISTRY_HELP)


TABLE_HELP = ("NB201 accuracy CSV (default: $GENLAB_NB201_TABLE); judges the result, never "
              f"selects; {OFFICIAL_TABLES}.")
BENCH_RESUME_HELP = ("Continue a stopped bench in --out (same options): finished searches and "
                     "retrainings are reused, unfinished ones resumed.")
PROXY = "default: the space's digits proxy"
SQUARE = "the networks take squares: N or NxN"
AMP_HELP = ("off | bf16 | fp16: autocast of forward and loss; fp16 adds a GradScaler (its "
            "state in the checkpoint).")
IMAGENET = "--dataset imagenet:"
IMAGENET_LAYOUT = "ROOT/train/CLASS/*.JPEG and ROOT/val/CLASS/*.JPEG"
REGISTRY = "(from the registry)"  # placeholder until RegistryHelp fills it in


def _search(cfg, out: Path, resume: bool) -> None:
    """Search an architecture by bilevel optimisation with the chosen regulariser."""
    from dataclasses import asdict

    from genlab.nas.regularizers import BER, describe_setting
    from genlab.nas.search import plan_search, run_search

    plan = plan_search(cfg)  # checked and resolved once, before the line below and --out
    if plan.cfg.reg == BER:
        typer.echo(f"--reg ber stands for {describe_setting(asdict(plan.reg))}")
    s = run_search(plan, out, resume=resume)
    stopped = "" if s.get("stopped_epoch") is None else \
        f"   (stopped at epoch {s['stopped_epoch']})"
    typer.echo(f"method          {s['method']}   select {s['select']}{stopped}")
    typer.echo(f"genotype        {s['genotype']}")
    hess = "-" if s["hessian_eig"] is None else f"{s['hessian_eig']:.4g}"
    typer.echo(f"param-free ops  {s['param_free_ops']}   skip ops {s['skip_ops']}   mean entropy "
               f"{s['mean_entropy']:.3f}   Hessian eig {hess}   {s['search_seconds']:.0f} s")
    typer.echo(f"supernet val acc {s['supernet_val_acc']:.2f}%  (the diagnostic val batch)")
    if "nb201" in s:
        n = s["nb201"]
        accs = f"{n['cifar10']:.2f}% / {n['cifar100']:.2f}% / {n['imagenet16']:.2f}%"
        typer.echo(f"NB201 test acc  {accs}  (CIFAR-10 / CIFAR-100 / ImageNet16-120)")
    options.closing(out)


config_command(app, "search", SearchConfig, _search)


@app.command(cls=RegistryHelp)
def train(
    arch: str = typer.Argument(..., help="Genotype text of the space (NB201 string, DARTS "
                                         "Genotype(...), MobileNet choices)."),
    out: Path = typer.Option(..., help="Run folder."),
    space: str = typer.Option("nb201", help=REGISTRY),
    dataset: str = typer.Option("digits", help=REGISTRY),
    data_root: Path = typer.Option(None, help="Folder with the data set's files (not for digits;"
                                              f" --dataset imagenet: {IMAGENET_LAYOUT})."),
    size: str = options.size_option(None, f"{SQUARE}; default: the search proxy's"),
    channels: int = typer.Option(None, "--channels", "-C", help="Width (default: the recipe's)."),
    cells: int = typer.Option(None, "--cells", "-N", help="Depth (default: the recipe's)."),
    epochs: int = typer.Option(None, help="Epochs (default: the recipe's)."),
    batch_size: int = typer.Option(None, help="Global batch (default 64; ImageNet: the "
                                              "recipe's, DARTS 1024, MobileNet 256)."),
    lr: float = typer.Option(None, help="SGD lr, cosine to 0 (DARTS recipe: 0.025; ImageNet: "
                                        "DARTS 0.5, MobileNet 0.05)."),
    weight_decay: float = typer.Option(None, help="(DARTS recipe: 3e-4; ImageNet: 3e-5, "
                                                  "MobileNet 4e-5)."),
    grad_clip: float = typer.Option(None, help="Gradient-norm clip, 0 = off (DARTS: 5)."),
    aux_weight: float = typer.Option(None, help="Auxiliary-head loss weight, 0 = no head "
                                                "(DARTS: 0.4)."),
    drop_path: float = typer.Option(None, help="Final drop-path probability, ramped from 0 "
                                               "(DARTS: 0.2; ImageNet: 0)."),
    cutout: bool = typer.Option(None, "--cutout/--no-cutout",
                                help="Cutout of half the image side (DARTS: on)."),
    augment: bool = typer.Option(True, help="Augment training batches (digits)."),
    seed: int = typer.Option(0, help="The training's seed (data split, init, batches)."),
    device: str = options.device_option(),
    threads: int = options.threads_option(),
    amp: str = typer.Option("off", help=AMP_HELP),
    channels_last: bool = typer.Option(False, help="NHWC layout of model and inputs."),
    image_size: int = typer.Option(None, help=f"{IMAGENET} Crop size (224); evaluation "
                                              "resizes to 256/224 of it."),
    workers: int = typer.Option(None, help=f"{IMAGENET} DataLoader workers per process (8)."),
    momentum: float = typer.Option(None, help=f"{IMAGENET} SGD momentum (0.9)."),
    nesterov: bool = typer.Option(None, "--nesterov/--no-nesterov",
                                  help=f"{IMAGENET} (DARTS off, MobileNet on)."),
    bn_weight_decay: bool = typer.Option(None, "--bn-weight-decay/--no-bn-weight-decay",
                                         help=f"{IMAGENET} Decay BatchNorm weights and biases "
                                              "(DARTS on, MobileNet off)."),
    schedule: str = typer.Option(None, help=f"{IMAGENET} linear | cosine (DARTS linear, "
                                            "MobileNet cosine)."),
    warmup_epochs: int = typer.Option(None, help=f"{IMAGENET} Linear warm-up epochs (DARTS 5, "
                                                 "MobileNet 0)."),
    label_smoothing: float = typer.Option(None, help=f"{IMAGENET} In training (0.1)."),
    checkpoint_steps: int = typer.Option(None, help=f"{IMAGENET} Also checkpoint every N steps "
                                                    "(a resume continues mid-epoch)."),
    max_steps: int = typer.Option(None, help=f"{IMAGENET} Stop after N optimiser steps, score "
                                             "at most N val batches (smoke runs)."),
    resume: bool = options.resume_option(),
):
    """Retrain an architecture from scratch with its space's recipe; test accuracy, params
    (--dataset imagenet: the ImageNet recipe on image folders; top-1/top-5)."""
    imagenet = {"image_size": image_size, "workers": workers, "momentum": momentum,
                "nesterov": nesterov, "bn_weight_decay": bn_weight_decay, "schedule": schedule,
                "warmup_epochs": warmup_epochs, "label_smoothing": label_smoothing,
                "checkpoint_steps": checkpoint_steps, "max_steps": max_steps}
    if dataset == "imagenet":
        _train_imagenet(arch, out, imagenet, size=size, cutout=cutout, space=space,
                        data_root=_s(data_root), channels=channels, cells=cells, epochs=epochs,
                        batch_size=batch_size, lr=lr, weight_decay=weight_decay,
                        grad_clip=grad_clip, auxiliary_weight=aux_weight, drop_path=drop_path,
                        seed=seed, device=device, threads=threads, amp=amp,
                        channels_last=channels_last, resume=resume)
        return
    from genlab.core.errors import ConfigError
    from genlab.nas.retrain import RetrainConfig, retrain

    given = [k for k, v in imagenet.items() if v is not None]
    if given:
        raise ConfigError(f"--{given[0].replace('_', '-')} is an option of --dataset imagenet")
    cfg = RetrainConfig(arch=arch, space=space, dataset=dataset, data_root=_s(data_root),
                        size=_size(size), channels=channels, cells=cells, epochs=epochs,
                        batch_size=64 if batch_size is None else batch_size, lr=lr,
                        weight_decay=weight_decay,
                        grad_clip=grad_clip, auxiliary_weight=aux_weight, drop_path=drop_path,
                        cutout=cutout, augment=augment, seed=seed, device=device,
                        threads=threads, amp=amp, channels_last=channels_last)
    s = retrain(cfg, out, resume=resume)
    typer.echo(f"test accuracy {s['test_acc']:.2f}%   parameters {s['params']:,}")
    options.closing(out)


def _train_imagenet(arch: str, out: Path, imagenet: dict, *, size, cutout, resume: bool,
                    **common) -> None:
    """`nas train --dataset imagenet` (genlab.nas.transfer.classify.imagenet)."""
    from genlab.core.errors import ConfigError
    from genlab.nas.transfer.classify.imagenet import ImageNetTrainConfig, train_imagenet

    for flag, value in (("--size", size), ("--cutout", cutout)):
        if value is not None:
            raise ConfigError(f"{flag} is not an option of --dataset imagenet (crop size: "
                              "--image-size)")
    if imagenet["workers"] is None:
        imagenet["workers"] = ImageNetTrainConfig.workers
    cfg = ImageNetTrainConfig(arch=arch, **common, **imagenet)
    s = train_imagenet(cfg, out, resume=resume, report=typer.echo)
    top5 = "top-5" if s["top5_k"] == 5 else f"top-{s['top5_k']} (k = min(5, classes))"
    typer.echo(f"val top-1 {s['top1']:.2f}%   {top5} {s['top5']:.2f}%   parameters "
               f"{s['params']:,} at inference, {s['params_trained']:,} trained   "
               f"{s['macs'] / 1e6:,.1f}M multiply-adds")
    options.closing(out)


def _lookup(cfg) -> None:
    """Print the NB201 test accuracies (CIFAR-10 / CIFAR-100 / ImageNet16-120) of a cell."""
    from genlab.core.errors import ConfigError
    from genlab.nas.search import resolve_table

    table = resolve_table(cfg.nb201_table)
    if table is None:
        raise ConfigError("no NB201 table: pass --nb201-table PATH or set GENLAB_NB201_TABLE")
    acc = table.lookup(cfg.arch)
    typer.echo(f"{acc['cifar10']:.2f}% / {acc['cifar100']:.2f}% / {acc['imagenet16']:.2f}%  "
               "(CIFAR-10 / CIFAR-100 / ImageNet16-120)")


config_command(app, "lookup", "genlab.nas.spaces.nb201.table:LookupConfig", _lookup,
               run_folder=False)


def _bench_resume_option() -> bool:
    """options.resume_option (a flag, no --no-resume) with what a bench's resume reuses."""
    option = options.resume_option()
    option.help = BENCH_RESUME_HELP
    return option


# genlab.nas.bench.DEFAULT_REGS, spelt out so that the CLI starts without importing torch
BENCH_REGS = "none,beta,ber,ber-kl,ber-op,ber-lbe,ber-ib"


@app.command(cls=RegistryHelp)
def bench(
    out: Path = typer.Option(..., help="Bench folder (sub-runs inside; --resume continues)."),
    space: str = typer.Option("nb201", help=REGISTRY),
    regs: str = typer.Option(BENCH_REGS, help=REGISTRY),
    methods: str = typer.Option(None, help="Comma-separated rows instead of --regs: methods "
                                           "(genlab nas methods) at their presets, regularisers "
                                           "(on DARTS) or METHOD+REG."),
    select: str = typer.Option("argmax", help="Selection rule of every row: argmax | pt."),
    seeds: str = options.seeds_option("0-2", "One search (and retraining) per seed and "
                                               "row."),
    steps: int = typer.Option(None, help=f"Search steps ({PROXY})."),
    channels: int = typer.Option(None, "--channels", "-C", help=f"Supernet width ({PROXY})."),
    cells: int = typer.Option(None, "--cells", "-N", help=f"Supernet depth ({PROXY})."),
    order: int = typer.Option(1, help="1 or 2 (second-order search)."),
    augment: bool = typer.Option(True, help="Augment the searches' train and val batches "
                                            "(the digits proxy; off: DARTS' own setting)."),
    retrain_epochs: int = typer.Option(30, help="0 skips retraining."),
    random_archs: bool = typer.Option(True, help="Sanity rows: a random architecture of the "
                                                 "space per seed, retrained."),
    device: str = options.device_option(),
    threads: int = options.threads_option(),
    nb201_table: Path = typer.Option(None, help=TABLE_HELP),
    executor: str = typer.Option("local", help="local (this machine: in this process with "
                                 "one worker, else a process pool) | inline | ray."),
    workers: int = typer.Option(1, help="Jobs (search + retraining) run at the same time."),
    address: str = typer.Option(None, help="HOST:PORT of a Ray cluster (--executor ray; "
                                "default a local Ray instance)."),
    resume: bool = _bench_resume_option(),
):
    """Search and retrain every method (or regulariser) x seed; write bench.md, bench.json and
    bench.png."""
    from genlab.nas.bench import BenchConfig, run_bench
    from genlab.nas.search import SearchConfig

    cfg = BenchConfig(regs=options.parse_list(regs, str, "--regs"),
                      methods=None if methods is None else options.parse_list(methods, str,
                                                                              "--methods"),
                      seeds=options.parse_seeds(seeds),
                      search=SearchConfig(space=space, steps=steps, channels=channels,
                                          cells=cells, order=order, device=device,
                                          threads=threads, nb201_table=_s(nb201_table),
                                          select=select, augment=augment),
                      retrain_epochs=retrain_epochs, random_archs=random_archs)
    run_bench(cfg, out, resume=resume, executor=executor, workers=workers, address=address)
    typer.echo((Path(out) / "bench.md").read_text())
    options.closing(out)


@app.command()
def spaces():
    """List the registered search spaces: alphas, digits-proxy defaults, description."""
    from genlab.nas.spaces import get_space, space_names

    rows = []
    for name in space_names():
        sp = get_space(name)
        p = sp.proxy
        rows.append((name,
                     ", ".join(f"{a} {s.shape[0]}x{s.shape[1]}"
                               for a, s in sp.alpha_specs().items()),
                     f"{p.size}x{p.size}, C={p.channels}"
                     + ("" if p.cells is None else f", cells={p.cells}"),
                     f"{p.steps} steps", sp.description))
    header = ("space", "alphas", "proxy", "budget", "description")
    widths = [max(len(r[k]) for r in (header, *rows)) for k in range(len(header) - 1)]
    for row in (header, *rows):
        typer.echo("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=False))
                   + "  " + row[-1])


@app.command()
def methods():
    """List the search methods: their parts and the authors' code they follow."""
    from genlab.nas.methods import get_method, method_names

    for name in method_names():
        m = get_method(name)
        parts = [f"relaxation {m.relaxation}", f"reg {m.reg}"]
        parts += [f"perturb {m.perturb}"] * (m.perturb != "none")
        parts += [f"stop {m.stop}"] * (m.stop != "none")
        parts += [f"{k.replace('_', '-')} {v}" for k, v in m.supernet.items()]
        parts += [f"arch-start {m.arch_start}"] * bool(m.arch_start)
        parts += [f"order {'/'.join(map(str, m.orders))}"]
        typer.echo(f"{name:<12} {m.summary}")
        typer.echo(f"{'':<12} parts: {', '.join(parts)}")
        typer.echo(f"{'':<12} source: {m.source}" + (f"; ours: {m.ours}" if m.ours else ""))


def _s(path) -> str | None:
    return None if path is None else str(path)


def _size(text: str | None) -> int | None:
    """--size N or NxN (the NAS networks take square inputs); None: the space's default. Too
    small a size for the network is refused later, with the smallest that works."""
    return None if text is None else options.parse_size(text, square=True)[0]


from genlab.cli.nas_detect import detect  # noqa: E402 - `genlab nas detect`

app.command()(detect)
