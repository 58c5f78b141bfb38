"""The console every command prints through: the terminal's width on a terminal (80 columns
included: tables fold their cells, long lines wrap at words), ``$COLUMNS`` or 200 columns when
the output goes to a file or a pipe (so logs keep whole rows)."""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

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
