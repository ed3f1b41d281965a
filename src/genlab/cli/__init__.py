"""The ``genlab`` command: thin typer apps over the library; errors become one line, exit 2."""

from __future__ import annotations

import os
import signal
import sys
import threading

import typer
from typer._click import exceptions as click_errors  # typer >= 0.26 carries its own click

from genlab.core.errors import GenlabError

app = typer.Typer(
    name="genlab",
    help="BER architecture search, nonuniformity measures/optimisers and MoEGaze.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # plain click help: wraps at any width, prints [brackets]
    add_completion=False,
    context_settings={"max_content_width": 120},  # the terminal's width up to this
)


@app.callback()
def _options(
    tensorboard: bool = typer.Option(
        False, "--tensorboard",
        help="Also write every run's metrics as TensorBoard events in RUN/tensorboard "
             "(needs: pip install 'genlab[tensorboard]')."),
) -> None:
    """Options for every command, given before it: genlab --tensorboard nas train ..."""
    if tensorboard:
        os.environ["GENLAB_TENSORBOARD"] = "1"


def _register() -> None:
    """Add the sub-apps once (``main`` may run many times in one process, as in the tests)."""
    if app.registered_groups:
        return
    from genlab.cli import demo, gaze, nas, optim
    from genlab.cli.commands import config_command

    app.add_typer(nas.app, name="nas",
                  help="Differentiable architecture search (BER, DARTS, beta-DARTS).")
    app.add_typer(optim.app, name="optim",
                  help="Nonuniformity measures and optimisers (SAM, COV, CSAM...).")
    app.add_typer(gaze.app, name="gaze",
                  help="MoEGaze: appearance-routed experts for gaze estimation.")
    config_command(app, "demo", demo.DemoConfig, demo.demo, run_folder=False,
                   short_help="Every method on embedded data, one report.")


def _terminated(signum, frame) -> None:
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the app, turning GenlabError into one line on stderr and exit code 2."""
    from genlab.cli.commands import CommandInterrupted

    _register()
    # SIGTERM ends the command as an exception would: locks, temporary files and the
    # superseded checkpoint are cleaned up on the way out (SIGKILL cannot be; see locks).
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _terminated)
    if os.environ.get("RANK", "0") != "0":  # under torchrun: rank 0 speaks for the group
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - for the life of the process
    try:
        code = app(args=argv, standalone_mode=False)
    except click_errors.NoArgsIsHelpError as exc:  # `genlab nas`: its help
        exc.show()
        sys.exit(exc.exit_code)
    except click_errors.UsageError as exc:  # an option click itself refuses: the same one line
        where = f"; see {exc.ctx.command_path} --help" if exc.ctx is not None else ""
        message = option_spelling(exc.format_message().rstrip("."),
                                  sys.argv[1:] if argv is None else argv)
        print(f"genlab: bad option: {message}{where}", file=sys.stderr)
        sys.exit(2)
    except CommandInterrupted as exc:  # Ctrl-C in a run: where it stopped, how to go on
        print(f"genlab: {exc.line}", file=sys.stderr)
        sys.exit(130)
    except typer.Abort:
        print("genlab: aborted", file=sys.stderr)
        sys.exit(1)
    except GenlabError as exc:
        message = option_spelling(str(exc), sys.argv[1:] if argv is None else argv)
        print(f"genlab: {exc.kind}: {message}", file=sys.stderr)
        sys.exit(2)
    sys.exit(code if isinstance(code, int) else 0)  # as click's standalone mode ends


def option_spelling(message: str, argv: list[str]) -> str:
    """Spell the invoked command's options as on its command line: the library names a
    field ``batch_size`` (or ``batch-size``), the line printed to the user ``--batch-size``."""
    import re

    _register()
    command = typer.main.get_command(app)
    for token in argv:  # walk down the groups to the command that ran
        if not hasattr(command, "get_command"):
            break
        sub = command.get_command(None, token)
        if sub is None:
            continue
        command = sub
    for param in getattr(command, "params", ()):
        flags = [o for o in getattr(param, "opts", ()) if o.startswith("--")]
        if not flags or not param.name:
            continue
        words = re.escape(param.name).replace("_", "[_-]")
        if "_" in param.name:  # a field name is the option wherever it stands
            message = re.sub(rf"(?<![\w-]){words}(?![\w-])", flags[0], message)
        else:  # one plain word only where it names the option: "unknown arch", "seed must",
            # "out is required"
            message = re.sub(rf"(?<![\w-])(?:(?<=unknown ){words}|{words}(?= must\b| is "
                             rf"required\b|:))"
                             rf"(?![\w-])", flags[0], message)
    return message
