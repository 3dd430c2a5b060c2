"""Command-line entry point. Exceptions become exit codes here and nowhere else."""

from __future__ import annotations

import functools
import importlib
import os
import sys
from collections.abc import Sequence
from typing import Any

import typer
from rich.text import Text

from netqual.base.errors import EXIT_RUNTIME, EXIT_USAGE, NetqualError, RunStopped
from netqual.cli.app import app, err_console
from netqual.cli.helpstyle import polish
from netqual.files.outfiles import forget_checked

# Importing a command module registers its commands on ``app``. This order is the order of
# `netqual --help` (command groups last).
COMMAND_MODULES = (
    "cmd_agent", "cmd_check", "cmd_doctor", "cmd_gate", "cmd_inventory", "cmd_lab",
    "cmd_report", "cmd_run", "cmd_probe", "cmd_demo", "cmd_retest", "cmd_workload",
    "cmd_campaign", "cmd_export",
)  # fmt: skip
# A command line registers the module of its command only: `netqual agent` starts on every
# node of a cluster, and each `netqual run`, `report` or `gate` used to import the campaign
# store (duckdb), the report engine and the schema whatever it ran (~0.5 s of start-up).
# `netqual --version` registers none; anything else (`netqual --help`, a mistyped command,
# another option first) registers all.
COMMAND_OF = {
    "agent": "cmd_agent", "check": "cmd_check", "doctor": "cmd_doctor", "gate": "cmd_gate",
    "inventory": "cmd_inventory", "lab": "cmd_lab", "report": "cmd_report",
    "diff": "cmd_report", "run": "cmd_run", "probe": "cmd_probe", "demo": "cmd_demo",
    "retest": "cmd_retest", "workload": "cmd_workload", "campaign": "cmd_campaign",
    "export": "cmd_export",
}  # fmt: skip


def _module_rank(callback: Any) -> int:
    name = getattr(callback, "__module__", "").rsplit(".", 1)[-1]
    return COMMAND_MODULES.index(name) if name in COMMAND_MODULES else len(COMMAND_MODULES)


def register(argv: Sequence[str] = ()) -> None:
    """Import the command modules ``argv`` needs: its command's alone, else all. However
    they came to be registered, commands keep ``COMMAND_MODULES``' order (the order of
    `netqual --help`)."""
    first = argv[0] if argv else None
    if first == "--version":  # the root's own eager option: it prints before any command
        names: tuple[str, ...] = ()
    else:
        names = (COMMAND_OF[first],) if first in COMMAND_OF else COMMAND_MODULES
    for name in names:
        importlib.import_module(f"netqual.cli.{name}")
    app.registered_commands.sort(key=lambda c: _module_rank(c.callback))
    app.registered_groups.sort(key=_group_rank)


def _group_rank(group: Any) -> int:
    """A command group's place: that of the module defining its commands."""
    sub = group.typer_instance
    commands = sub.registered_commands if sub is not None else []
    return _module_rank(commands[0].callback) if commands else len(COMMAND_MODULES)


def _usage_error_types() -> tuple[type[Exception], ...]:
    """typer >= 0.29 vendors click (typer._click) and may not install click at all; older
    typer raises click's own exceptions. Catch whichever exist."""
    found: list[type[Exception]] = []
    for module in ("typer._click.exceptions", "click.exceptions"):
        try:
            found.append(importlib.import_module(module).ClickException)
        except ImportError:
            continue
    return tuple(found)


_USAGE_ERRORS = _usage_error_types()


@functools.cache
def _command(registered: int) -> Any:
    """The click command tree of the ``registered`` commands so far, built once per process
    (about 0.1 s): tests and fuzzers call ``main`` thousands of times; click makes a fresh
    context per call."""
    return polish(typer.main.get_command(app))


def main(argv: list[str] | None = None) -> int:
    # numpy's OpenBLAS starts a thread per further core when numpy is imported, and that
    # thread spins for ~0.1 s before it sleeps: in an agent (a real-time task in the lab)
    # ~0.12 s of CPU taken from the round trips being timed, in every process. netqual
    # does no linear algebra that threads would speed up. Set before any command's module
    # imports numpy; children (engine workers) inherit it; a value already set is kept.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    forget_checked()  # each command checks its own run directories (files.outfiles)
    register(sys.argv[1:] if argv is None else argv)
    command = _command(len(app.registered_commands) + len(app.registered_groups))
    try:
        rv = command.main(args=argv, prog_name="netqual", standalone_mode=False)
    except NetqualError as err:
        if isinstance(err, RunStopped):
            # the run stack only where a run stopped: every other error (a usage or input
            # error, the commonest) leaves without importing it (~0.35 s of CPU)
            from netqual.cli.rundir import abandon_threads_and_exit

            err_console().print(Text(str(err), style="bold yellow"), soft_wrap=True)
            abandon_threads_and_exit(err.exit_code)
        err_console().print(Text.assemble(("error: ", "bold red"), str(err)), soft_wrap=True)
        return err.exit_code
    except typer.Abort:
        err_console().print("aborted")
        return 130
    except _USAGE_ERRORS as err:
        show = getattr(err, "show", None)
        if callable(show):
            show()
        code = getattr(err, "exit_code", EXIT_USAGE)
        return code if isinstance(code, int) else EXIT_USAGE
    except typer.Exit as err:
        return int(err.exit_code)
    except KeyboardInterrupt:
        return 130
    return int(rv) if isinstance(rv, int) else 0


__all__ = ["EXIT_RUNTIME", "app", "main", "register"]
