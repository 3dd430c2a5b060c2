"""Help text in the style of git, uv and ripgrep: real metavars, no type tags, one default style.

typer writes ``<bool>``, ``<path>`` and ``{inventory}`` into help and usage. This walks the
built command tree once and gives every parameter a metavar instead: the one its option
declares, else one from its type (``FILE``, ``N``, ``SECONDS``, ``TEXT``). Defaults that
depend on the inventory or environment are written by the option itself as
``[default: ...]``, the same form click uses for literal defaults.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from typer.core import TyperArgument, TyperOption


def _metavar(option: TyperOption) -> str:
    kind = option.bare_type().lower().removeprefix("list[").removesuffix("]")
    name = (option.name or "").lower()
    if kind == "path" or "file" in name:
        return "DIR" if name in {"out", "state_dir"} or name.endswith("_dir") else "FILE"
    if kind == "int":
        return "N"
    if kind == "float":
        return "SECONDS" if "timeout" in name else "NUMBER"
    return "TEXT"


def _commands(cmd: Any) -> Iterator[Any]:
    yield cmd
    for sub in getattr(cmd, "commands", {}).values():
        yield from _commands(sub)


def polish(root: Any) -> Any:
    """Set metavars on every parameter of ``root`` and its subcommands; returns ``root``."""
    for cmd in _commands(root):
        for param in cmd.params:
            if isinstance(param, TyperArgument):
                _polish_argument(param)
            elif isinstance(param, TyperOption) and not param.is_flag and param.metavar is None:
                param.metavar = _metavar(param)
    return root


def _polish_argument(arg: TyperArgument) -> None:
    if arg.metavar is None:
        arg.metavar = (arg.name or "ARG").upper()
    shown = arg.metavar if arg.required else f"[{arg.metavar}]"
    if arg.nargs != 1:
        shown += "..."
    # The metavar says what the argument is; typer would append "<path>" and brace it.
    setattr(arg, "display_type_rich", lambda ctx: None)  # noqa: B010
    setattr(arg, "get_usage_pieces", lambda ctx: [shown])  # noqa: B010
