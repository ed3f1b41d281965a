"""`genlab nas ...`: search, train, lookup, bench, score, fidelity, detect, spaces, methods,
table convert, and a command per study of genlab.nas.studies. Thin wrappers over genlab.nas;
every option is declared by the command's config (docs/cli.md)."""

from __future__ import annotations

from pathlib import Path

import typer

from genlab.cli import options
from genlab.cli.commands import config_command
from genlab.cli.nas_detect import detect
from genlab.cli.nas_table import table_app
from genlab.cli.studies import studies_app

app = studies_app("genlab.nas.studies", no_args_is_help=True, rich_markup_mode=None)
app.add_typer(table_app, name="table", help="The NB201 accuracy table: convert the official "
                                            "benchmark files to genlab's CSV.")

BENCH_RESUME_HELP = ("Continue a stopped bench in --out (same options): finished searches and "
                     "retrainings are reused, unfinished ones resumed.")


def _search(cfg, out: Path, resume: bool) -> None:
    """Search an architecture by bilevel optimisation with the chosen regulariser."""
    from dataclasses import asdict

    from genlab.nas.regularizers import BER, describe_setting
    from genlab.nas.search import plan_search, run_search

    plan = plan_search(cfg)  # checked and resolved once, before --out
    s = run_search(plan, out, resume=resume)
    if plan.cfg.reg == BER:  # after the run: an error stays the one line it is
        typer.echo(f"--reg ber stands for {describe_setting(asdict(plan.reg))}")
    stopped = "" if s.get("stopped_epoch") is None else \
        f"   (stopped at epoch {s['stopped_epoch']})"
    typer.echo(f"method          {s['method']}   select {s['select']}{stopped}")
    typer.echo(f"genotype        {s['genotype']}")
    hess = "-" if s["hessian_eig"] is None else f"{s['hessian_eig']:.4g}"
    typer.echo(f"param-free ops  {s['param_free_ops']}   skip ops {s['skip_ops']}   mean entropy "
               f"{s['mean_entropy']:.3f}   Hessian eig {hess}   {s['search_seconds']:.0f} s")
    batch = f", {s['diag_images']} images" if "diag_images" in s else ""
    typer.echo(f"supernet val acc {s['supernet_val_acc']:.2f}%  (the diagnostic val "
               f"batch{batch})")
    if "nb201" in s:
        n = s["nb201"]
        accs = f"{n['cifar10']:.2f}% / {n['cifar100']:.2f}% / {n['imagenet16']:.2f}%"
        typer.echo(f"NB201 test acc  {accs}  (CIFAR-10 / CIFAR-100 / ImageNet16-120)")
    options.closing(out)


config_command(app, "search", "genlab.nas.search:SearchConfig", _search)


def _train(cfg, out: Path, resume: bool) -> None:
    """Retrain an architecture from scratch with its space's recipe; test accuracy, params
    (--dataset imagenet: the ImageNet recipe on image folders; top-1/top-5)."""
    from genlab.nas.retrain import retrain
    from genlab.nas.train_config import IMAGENET

    if cfg.dataset == IMAGENET:
        _train_imagenet(cfg.imagenet_config(), out, resume)
        return
    s = retrain(cfg.retrain_config(), out, resume=resume)
    typer.echo(f"test accuracy {s['test_acc']:.2f}%   parameters {s['params']:,}")
    options.closing(out)


config_command(app, "train", "genlab.nas.train_config:NasTrainConfig", _train)
config_command(app, "predict", "genlab.prediction:NasPredictConfig", options.print_predictions,
               run_folder=False)


def _train_imagenet(cfg, out: Path, resume: bool) -> None:
    """`nas train --dataset imagenet` (genlab.nas.transfer.classify.imagenet)."""
    from genlab.nas.transfer.classify.imagenet import train_imagenet

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


def _bench(cfg, out: Path, resume: bool) -> None:
    """Search and retrain every method (or regulariser) x seed; write bench.md, bench.json and
    bench.png."""
    from genlab.nas.bench import run_bench

    run_bench(cfg.bench(), out, resume=resume, executor=cfg.executor, workers=cfg.workers,
              address=cfg.address)
    typer.echo((Path(out) / "bench.md").read_text())
    options.closing(out)


config_command(app, "bench", "genlab.nas.bench:BenchCommandConfig", _bench,
               resume_help=BENCH_RESUME_HELP)


def _score(cfg, out: Path, resume: bool) -> None:
    """Score NB201 cells with zero-cost proxies (params, synflow, NWOT, snip, ZiCo); with the
    NB201 table, their Kendall tau against it (scores.csv, scores.md)."""
    from genlab.nas.fidelity.score import run_score

    result = run_score(cfg, out, resume=resume)
    if "taus" in result:
        typer.echo((Path(out) / "scores.md").read_text())
    typer.echo(f"{result['cells']} cells scored ({result['cpu_hours']:.2f} CPU-hours): "
               f"{Path(out) / 'scores.csv'}")
    options.closing(out)


config_command(app, "score", "genlab.nas.fidelity.score:ScoreConfig", _score)


def _fidelity(cfg, out: Path, resume: bool) -> None:
    """Retrain a seeded draw of NB201 cells on a proxy and report how well it ranks them
    against the NB201 table (cells.csv, fidelity.md, fidelity.png; docs/nas_proxy.md)."""
    from genlab.nas.fidelity.train import run_fidelity

    result = run_fidelity(cfg, out, resume=resume)
    if (Path(out) / "fidelity.md").exists():
        typer.echo((Path(out) / "fidelity.md").read_text())
    typer.echo(f"{result['trainings']} of {result['planned']} trainings in "
               f"{Path(out) / 'cells.csv'}" + (f"; {result['failed']} failed, first: "
                                               f"{result['first_failure']}"
                                               if result["failed"] else ""))
    options.closing(out)


config_command(app, "fidelity", "genlab.nas.fidelity.train:FidelityConfig", _fidelity)


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
    """List the search methods: their parts, the authors' code they follow and the settings
    `nas bench --tune` tries."""
    from genlab.nas.bench.tuning import setting_text
    from genlab.nas.methods import get_method, method_names

    for name in method_names():
        m = get_method(name)
        parts = [f"relaxation {m.relaxation}", f"reg {m.reg}"]
        parts += [f"perturb {m.perturb}"] * (m.perturb != "none")
        parts += [f"stop {m.stop}"] * (m.stop != "none")
        parts += [f"{k.replace('_', '-')} {v}" for k, v in m.supernet.items()]
        parts += [f"order {'/'.join(map(str, m.orders))}"]
        typer.echo(f"{name:<12} {m.summary}")
        typer.echo(f"{'':<12} parts: {', '.join(parts)}")
        typer.echo(f"{'':<12} source: {m.source}" + (f"; ours: {m.ours}" if m.ours else ""))
        typer.echo(f"{'':<12} tuning: {' | '.join(setting_text(s) for s in m.tuning)}")


config_command(app, "detect", "genlab.nas.transfer.detection.detect:DetectConfig", detect)
