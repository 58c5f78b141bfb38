"""Node-availability streams: when each node joins and leaves the pool a scheduler may use.

A stream is a CSV ``time,node,event`` (``event`` is ``join`` or ``leave``; ``time`` in seconds
from the stream's start), sorted by time. It describes the idle nodes of a supercomputer that its
main scheduler cannot fill (BFTrainer, MalleTrain) or any lab's machines that come and go.
A node is available only between a ``join`` and the next ``leave`` (a node that has not left
by the stream's end stays); a cluster node the stream never names is never available (the
stream *is* the pool: give a node that is always there a join at time 0). A ``leave``
comes without warning: whatever runs on the node is preempted (docs/node-streams.md).

:func:`parse_node_stream` checks every row: sorted times, known events, nodes the cluster
declares, no ``leave`` before a ``join`` and no second ``join`` while the node is in the pool
(overlapping fragments); a bad row is an InputError naming the file, the line and the field.
"""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from types import MappingProxyType
from typing import Literal

from hadar.core.csv_input import read_csv
from hadar.core.errors import InputError, shorten
from hadar.core.validation import MAX_SECONDS, read_text

EventKind = Literal["join", "leave"]
COLUMNS = ("time", "node", "event")
_DECIMAL = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?", re.ASCII)
"""A time as the stream's writers spell it: decimal digits, a point, an exponent."""
EVENTS: tuple[EventKind, ...] = ("join", "leave")


@dataclass(frozen=True)
class NodeEvent:
    """One row: ``node`` joins or leaves the pool at ``time`` seconds."""

    time: float
    node: str
    event: EventKind


@dataclass(frozen=True)
class Fragment:
    """One stretch of time a node spends in the pool: ``[start, end)``."""

    node: str
    start: float
    end: float

    @property
    def length(self) -> float:
        return self.end - self.start


@dataclass(frozen=True)
class NodeStream:
    """A validated, time-sorted stream of join/leave events."""

    events: tuple[NodeEvent, ...]
    end: float
    """When the stream ends (its last event, unless given): open fragments close here."""
    source: str = "node stream"

    @cached_property
    def _intervals(self) -> Mapping[str, tuple[float, ...]]:
        """Each named node's event times: joins at even positions, leaves at odd ones."""
        bounds: dict[str, list[float]] = {}
        for e in self.events:
            bounds.setdefault(e.node, []).append(e.time)
        return MappingProxyType({n: tuple(b) for n, b in bounds.items()})

    @cached_property
    def nodes(self) -> tuple[str, ...]:
        """Nodes the stream names, sorted."""
        return tuple(sorted(self._intervals))

    @cached_property
    def times(self) -> tuple[float, ...]:
        """The distinct event times, ascending (one *event* may move several nodes)."""
        return tuple(sorted({e.time for e in self.events}))

    def is_up(self, node: str, t: float) -> bool:
        """Whether ``node`` is in the pool at ``t`` (a join at ``t`` counts, a leave at ``t``
        does not); a node the stream never names is never up, and a node that has not left
        by the stream's end stays up."""
        b = self._intervals.get(node)
        if b is None:
            return False
        # joins sit at even positions, leaves at odd ones: up iff an odd count is <= t
        return bisect.bisect_right(b, t) % 2 == 1

    def available(self, names: Iterable[str], t: float) -> tuple[str, ...]:
        """The nodes among ``names`` that are up at ``t``, in the given order."""
        return tuple(n for n in names if self.is_up(n, t))

    def next_time(self, t: float) -> float | None:
        """The first event time strictly after ``t`` (None when none is left)."""
        i = bisect.bisect_right(self.times, t)
        return self.times[i] if i < len(self.times) else None

    @cached_property
    def fragments(self) -> tuple[Fragment, ...]:
        """Every fragment, by (start, node); one still open at the end closes at :attr:`end`."""
        out: list[Fragment] = []
        for node, b in self._intervals.items():
            for i in range(0, len(b), 2):
                out.append(Fragment(node, b[i], b[i + 1] if i + 1 < len(b) else self.end))
        return tuple(sorted(out, key=lambda f: (f.start, f.node)))


@dataclass(frozen=True)
class StreamStats:
    """What the papers publish about a stream (BFTrainer §2.1, Table 1, Fig. 1)."""

    hours: float
    join_events_per_hour: float
    """Distinct times at which at least one node joined (INC/h), per hour."""
    leave_events_per_hour: float
    """Distinct times at which at least one node left (DEC/h), per hour."""
    fragments: int
    short_fragment_share: float
    """Share of fragments shorter than 10 minutes (58 % on Summit)."""
    short_node_time_share: float
    """Their share of all idle node-time (about 10 % on Summit)."""
    mean_idle_nodes: float
    """Idle nodes averaged over time (the paper's eq-Nodes)."""
    median_fragment_s: float


SHORT_FRAGMENT_S = 600.0
"""The papers' threshold for a short fragment: 10 minutes."""


