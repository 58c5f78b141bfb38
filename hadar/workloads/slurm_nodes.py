"""Convert a Slurm node-state log into a node stream (``time,node,event``), so a lab can replay
its own cluster's idle gaps (docs/node-streams.md, "From a Slurm log").

Accepted input: Slurm's parsable output (``|``-separated, as ``sinfo``/``sacct``/``sacctmgr``
print with ``--parsable2``/``-P``) with a header naming three columns, in any order and case:

* ``Timestamp`` (also ``Time``, ``TimeStart``): ISO 8601 (``2024-03-01T12:00:00``, as sacct
  prints it) or seconds since the epoch;
* ``NodeName`` (also ``NodeList``, ``Node``, ``NodeHost``): a node, or a Slurm host list as
  ``sinfo``/``sacct`` compress it (``gpu[01-03,07],cpu1``: gpu01, gpu02, gpu03, gpu07 and
  cpu1), the row's state then holding for each; names must be safe file names (letters,
  digits, '.', '_', '-'), as they become folder names in a run;
* ``State`` (also ``StateLong``, ``StateCompact``): a Slurm node state.

Rows are either a change log (one row per transition) or periodic snapshots (``sinfo -N`` run
every few seconds with a timestamp); either way a node keeps its last state until a later row
names it. A node is *idle* (in the pool) when its state is exactly ``idle`` (any case); every
other state (allocated, mixed, completing, drained, down, reserved, planned, and ``idle`` with a
flag such as ``idle*`` not responding or ``idle~`` powered off) is not. Times in the stream are
seconds since the first row, at most :data:`~hadar.core.validation.MAX_SECONDS` (what the stream
loader accepts). ``min_fragment_s`` drops idle spells shorter than that, as BFTrainer dropped nodes
idle for one poll between two jobs.
"""

from __future__ import annotations

import math
import re
from datetime import datetime, timezone
from pathlib import Path

from hadar.core.csv_input import read_csv
from hadar.core.errors import InputError, shorten
from hadar.core.node_stream import NodeEvent, NodeStream, build_stream
from hadar.core.safe_paths import SAFE_NAME_RULE, is_safe_name
from hadar.core.validation import MAX_SECONDS, read_text

MAX_EPOCH_S = datetime(9999, 12, 31, 23, 59, 59, tzinfo=timezone.utc).timestamp()
"""Largest epoch time a Slurm log can hold (the last second Python's dates represent)."""
MAX_HOSTLIST_NODES = 100_000
"""Most nodes one compressed host list may name (``n[0-999999999]`` is refused, not expanded)."""
_RANGE_RE = re.compile(r"^(\d+)(?:-(\d+))?$")

ALIASES = {
    "time": ("timestamp", "time", "timestart"),
    "node": ("nodename", "nodelist", "node", "nodehost"),
    "state": ("state", "statelong", "statecompact"),
}


def parse_slurm_log(text: str, source: str, min_fragment_s: float = 0.0) -> NodeStream:
    """The node stream of a Slurm node-state log (see the module docstring)."""
    header, reader = read_csv(text, source, delimiter="|")  # a malformed record: one line
    if not header:
        raise InputError(f"{source}: empty Slurm log (expected a header Timestamp|NodeName|State)")
    lower = [h.strip().lower() for h in header]
    col: dict[str, int] = {}
    for key, names in ALIASES.items():
        found = next((lower.index(n) for n in names if n in lower), None)
        if found is None:
            raise InputError(
                f"{source}: line 1 (header): no {key} column (one of {', '.join(names)}; "
                f"fields separated by '|')"
            )
        col[key] = found
    idle_since: dict[str, float] = {}
    state_idle: dict[str, bool] = {}
    events: list[NodeEvent] = []
    first: float | None = None
    last = -math.inf
    for line, row in reader:
        if not any(c.strip() for c in row):
            continue
        if len(row) != len(header):
            raise InputError(
                f"{source}: line {line}: {len(row)} fields, the header has {len(header)}"
            )
        stamp = _timestamp(row[col["time"]].strip(), source, line)
        if stamp < last:
            raise InputError(
                f"{source}: line {line}, field {header[col['time']].strip()}: times must be sorted"
            )
        last = stamp
        first = stamp if first is None else first
        t = stamp - first
        if t > MAX_SECONDS:
            raise InputError(
                f"{source}: line {line}, field {header[col['time']].strip()}: {t:g} s after the "
                f"first row, beyond a node stream's {MAX_SECONDS:g} s"
            )
        node_field = header[col["node"]].strip()
        nodes = expand_hostlist(
            row[col["node"]].strip(), f"{source}: line {line}, field {node_field}"
        )
        state = row[col["state"]].strip()
        if not state:
            raise InputError(f"{source}: line {line}, field {header[col['state']].strip()}: empty")
        idle = state.lower() == "idle"
        for node in nodes:
            if idle and not state_idle.get(node, False):
                idle_since[node] = t
            elif not idle and state_idle.get(node, False):
                start = idle_since.pop(node)
                if t - start >= min_fragment_s and t > start:
                    events += [NodeEvent(start, node, "join"), NodeEvent(t, node, "leave")]
            state_idle[node] = idle
    if first is None:
        raise InputError(f"{source}: no rows after the header")
    end = last - first
    for node, start in idle_since.items():  # still idle when the log ends: an open spell
        events.append(NodeEvent(start, node, "join"))  # of unknown length, never "short"
    if not events:
        raise InputError(f"{source}: no node was idle (state 'idle') in the log")
    return build_stream(events, end=end, source=source)


