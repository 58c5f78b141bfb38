"""Slurm's compressed host lists (``n[1-3,7],gpu-[01-02]a``) expanded into node names, as
``scontrol show hostnames`` does, without needing Slurm installed."""

from __future__ import annotations

import re

MAX_HOSTS = 100_000
"""More names than a host list may expand to (a typo such as ``n[1-999999999]`` is refused)."""

_RANGE = re.compile(r"(\d+)(?:-(\d+))?")


def expand_hostlist(text: str) -> list[str]:
    """The node names of a Slurm host list, in order; ``ValueError`` with a one-line reason for
    an unbalanced bracket, a bad range or more than :data:`MAX_HOSTS` names."""
    names: list[str] = []
    for part in _split_top(text.strip()):
        names += _expand(part)
        if len(names) > MAX_HOSTS:
            raise ValueError(f"host list {text!r} names more than {MAX_HOSTS} nodes")
    return names


def _split_top(text: str) -> list[str]:
    """Split at the commas outside brackets."""
    parts, depth, start = [], 0, 0
    for i, c in enumerate(text):
        if c == "[":
            depth += 1
            if depth > 1:
                raise ValueError(f"host list {text!r}: nested '['")
        elif c == "]":
            depth -= 1
            if depth < 0:
                raise ValueError(f"host list {text!r}: ']' without '['")
        elif c == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    if depth:
        raise ValueError(f"host list {text!r}: '[' without ']'")
    parts.append(text[start:])
    if any(not p for p in parts):
        raise ValueError(f"host list {text!r}: empty name")
    return parts


def _expand(part: str) -> list[str]:
    open_at = part.find("[")
    if open_at < 0:
        return [part]
    close_at = part.index("]", open_at)
    head, body, tail = part[:open_at], part[open_at + 1 : close_at], part[close_at + 1 :]
    tails = _expand(tail) if tail else [""]
    out: list[str] = []
    for item in body.split(","):
        m = _RANGE.fullmatch(item)
        if m is None:
            raise ValueError(f"host list {part!r}: {item!r} is not a number or a range a-b")
        lo, hi = m.group(1), m.group(2) or m.group(1)
        if int(hi) < int(lo):
            raise ValueError(f"host list {part!r}: range {item!r} runs backwards")
        if int(hi) - int(lo) >= MAX_HOSTS:
            raise ValueError(f"host list {part!r} names more than {MAX_HOSTS} nodes")
        width = len(lo) if lo.startswith("0") and len(lo) > 1 else 0
        out += [f"{head}{i:0{width}d}{t}" for i in range(int(lo), int(hi) + 1) for t in tails]
    return out