def stream_stats(stream: NodeStream, start: float = 0.0) -> StreamStats:
    """The published statistics of ``stream`` measured from ``start`` to its end. Fragments
    open at the stream's end are counted (truncated), as a log that ends does."""
    span = max(stream.end - start, 1e-9)
    joins = {e.time for e in stream.events if e.event == "join" and e.time > start}
    leaves = {e.time for e in stream.events if e.event == "leave" and e.time > start}
    frags = [f for f in stream.fragments if f.start >= start]
    lengths = sorted(f.length for f in frags)
    total = sum(lengths)
    short = [x for x in lengths if x < SHORT_FRAGMENT_S]
    idle = sum(max(0.0, f.end - max(f.start, start)) for f in stream.fragments if f.end > start)
    return StreamStats(
        hours=span / 3600,
        join_events_per_hour=len(joins) / (span / 3600),
        leave_events_per_hour=len(leaves) / (span / 3600),
        fragments=len(frags),
        short_fragment_share=len(short) / len(frags) if frags else 0.0,
        short_node_time_share=sum(short) / total if total > 0 else 0.0,
        mean_idle_nodes=idle / span,
        median_fragment_s=lengths[len(lengths) // 2] if lengths else 0.0,
    )


def idle_counts(stream: NodeStream) -> tuple[tuple[float, int], ...]:
    """``(time, idle nodes from then on)`` at every event time (nodes the stream names)."""
    delta: dict[float, int] = {}
    for e in stream.events:
        delta[e.time] = delta.get(e.time, 0) + (1 if e.event == "join" else -1)
    out, count = [], 0
    for t in sorted(delta):
        count += delta[t]
        out.append((t, count))
    return tuple(out)


def build_stream(
    events: Sequence[NodeEvent], end: float | None = None, source: str = "node stream"
) -> NodeStream:
    """A stream from events already known to be valid (a generator's, a converter's): sorted
    by (time, leave before join, node) so a node that leaves and rejoins at once stays valid."""
    ordered = tuple(sorted(events, key=lambda e: (e.time, e.event != "leave", e.node)))
    last = ordered[-1].time if ordered else 0.0
    return NodeStream(ordered, end=last if end is None else max(end, last), source=source)


def parse_node_stream(
    text: str,
    source: str,
    declared: Collection[str] | None = None,
    *,
    cluster_source: str = "the cluster file",
) -> NodeStream:
    """Parse and check a ``time,node,event`` CSV; ``declared`` are the cluster's node names
    (None skips that check). Errors name ``source``, the line (the header is line 1), the field."""
    names, records = read_csv(text, source, strip_header=True)
    if not names:
        raise InputError(f"{source}: empty node stream (expected a header {','.join(COLUMNS)})")
    missing = [c for c in COLUMNS if c not in names]
    if missing:
        raise InputError(f"{source}: line 1 (header): missing column(s) {', '.join(missing)}")
    unknown = [c for c in names if c not in COLUMNS]
    if unknown:  # read as nothing, a column the writer meant something by would be lost
        shown = ", ".join(repr(shorten(c)) for c in unknown[:5]) + (
            ", ..." if len(unknown) > 5 else ""
        )
        raise InputError(
            f"{source}: line 1 (header): unknown column(s) {shown} (a node stream has "
            f"{','.join(COLUMNS)})"
        )
    col = {c: names.index(c) for c in COLUMNS}
    known = None if declared is None else frozenset(declared)
    up: set[str] = set()
    seen: set[str] = set()
    events: list[NodeEvent] = []
    last = -math.inf
    for line, row in records:
        if not any(cell.strip() for cell in row):
            continue
        if len(row) != len(names):
            raise InputError(
                f"{source}: line {line}: {len(row)} fields, the header has {len(names)}"
            )
        events.append(_check_row(row, col, line, source, known, up, seen, last, cluster_source))
        last = events[-1].time
    if not events:
        raise InputError(f"{source}: no events (a node stream needs at least one join)")
    return NodeStream(tuple(events), end=events[-1].time, source=source)


def _check_row(
    row: list[str],
    col: Mapping[str, int],
    line: int,
    source: str,
    known: frozenset[str] | None,
    up: set[str],
    seen: set[str],
    last: float,
    cluster_source: str,
) -> NodeEvent:
    def bad(fieldname: str, why: str) -> InputError:
        return InputError(f"{source}: line {line}, field {fieldname}: {why}")

    raw_t, node, kind = (row[col[c]].strip() for c in COLUMNS)
    if not _DECIMAL.fullmatch(raw_t):  # float() also reads "1_0", "nan", "0x1p3" and "١٢"
        raise bad("time", f"not a number (got {shorten(raw_t)!r})")
    t = float(raw_t)
    if not math.isfinite(t) or not 0 <= t <= MAX_SECONDS:
        raise bad(
            "time",
            f"must be a finite number of seconds in [0, {MAX_SECONDS:g}] (got {shorten(raw_t)!r})",
        )
    if t < last:
        raise bad("time", f"times must be sorted: {shorten(raw_t)} comes after {last:g}")
    if not node:
        raise bad("node", "empty node name")
    if known is not None and node not in known:
        raise bad("node", f"node {shorten(node)!r} is not declared in {cluster_source}")
    if kind not in EVENTS:
        raise bad("event", f"must be join or leave (got {shorten(kind)!r})")
    if kind == "join":
        if node in up:
            raise bad(
                "event",
                f"node {shorten(node)!r} joins at {t:g} s while already in the pool (overlapping fragments)",
            )
        up.add(node)
    else:
        if node not in up:
            before = "before its first join" if node not in seen else "without rejoining"
            raise bad(
                "event",
                f"node {shorten(node)!r} leaves at {t:g} s {before} (a leave before a join)",
            )
        up.discard(node)
    seen.add(node)
    return NodeEvent(t, node, kind)


def load_node_stream(
    path: str | Path,
    declared: Collection[str] | None = None,
    cluster_source: str = "the cluster file",
) -> NodeStream:
    """Read and check a node-stream CSV file (see :func:`parse_node_stream`)."""
    p = Path(path)
    return parse_node_stream(
        read_text(p, "node stream"), str(p), declared, cluster_source=cluster_source
    )


def stream_rows(stream: NodeStream) -> list[tuple[float, str, str]]:
    """The stream's rows for :func:`hadar.core.io.write_csv` under :data:`COLUMNS`."""
    return [(e.time, e.node, e.event) for e in stream.events]
