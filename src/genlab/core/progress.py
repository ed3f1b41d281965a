"""Progress bars for long work (rich), silent when disabled or when not on a terminal."""

from __future__ import annotations

import contextlib
import os
import sys

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from genlab.core.errors import Interrupted
from genlab.core.parallel.distributed import is_main_process

console = Console(stderr=True)


def progress_enabled(requested: bool | None = None) -> bool:
    """Show bars when asked, or by default when stderr is a terminal and GENLAB_QUIET is unset.

    Under torchrun only rank 0 shows bars.
    """
    if not is_main_process():
        return False
    if requested is not None:
        return requested
    return sys.stderr.isatty() and not os.environ.get("GENLAB_QUIET")


@contextlib.contextmanager
def progress(total: int, description: str, enabled: bool | None = None, completed: int = 0,
             unit: str | None = None):
    """Yield ``tick(n=1, **fields)``; fields (e.g. loss=0.3) are shown beside the bar.

    ``unit`` (a run's loop: "step", "epoch"): a resumed loop (``completed`` > 0) says where it
    continues ("genlab: resuming at step 30 of 900", on stderr, rank 0), and Ctrl-C inside
    it becomes :class:`genlab.core.errors.Interrupted`, naming the units done."""
    done = [completed]
    if unit is not None and completed and is_main_process():
        print(f"genlab: resuming at {unit} {completed} of {total}", file=sys.stderr)
    try:
        with _bar(total, description, enabled, completed) as update:
            def tick(n: int = 1, **fields):
                done[0] += n
                update(n, **fields)

            yield tick
    except KeyboardInterrupt as exc:
        if unit is None or isinstance(exc, Interrupted):
            raise
        raise Interrupted(done[0], total, unit) from exc


@contextlib.contextmanager
def _bar(total: int, description: str, enabled: bool | None, completed: int):
    if not progress_enabled(enabled):
        yield lambda n=1, **fields: None
        return
    bar = Progress(
        TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
        TimeRemainingColumn(), TextColumn("{task.fields[info]}"), console=console,
        transient=False,
    )
    with bar:
        task = bar.add_task(description, total=total, completed=completed, info="")

        def update(n: int = 1, **fields):
            info = " ".join(
                f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in fields.items()
            )
            bar.update(task, advance=n, info=info)

        yield update
