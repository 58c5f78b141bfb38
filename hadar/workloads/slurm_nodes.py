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
from datetime import datetime, timezone
from pathlib import Path

from hadar.core.csv_input import read_csv
from hadar.core.errors import InputError, shorten
from hadar.core.node_stream import NodeEvent, NodeStream, build_stream
from hadar.core.safe_paths import SAFE_NAME_RULE, is_safe_name
from hadar.core.slurm_hostlist import expand_hostlist as parse_hostlist
from hadar.core.validation import MAX_SECONDS, read_text

MAX_EPOCH_S = datetime(9999, 12, 31, 23, 59, 59, tzinfo=timezone.utc).timestamp()
"""Largest epoch time a Slurm log can hold (the last second Python's dates represent)."""

ALIASES = {
    "time": ("timestamp", "time", "timestart"),
    "node": ("nodename", "nodelist", "node", "nodehost"),
    "state": ("state", "statelong", "statecompact"),
}


MAX_NODE_ROWS = 2_000_000
"""The most node-state rows a log may expand to (its compressed host lists expanded): a few
hundred lines naming 100,000 nodes each would write a stream of hundreds of megabytes, more
than hadar reads back, over minutes; two million rows are about 20 s and 40 MB."""


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
    rows = 0
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
        rows += len(nodes)
        if rows > MAX_NODE_ROWS:  # a few kB of host ranges could fill the memory
            raise InputError(
                f"{source}: line {line}, field {node_field}: the log expands to more than "
                f"{MAX_NODE_ROWS:,} node-state rows (split it, or sample it less often)"
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
                f"{source}: line {line}, field Timestamp: not ISO 8601 or epoch seconds ({shorten(raw)!r})"
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
    """The node names of a Slurm host list (``hadar.core.slurm_hostlist``), each checked as a
    safe name, without repeats; :class:`InputError` starting with ``where`` for an empty,
    malformed or too long list."""
    if not text:
        raise InputError(f"{where}: empty")
    try:
        names = parse_hostlist(text)
    except ValueError as exc:
        raise InputError(f"{where}: {exc}") from None
    for name in names:
        if not is_safe_name(name):
            raise InputError(
                f"{where}: node {shorten(name)!r} is not a safe name ({SAFE_NAME_RULE})"
            )
    return list(dict.fromkeys(names))
