"""The one console netqual prints through: text is always literal.

Names, reasons, versions and error texts come from results files and from peers, and they
are interpolated into what is printed. So the console never reads rich markup (``[/x]``
would crash it, ``[link=...]`` would become a clickable link) or emoji codes, and every
character that could act on the terminal (ESC sequences, bidi overrides, U+2028, other
controls) is shown as its escape (``\\x1b``) in the final segments, whichever renderable
carried it. Styling is done with ``style=`` and ``rich.text.Text``, never with markup.
"""

from __future__ import annotations

from collections.abc import Iterable

from rich.console import Console, ConsoleOptions, RenderableType
from rich.segment import Segment

from netqual.base.names import visible


class LiteralConsole(Console):
    def __init__(self, *, stderr: bool = False, width: int | None = None) -> None:
        super().__init__(stderr=stderr, width=width, highlight=False, markup=False, emoji=False)

    def render(
        self, renderable: RenderableType, options: ConsoleOptions | None = None
    ) -> Iterable[Segment]:
        for segment in super().render(renderable, options):
            # Control segments are rich's own cursor moves; text is data and is made visible.
            if segment.control or segment.text.isprintable():
                yield segment
            else:
                yield Segment(visible(segment.text, newlines=True), segment.style)
