"""Slurm's compressed host lists (``n[1-3,7],gpu-[01-02]a``) expanded into node names, as
``scontrol show hostnames`` does, without needing Slurm installed. The one parser: the Slurm
provider reads ``squeue``/``sinfo`` output with it, the node-stream readers Slurm's logs."""

from __future__ import annotations

import re

from hadar.core.errors import shorten

MAX_HOSTS = 100_000
"""More names than a host list may expand to (a typo such as ``n[1-999999999]`` is refused)."""

_RANGE = re.compile(r"(\d+)(?:-(\d+))?")


def expand_hostlist(text: str) -> list[str]:
    """The node names of a Slurm host list, in order (several bracket groups multiply,
    ``r[1-2]n[1-2]``; zero padding is kept); ``ValueError`` with a one-line reason for an
    unbalanced bracket, a bad range, an empty name or more than :data:`MAX_HOSTS` names."""
    text = text.strip()
    names: list[str] = []
    for part in _split_top(text):
        names += _expand(part, MAX_HOSTS - len(names))
    return names


def _too_many(text: str) -> ValueError:
    return ValueError(f"host list {shorten(text)!r} names more than {MAX_HOSTS:,} nodes")


def _split_top(text: str) -> list[str]:
    """Split at the commas outside brackets."""
    parts, depth, start = [], 0, 0
    for i, c in enumerate(text):
        if c == "[":
            depth += 1
        elif c == "]":
            depth -= 1
        if depth not in (0, 1):
            raise ValueError(f"unbalanced brackets in host list {shorten(text)!r}")
        if c == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    if depth:
        raise ValueError(f"unbalanced brackets in host list {shorten(text)!r}")
    parts.append(text[start:])
    if any(not p for p in parts):
        raise ValueError(f"empty name in host list {shorten(text)!r}")
    return parts


def _expand(part: str, room: int) -> list[str]:
    """The names of one item (``prefix[ranges]rest``), at most ``room`` of them."""
    open_at = part.find("[")
    if open_at < 0:
        if "]" in part:
            raise ValueError(f"unbalanced brackets in host list {shorten(part)!r}")
        return [part]
    close_at = part.index("]", open_at)
    head, body, tail = part[:open_at], part[open_at + 1 : close_at], part[close_at + 1 :]
    numbers: list[str] = []
    for item in body.split(","):
        m = _RANGE.fullmatch(item)
        if m is None:
            raise ValueError(
                f"{shorten(item)!r} in host list {shorten(part)!r} is no number or range "
                "(as in gpu[01-03,07])"
            )
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        if hi < lo:
            raise ValueError(f"range {item!r} in host list {shorten(part)!r} runs backwards")
        if len(numbers) + hi - lo + 1 > room:
            raise _too_many(part)
        width = len(m.group(1))
        numbers += [str(n).zfill(width) for n in range(lo, hi + 1)]
    tails = _expand(tail, max(1, room // max(1, len(numbers)))) if tail else [""]
    if len(numbers) * len(tails) > room:
        raise _too_many(part)
    return [f"{head}{n}{t}" for n in numbers for t in tails]
