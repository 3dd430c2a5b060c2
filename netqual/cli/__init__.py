"""Command-line entry point. Exceptions become exit codes here and nowhere else."""

from __future__ import annotations

import click
from rich.text import Text

from netqual.cli.app import app, err_console
from netqual.errors import EXIT_RUNTIME, EXIT_USAGE, NetqualError

try:  # typer >= 0.29 raises usage errors from its vendored copy of click
    from typer._click.exceptions import ClickException as _TyperClickException
except ImportError:  # pragma: no cover - older typer raises click's own
    _TyperClickException = click.exceptions.ClickException  # type: ignore[misc,assignment]

# Importing a command module registers its commands on ``app``.
from netqual.cli import cmd_agent, cmd_doctor, cmd_gate, cmd_lab, cmd_report, cmd_run  # noqa: F401  isort: skip


def main(argv: list[str] | None = None) -> int:
    try:
        rv = app(args=argv, standalone_mode=False)
    except NetqualError as err:
        err_console().print(Text.assemble(("error: ", "bold red"), str(err)), soft_wrap=True)
        return err.exit_code
    except click.exceptions.Abort:
        err_console().print("aborted")
        return 130
    except (click.exceptions.ClickException, _TyperClickException) as err:
        err.show()
        return EXIT_USAGE if err.exit_code == 2 else err.exit_code
    except click.exceptions.Exit as err:
        return err.exit_code
    except KeyboardInterrupt:
        return 130
    return rv if isinstance(rv, int) else 0


__all__ = ["EXIT_RUNTIME", "app", "main"]
