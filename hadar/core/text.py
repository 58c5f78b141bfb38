"""Text from files, nodes and cloud endpoints made safe to show on a terminal.

A value quoted from a cluster file, a node's answer or an EC2 response may hold newlines, escape
sequences (``\\x1b[2J`` clears the screen, ``\\x1b]0;...`` sets the window title) or other control
characters: :func:`printable` shows them escaped (``\\n``, ``\\x1b``) so they reach the terminal
as text, on one line."""

from __future__ import annotations

from hadar.core.errors import InputError, shorten


def printable(text: str) -> str:
    """``text`` with every non-printable character escaped (``\\n``, ``\\x1b``, ``\\u2028``)."""
    if text.isprintable():
        return text
    return "".join(
        c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text
    )


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``"1 run"``, ``"2 runs"``: ``n`` and ``noun``, plural (``plural`` or ``noun + "s"``)
    unless ``n`` is 1."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def duration_text(seconds: float) -> str:
    """A duration in the unit that shows it: days from one day (``48,038.7 days``), hours from
    one hour (``1.25 h``), then minutes (``4.7 min``), then seconds (``10.0 s``), so a short
    one never reads ``0.00 h``."""
    for unit, size, places in (("days", 86400, 1), ("h", 3600, 2), ("min", 60, 1)):
        if abs(seconds) >= size:
            return f"{seconds / size:,.{places}f} {unit}"
    return f"{seconds:,.1f} s"


def comma_items(text: str, option: str) -> list[str]:
    """The items of a comma-separated option value, stripped: :class:`InputError` naming
    ``option`` if there is none, an item is empty (``a,,b``, a trailing comma) or one is given
    twice."""
    items = [item.strip() for item in text.split(",")]
    if not any(items):
        raise InputError(f"{option}: nothing given")
    if not all(items):
        raise InputError(f"{option}: an empty item between commas (got {shorten(text)!r})")
    twice = next((item for i, item in enumerate(items) if item in items[:i]), None)
    if twice is not None:
        raise InputError(f"{option}: {shorten(twice)!r} given twice")
    return items
