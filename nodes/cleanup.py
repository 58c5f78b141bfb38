"""Delete a task's files on a node without following a link.

    python -m nodes.cleanup FOLDER NAME [NAME ...]

Run in the node's working directory (the coordinator's ``rNNNN-aK/jJ-cC`` folders are below it):
``FOLDER`` is opened from there one component at a time without following a link, and each
``NAME`` is unlinked inside it (a link named so is removed itself, never its target). A missing
folder or file is nothing to do. Exit 0, or 2 with one line when ``FOLDER`` leads through a link
(``rm -f FOLDER/NAME`` deleted the target of a folder swapped for a link).
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

from hadar.core.safe_paths import PathEscapeError, real_subfolder

PROG = "hadar-cleanup"


def remove(folder: Path, names: list[str]) -> list[str]:
    """Unlink ``names`` (plain file names) in ``folder`` below the working directory; the names
    removed. :class:`PathEscapeError` when a component of ``folder`` is a link."""
    removed = []
    try:
        with real_subfolder(folder) as fd:
            for name in names:
                if not name or "/" in name or name in (".", ".."):
                    raise ValueError(f"{name!r}: not a file name")
                with contextlib.suppress(FileNotFoundError, IsADirectoryError, PermissionError):
                    os.unlink(name, dir_fd=fd)
                    removed.append(name)
    except FileNotFoundError:
        pass
    return removed


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) < 2 or Path(args[0]).is_absolute():
        print(f"{PROG}: error: usage: python -m nodes.cleanup FOLDER NAME...", file=sys.stderr)
        return 2
    try:
        remove(Path(args[0]), args[1:])
    except (PathEscapeError, ValueError) as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