def load_slurm_log(path: str | Path, min_fragment_s: float = 0.0) -> NodeStream:
    p = Path(path)
    return parse_slurm_log(read_text(p, "Slurm log"), str(p), min_fragment_s)


def _timestamp(raw: str, source: str, line: int) -> float:
    try:
        value = float(raw)
    except ValueError:
        try:
            parsed = datetime.fromisoformat(raw)
        except ValueError:
            raise InputError(
                f"{source}: line {line}, field Timestamp: not ISO 8601 or epoch seconds ({raw!r})"
            ) from None
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=timezone.utc)
        return parsed.timestamp()
    if not math.isfinite(value) or not 0 <= value <= MAX_EPOCH_S:
        raise InputError(
            f"{source}: line {line}, field Timestamp: epoch seconds must be in "
            f"[0, {MAX_EPOCH_S:.0f}] ({shorten(raw)!r})"
        )
    return value


def expand_hostlist(text: str, where: str) -> list[str]:
    """The node names of a Slurm host list (``gpu[01-03,07],cpu1``; several bracket groups
    multiply, ``r[1-2]n[1-2]``; zero padding is kept), each checked as a safe name;
    :class:`InputError` starting with ``where`` for an empty, malformed or too long list."""
    if not text:
        raise InputError(f"{where}: empty")
    names: list[str] = []
    for item in _split_top(text, where):
        names += _expand_one(item, where, MAX_HOSTLIST_NODES - len(names))
    for name in names:
        if not is_safe_name(name):
            raise InputError(
                f"{where}: node {shorten(name)!r} is not a safe name ({SAFE_NAME_RULE})"
            )
    return list(dict.fromkeys(names))


def _split_top(text: str, where: str) -> list[str]:
    """``text`` split at the commas outside brackets."""
    items, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        if depth not in (0, 1):
            raise InputError(f"{where}: unbalanced brackets in host list {shorten(text)!r}")
        if ch == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    if depth:
        raise InputError(f"{where}: unbalanced brackets in host list {shorten(text)!r}")
    items.append(text[start:])
    if any(not item for item in items):
        raise InputError(f"{where}: empty name in host list {shorten(text)!r}")
    return items


def _expand_one(item: str, where: str, room: int) -> list[str]:
    """The names of one host-list item (``prefix[ranges]rest``), at most ``room`` of them."""
    open_at = item.find("[")
    if open_at < 0:
        if "]" in item:
            raise InputError(f"{where}: unbalanced brackets in host list {shorten(item)!r}")
        return [item]
    close_at = item.find("]", open_at)
    prefix, body, rest = item[:open_at], item[open_at + 1 : close_at], item[close_at + 1 :]
    numbers: list[str] = []
    for part in body.split(","):
        m = _RANGE_RE.match(part)
        if m is None:
            raise InputError(
                f"{where}: {shorten(part)!r} in host list {shorten(item)!r} is no number or "
                "range (as in gpu[01-03,07])"
            )
        lo, hi = int(m[1]), int(m[2] if m[2] is not None else m[1])
        if hi < lo:
            raise InputError(
                f"{where}: range {part!r} in host list {shorten(item)!r} runs backwards"
            )
        if len(numbers) + hi - lo + 1 > room:
            raise InputError(
                f"{where}: host list {shorten(item)!r} names more than {MAX_HOSTLIST_NODES:,} nodes"
            )
        width = len(m[1])
        numbers += [str(n).zfill(width) for n in range(lo, hi + 1)]
    tails = _expand_one(rest, where, max(1, room // max(1, len(numbers)))) if rest else [""]
    if len(numbers) * len(tails) > room:
        raise InputError(
            f"{where}: host list {shorten(item)!r} names more than {MAX_HOSTLIST_NODES:,} nodes"
        )
    return [f"{prefix}{n}{tail}" for n in numbers for tail in tails]
