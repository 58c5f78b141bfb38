"""Names that become parts of file paths, and paths built from them, kept inside their root.

Node names, cluster names and run ids end up as directory names (``RUNDIR/nodes/<run>/<node>``,
``~/.hadar/runs/<run>/<node>`` on an SSH host). They are restricted to a safe character set
where the file that names them is loaded (:func:`check_safe_name`), and every path built from
them is resolved and checked to stay under its root where it is built (:func:`confined`), so a
name like ``../../x``, an absolute path or a planted symlink cannot move a run's files elsewhere.

A run never creates a symbolic link in its directory, so one found there was planted: a run (new
or resumed) refuses such a directory (:func:`refuse_links`), and code that deletes files inside
it lists only real files of real folders (:func:`regular_files`).
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path

from hadar.core.errors import InputError

SAFE_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
SAFE_NAME_RULE = "use 1-63 letters, digits, '.', '_' or '-', starting with a letter or digit"
"""Names become file, directory and tag names; 63 is a DNS label's and an AWS tag key's safe length."""


class PathEscapeError(InputError):
    """A path built from input resolves outside the directory it must stay in."""


def is_safe_name(value: object) -> bool:
    """Whether ``value`` may be used as one path component."""
    return isinstance(value, str) and bool(SAFE_NAME_RE.match(value))


def check_safe_name(value: str) -> str:
    """``value`` if it is a safe path component, else ``ValueError`` (for pydantic validators)."""
    if not is_safe_name(value):
        raise ValueError(f"{value!r} is not a safe name ({SAFE_NAME_RULE})")
    return value


def confined(root: Path, *parts: str, what: str) -> Path:
    """``root/parts...`` resolved (symlinks followed); :class:`PathEscapeError` naming ``what``
    if that lands outside ``root`` (itself resolved)."""
    base = root.resolve()
    path = base.joinpath(*parts).resolve()
    if not path.is_relative_to(base):
        shown = "/".join(parts)
        raise PathEscapeError(f"{what}: {shown!r} resolves to {path}, outside {base}")
    return path


def refuse_links(root: Path, what: str) -> None:
    """One-line :class:`PathEscapeError` naming the first symbolic link found below ``root``
    (walked without following links; ``root`` itself may be one). Nothing if ``root`` is missing."""
    for dirpath, dirnames, filenames in os.walk(root):
        for name in sorted(dirnames + filenames):
            path = Path(dirpath, name)
            if path.is_symlink():
                raise PathEscapeError(
                    f"{path}: a symbolic link in {what} {root}, which hadar never creates; "
                    "remove it (hadar does not write or delete through links)"
                )


def regular_files(folder: Path) -> Iterator[Path]:
    """The regular files directly in ``folder``, not following links: nothing when ``folder``
    is missing, a link or no folder; links and other non-regular entries are skipped."""
    try:
        if not stat.S_ISDIR(os.lstat(folder).st_mode):
            return
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError:
        return
    for entry in entries:
        if entry.is_file(follow_symlinks=False):
            yield Path(entry.path)
