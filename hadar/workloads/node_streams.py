"""A seedable generator of node-availability streams calibrated to the published statistics of
supercomputer nodes the main scheduler cannot fill (BFTrainer, Liu et al. 2022: §2.1, Table 1,
Fig. 1; MalleTrain, Ma et al. 2024: Fig. 9-11). The calibration is in docs/node-streams.md.

The model, per preset:

* *join events* arrive as a Poisson process (Table 1's INC/h, measured on the whole machine:
  on fewer nodes, only the events that touch them, :func:`rates_for`); each brings a geometric number of
  busy nodes into the pool, with the mean chosen so that the pool holds ``idle_share`` of the
  nodes on average (Table 1's ratio): mean nodes per join = idle nodes / mean fragment length /
  join rate;
* each node stays idle for a *fragment length* drawn from a log-normal whose two parameters solve
  Fig. 1's two published points exactly: 58 % of fragments are shorter than 10 minutes, and those
  short fragments hold about 10 % of the idle node-time (median 7.4 min, mean 22 min);
* *leave events* arrive as a second Poisson process (Table 1's DEC/h), and a node leaves at the
  leave event nearest its drawn end (after its join): the main scheduler takes several idle nodes
  at once when a job starts.

The stream starts with the pool as a 12-hour warm-up left it (one join event at time 0).
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from statistics import NormalDist

import numpy as np

from hadar.core.errors import InputError
from hadar.core.node_stream import SHORT_FRAGMENT_S, NodeEvent, NodeStream, build_stream


def lognormal_for(
    short_share: float, short_time_share: float, short_s: float
) -> tuple[float, float]:
    """``(mu, sigma)`` of a log-normal (of seconds) with ``P(L < short_s) = short_share`` whose
    values below ``short_s`` hold ``short_time_share`` of its mean: for a log-normal,
    ``P(L < x) = Phi(z)`` and that partial mean share is ``Phi(z - sigma)``, ``z = (ln x - mu)/sigma``."""
    z = NormalDist().inv_cdf(short_share)
    sigma = z - NormalDist().inv_cdf(short_time_share)
    return math.log(short_s) - z * sigma, sigma


_SUMMIT_MU, _SUMMIT_SIGMA = lognormal_for(0.58, 0.10, SHORT_FRAGMENT_S)


@dataclass(frozen=True)
class StreamPreset:
    """Published characteristics of one machine's unfillable nodes."""

    name: str
    join_events_per_hour: float
    leave_events_per_hour: float
    idle_share: float
    """Mean share of the nodes that are idle (Table 1's ratio)."""
    fragment_mu: float = _SUMMIT_MU
    """Log-normal fragment length: mean of ln(seconds)."""
    fragment_sigma: float = _SUMMIT_SIGMA
    machine_nodes: int = 0
    """Nodes of the whole machine the event rates were measured on (0: apply them as they are
    to any node count)."""

    @property
    def mean_fragment_s(self) -> float:
        return math.exp(self.fragment_mu + self.fragment_sigma**2 / 2)


PRESETS: dict[str, StreamPreset] = {
    "summit": StreamPreset("summit", 41.7, 28.6, 0.111, machine_nodes=4608),
    "theta": StreamPreset("theta", 6.3, 6.2, 0.125, machine_nodes=4392),
    "mira": StreamPreset("mira", 2.8, 2.4, 0.103, machine_nodes=49152),
}
"""Table 1 of BFTrainer, measured on the whole machines (Summit 4,608 nodes, Theta 4,392, Mira
49,152). Only Summit's fragment lengths are published (Fig. 1); Theta and Mira reuse that shape
(an assumption, docs/node-streams.md)."""


def subset_rate(per_hour: float, nodes_per_event: float, share: float) -> float:
    """Events per hour a random ``share`` of a machine's nodes sees when the whole machine has
    ``per_hour`` events of a geometric number of nodes each, ``nodes_per_event`` on average: an
    event counts when it touches the subset, ``1 - E[(1 - share)^K]``."""
    if share >= 1.0:
        return per_hour
    p, z = 1.0 / max(1.0, nodes_per_event), 1.0 - share
    return per_hour * (1.0 - p * z / (1.0 - (1.0 - p) * z))


def rates_for(machine: StreamPreset, nodes: int) -> tuple[float, float]:
    """(join, leave) events per hour on ``nodes`` of ``machine``: the whole machine's rates
    thinned to the events that touch a subset of that size (:func:`subset_rate`; the machine's
    mean nodes per event follow from its idle share, mean fragment and rate)."""
    m = machine
    if m.machine_nodes <= 0 or nodes >= m.machine_nodes:
        return m.join_events_per_hour, m.leave_events_per_hour
    idle_per_hour = m.idle_share * m.machine_nodes / (m.mean_fragment_s / 3600)
    share = nodes / m.machine_nodes
    return tuple(  # type: ignore[return-value]
        subset_rate(r, idle_per_hour / r, share)
        for r in (m.join_events_per_hour, m.leave_events_per_hour)
    )


