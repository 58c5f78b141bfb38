"""The console every command prints through: on a terminal, the terminal's width (80 columns
included: tables fold their cells, long lines wrap at words); when the output goes to a file or
a pipe (``run.log``, CI logs, ``| less``), lines are never wrapped (a path or a resume command
stays whole, to be copied or searched) and tables are laid out in ``$COLUMNS`` or 200 columns.

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


def on_terminal(stderr: bool = False) -> bool:
    """Whether stdout (``stderr``: stderr) is a terminal."""
    stream = sys.stderr if stderr else sys.stdout
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # replaced by an object without one, or closed
        return False


def pipe_width() -> int:
    """Columns of a table written to a file or pipe: ``$COLUMNS`` or :data:`PIPE_WIDTH`."""
    columns = os.environ.get("COLUMNS", "")
    return int(columns) if columns.isdigit() and int(columns) > 0 else PIPE_WIDTH


def console(stderr: bool = False, **kwargs: Any) -> Console:
    """A rich console for stdout (``stderr``: stderr): on a terminal at its width, wrapping;
    else :func:`pipe_width` columns with lines never wrapped. Keyword arguments go to
    ``Console``; a ``file=`` is written like a pipe unless it is a terminal."""
    from rich.console import Console

    file = kwargs.get("file")
    terminal = (
        file.isatty() if file is not None and hasattr(file, "isatty") else on_terminal(stderr)
    )
    if terminal:
        return Console(stderr=stderr, **kwargs)
    kwargs.setdefault("soft_wrap", True)
    return Console(stderr=stderr, width=pipe_width(), **kwargs)


def cell(value: object) -> Text:
    """``value`` as literal text for a table cell: no markup, control characters escaped."""
    from rich.text import Text

    return Text(printable(str(value)))


def plain(console: Console, line: str, style: str | None = None) -> None:
    """Print ``line`` as literal text (no markup, no highlighting, control characters escaped)."""
    console.print(printable(line), style=style, markup=False, highlight=False)
