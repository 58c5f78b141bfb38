"""``argparse`` ``type=`` functions: every number and path a flag takes is checked where it enters.

Numbers must be finite and inside a documented range, and the message names the unit
(``--round: must be a finite number of seconds in [1, 604800] (got 'nan')``). Output paths are
checked before any work starts: an existing file where a directory is wanted (or the reverse),
or a path whose parent cannot be created, is refused at parse time, and so is a path the system
cannot look up (a name over 255 bytes, a symbolic link loop). argparse turns the
``ArgumentTypeError`` into one line and exit code 2 (see :mod:`hadar.cli`).
"""

from __future__ import annotations

import argparse
import functools
import math
import os
import re
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path

from hadar.core.errors import path_trouble, shorten
from hadar.core.validation import DAY_S, MAX_SEED, stat_path

MINUTE, HOUR, DAY = 60.0, 3600.0, DAY_S
_UNITS = {"": 1.0, "s": 1.0, "m": MINUTE, "min": MINUTE, "h": HOUR, "d": DAY}
_UNIT_RE = re.compile(r"(.*?\d\.?)\s*(s|m|min|h|d)", re.IGNORECASE)


def _range_text(lo: float, hi: float, lo_open: bool) -> str:
    return f"{'(' if lo_open else '['}{lo:g}, {hi:g}]"


def seconds(
    lo: float, hi: float, *, lo_open: bool = False, units: bool = False
) -> Callable[[str], float]:
    """A type for a duration in seconds within ``[lo, hi]`` (``(lo, hi]`` with ``lo_open``).
    With ``units``, ``90m``, ``36h`` and ``30d`` are accepted too."""

    def parse(text: str) -> float:
        value = _duration(text) if units else _float(text)
        inside = (
            value is not None
            and math.isfinite(value)
            and (lo < value if lo_open else lo <= value)
            and value <= hi
        )
        if value is None or not inside:
            suffix = " (or with a unit: 90m, 36h, 30d)" if units else ""
            raise argparse.ArgumentTypeError(
                f"must be a finite number of seconds in {_range_text(lo, hi, lo_open)}{suffix} "
                f"(got {shorten(text)!r})"
            )
        return float(value)

    parse.__name__ = "seconds"
    return parse


def count(lo: int, hi: int, what: str = "") -> Callable[[str], int]:
    """A type for a whole number in ``[lo, hi]``; ``what`` is its unit (``processes``, ``GPUs``)."""

    def parse(text: str) -> int:
        try:
            value = int(text.strip())
        except ValueError:
            value = None
        if value is None or not lo <= value <= hi:
            unit = f" of {what}" if what else ""
            raise argparse.ArgumentTypeError(
                f"must be a whole number{unit} in [{lo}, {hi}] (got {shorten(text)!r})"
            )
        return value

    parse.__name__ = "count"
    return parse


seed = count(0, MAX_SEED)
"""``--seed``: a non-negative 64-bit integer."""


def _path_type(check: Callable[[str], str]) -> Callable[[str], str]:
    """``check`` with every ``OSError`` met while looking at the path refused as one line: the
    path, cut, and why (``/tmp/xxx...xxx: file name too long``, a symbolic link loop)."""

    @functools.wraps(check)
    def parse(text: str) -> str:
        try:
            return check(text)
        except OSError as exc:
            raise argparse.ArgumentTypeError(path_trouble(text, exc)) from None

    return parse


@_path_type
def out_dir(text: str) -> str:
    """``--out DIR``: a directory that exists or can be created (checked now, created later)."""
    path = Path(text)
    if not text.strip():
        raise argparse.ArgumentTypeError("empty path")
    target = stat_path(path)
    if target is None and path.is_symlink():
        raise argparse.ArgumentTypeError(f"{text} is a dangling symbolic link")
    if target is not None and not stat.S_ISDIR(target.st_mode):
        raise argparse.ArgumentTypeError(f"{text} is an existing file, not a directory")
    _check_creatable(path, text)
    return text


@_path_type
def out_file(text: str) -> str:
    """``--out FILE``: a file that can be written (its directory exists or can be created)."""
    path = Path(text)
    if not text.strip():
        raise argparse.ArgumentTypeError("empty path")
    target = stat_path(path)
    if target is None:
        _check_creatable(path.parent, text)
        return text
    if stat.S_ISDIR(target.st_mode):
        raise argparse.ArgumentTypeError(f"{text} is a directory, not a file")
    if not stat.S_ISREG(target.st_mode):
        raise argparse.ArgumentTypeError(f"{text} exists and is not a regular file")
    if not os.access(path, os.W_OK):
        raise argparse.ArgumentTypeError(f"{text} is not writable")
    return text


def missing_folder(path: str | Path) -> Path | None:
    """The outermost folder above ``path`` that does not exist yet (None when its folder
    exists): an ``--out FILE`` command creates it and says so."""
    missing = None
    parent = Path(path).absolute().parent
    while not parent.exists():
        missing, parent = parent, parent.parent
    return missing


def _check_creatable(path: Path, text: str) -> None:
    """Raise unless ``path`` is a writable directory or could be created below its nearest
    existing ancestor. Probed by creating (and removing) a scratch directory there, so read-only
    file systems and pseudo file systems such as /proc are caught too."""
    ancestor = path.absolute()
    while not ancestor.exists():
        if ancestor.is_symlink():  # mkdir would meet it as an existing name: FileExistsError
            raise argparse.ArgumentTypeError(
                f"cannot create {text}: {ancestor} is a dangling symbolic link"
            )
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise argparse.ArgumentTypeError(
            f"cannot create {text}: {ancestor} is a file, not a directory"
        )
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".hadar-probe-", dir=ancestor))
    except OSError as exc:
        raise argparse.ArgumentTypeError(
            f"cannot create {text}: {ancestor}: {exc.strerror or exc}"
        ) from None


def _float(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _duration(text: str) -> float | None:
    """Seconds from ``3600``, ``90m``, ``36h`` or ``30d`` (None when not a duration)."""
    m = _UNIT_RE.fullmatch(text.strip())
    if m is None:
        return _float(text)
    value = _float(m.group(1))
    return None if value is None else value * _UNITS[m.group(2).lower()]


def fraction(text: str) -> float:
    """A share in ``(0, 1]`` (e.g. ``--idle-share 0.5``)."""
    value = _float(text)
    if value is None or not math.isfinite(value) or not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"must be a number in (0, 1] (got {shorten(text)!r})")
    return float(value)