WARMUP_S = 12 * 3600.0


def preset(name: str) -> StreamPreset:
    """A preset by name; unknown names are an InputError."""
    try:
        return PRESETS[name]
    except KeyError:
        raise InputError(
            f"--preset: unknown node-stream preset {name!r} (known: {', '.join(sorted(PRESETS))})"
        ) from None


def generate_stream(
    nodes: Sequence[str],
    hours: float,
    seed: int = 0,
    machine: StreamPreset = PRESETS["summit"],
    source: str = "generated node stream",
) -> NodeStream:
    """A stream over ``nodes`` lasting ``hours``, seeded (a node never idle is not named).
    Events at the same time share an event (the papers' definition). The preset's event rates
    are its whole machine's, thinned to those that touch ``len(nodes)`` of its nodes
    (:func:`rates_for`)."""
    if not nodes:
        raise InputError("node stream: the cluster has no nodes")
    if not 0 < hours <= 24 * 366:
        raise InputError(f"--hours: must be in (0, 8784] (got {hours:g})")
    m = machine
    rng = np.random.default_rng(seed)
    start, end = -WARMUP_S, hours * 3600.0
    idle_nodes = m.idle_share * len(nodes)
    join_rate, leave_rate = rates_for(m, len(nodes))
    per_join = max(1.0, idle_nodes / (m.mean_fragment_s / 3600) / join_rate)
    leaves = _poisson_times(rng, leave_rate, start, end + 30 * 86400.0)
    joins = _poisson_times(rng, join_rate, start, end)
    busy = list(range(len(nodes)))  # indices, kept sorted: choices depend only on the seed
    pending: list[tuple[float, int]] = []  # (leave time, node index)
    events: list[NodeEvent] = []
    for t in joins:
        while pending and pending[0][0] <= t:
            t_leave, i = heapq.heappop(pending)
            bisect.insort(busy, i)
            if t_leave > 0:
                events.append(NodeEvent(t_leave, nodes[i], "leave"))
        k = min(len(busy), int(rng.geometric(1.0 / per_join)))
        if k == 0:
            continue
        picked = sorted(rng.choice(len(busy), size=k, replace=False).tolist(), reverse=True)
        lengths = rng.lognormal(m.fragment_mu, m.fragment_sigma, size=k)
        for pos, length in zip(picked, lengths, strict=True):
            i = busy.pop(pos)
            heapq.heappush(pending, (_snap(leaves, t, t + float(length)), i))
            if t > 0:
                events.append(NodeEvent(t, nodes[i], "join"))
    return _assemble(events, pending, nodes, end, source)


def _assemble(
    events: list[NodeEvent],
    pending: list[tuple[float, int]],
    nodes: Sequence[str],
    end: float,
    source: str,
) -> NodeStream:
    for t_leave, i in pending:
        if 0 < t_leave <= end:
            events.append(NodeEvent(t_leave, nodes[i], "leave"))
    kept = [e for e in events if e.time <= end]
    # a node whose first event is a leave was idle at time 0: it joins at 0
    first: dict[str, NodeEvent] = {}
    for e in sorted(kept, key=lambda e: (e.time, e.event != "leave")):
        first.setdefault(e.node, e)
    open_at_end = {nodes[i] for t_leave, i in pending if t_leave > end}
    starters = {n for n, e in first.items() if e.event == "leave"}
    starters |= {n for n in open_at_end if n not in first}
    kept += [NodeEvent(0.0, n, "join") for n in sorted(starters)]
    return build_stream(kept, end=end, source=source)


def _poisson_times(
    rng: np.random.Generator, per_hour: float, start: float, end: float
) -> list[float]:
    """Event times of a Poisson process of ``per_hour`` on ``[start, end)``, rounded to 0.1 s."""
    n = int((end - start) / 3600 * per_hour * 1.2 + 50)
    gaps = rng.exponential(3600.0 / per_hour, size=n)
    times = start + np.cumsum(gaps)
    while times[-1] < end:
        more = times[-1] + np.cumsum(rng.exponential(3600.0 / per_hour, size=n))
        times = np.concatenate([times, more])
    return [round(float(x), 1) for x in times[times < end]]


def _snap(leaves: list[float], joined: float, target: float) -> float:
    """The leave-event time nearest ``target`` that comes after ``joined``."""
    i = bisect.bisect_left(leaves, target)
    after = leaves[i] if i < len(leaves) else target
    before = leaves[i - 1] if i > 0 and leaves[i - 1] > joined else None
    if before is not None and target - before < after - target:
        return before
    return after


def scaled(machine: StreamPreset, **changes: float) -> StreamPreset:
    """A preset with some numbers changed (e.g. ``idle_share=0.5`` for a small test pool)."""
    return replace(machine, **changes)  # type: ignore[arg-type]
