"""The console every command prints through: the terminal's width on a terminal (80 columns
included: tables fold their cells, long lines wrap at words), ``$COLUMNS`` or 200 columns when
the output goes to a file or a pipe (so logs keep whole rows).

Values that come from files, nodes or cloud endpoints are shown through :func:`cell` (a table
cell) or :func:`plain` (a line): as text, never read as rich markup (``[/]`` stopped a command
with a traceback) and with control characters escaped (``\x1b[2J`` cleared the screen)."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

from hadar.core.text import printable

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text

PIPE_WIDTH = 200
"""Columns when stdout is not a terminal and ``$COLUMNS`` is unset."""


def width() -> int | None:
    """None (rich measures the terminal) on a terminal, else ``$COLUMNS`` or :data:`PIPE_WIDTH`."""
    if sys.stdout.isatty():
        return None
    columns = os.environ.get("COLUMNS", "")
    return int(columns) if columns.isdigit() and int(columns) > 0 else PIPE_WIDTH


def console(**kwargs: Any) -> Console:
    """A rich console at :func:`width` (keyword arguments go to ``Console``)."""
    from rich.console import Console

    return Console(width=width(), **kwargs)


def cell(value: object) -> Text:
    """``value`` as literal text for a table cell: no markup, control characters escaped."""
    from rich.text import Text

    return Text(printable(str(value)))


def plain(console: Console, line: str, style: str | None = None) -> None:
    """Print ``line`` as literal text (no markup, no highlighting, control characters escaped)."""
    console.print(printable(line), style=style, markup=False, highlight=False)
