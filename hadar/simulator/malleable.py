"""Event-driven replay of malleable Trainers on a node stream, as BFTrainer (§4.3) and MalleTrain
(§4.1) evaluate: at every event (nodes join or leave, a Trainer arrives, completes or finishes
a profiling step) the allocator re-solves BFTrainer's MILP over the idle nodes and rescales the
Trainers; between events each Trainer progresses at its true throughput on its node count.

Systems (``system``):

* ``bftrainer``: the MILP knows every Trainer's true scalability (BFTrainer "exact").
* ``freetrain``: the same MILP, told FreeTrain's guess (``malletrain.jpa``).
* ``malletrain``: a new Trainer is first profiled by JPA (inverse-order schedule: one scale-up to
  its largest profiled scale, then a scale-down per measured scale, ``measure_s`` at each, on
  nodes taken from the idle ones and, if needed, preempted from the largest running Trainers);
  the MILP then uses the measured points. Admission is MalleTrain's batch admission (``pj_max``).

Costs, charged as pauses during which the Trainer's nodes do no work (BFTrainer Fig. 3):
a start or scale-up pauses the Trainer ``r_up`` seconds on its new node count, a scale-down
``r_dw``; a node that leaves without warning forces a scale-down (``r_dw`` on the nodes left) or,
below the Trainer's minimum, stops it. ``lost_rescale`` and ``lost_preempt`` count those
node-seconds. A Trainer keeps its progress across rescales (Elastic Horovod keeps the model in
memory) and is never migrated (the MILP forbids it).

A leave, as BFTrainer models it (§3, Fig. 3; its Trainers run Elastic Horovod, which rescales
"without requiring a restart or resuming from checkpoints"), costs only that forced scale-down.
``checkpoint_s`` is the other model, an option: a Trainer checkpoints every ``checkpoint_s``
seconds of work, and a node leaving without warning loses the work since the last checkpoint
(a planned rescale checkpoints first, so it loses nothing); ``lost_work`` counts those samples.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from bftrainer.milp import DEFAULT_T_FWD_S, Trainer, assign_nodes, solve
from hadar.core.node_stream import NodeStream
from hadar.workloads.malleable import MalleableJob
from malletrain.jpa import (
    admit_batch,
    can_profile,
    extrapolated,
    freetrain_guess,
    profile_scales,
    profile_schedule,
)

SYSTEMS = ("bftrainer", "freetrain", "malletrain")
DEFAULT_PJ_MAX = 10
"""Concurrent Trainers (BFTrainer §5.2 limits them to 10)."""
DEFAULT_MEASURE_S = 60.0
"""Seconds JPA measures each profiled scale (our choice: enough for a few hundred steps)."""


@dataclass(frozen=True)
class ReplayConfig:
    system: str = "bftrainer"
    t_fwd: float = DEFAULT_T_FWD_S
    pj_max: int = DEFAULT_PJ_MAX
    measure_s: float = DEFAULT_MEASURE_S
    time_limit: float = 5.0
    hours: float | None = None
    """Replay length; None = the stream's length."""
    checkpoint_s: float | None = None
    """Seconds of work between a Trainer's checkpoints; a leave then loses the work since the
    last one. None: a leave loses no work (BFTrainer's model, state kept in memory)."""

    def __post_init__(self) -> None:
        if self.system not in SYSTEMS:
            raise ValueError(f"system must be one of {SYSTEMS}")
        if self.checkpoint_s is not None and not self.checkpoint_s > 0:
            raise ValueError("checkpoint_s must be positive (or None: no work lost on a leave)")


@dataclass(frozen=True)
class ReplayResult:
    system: str
    hours: float
    samples: float
    """Samples processed by all Trainers (useful work)."""
    completed: int
    lost_rescale_node_s: float
    lost_preempt_node_s: float
    idle_node_s: float
    """Node-seconds in the pool (the resource integral, Eq. 17)."""
    decisions: int
    solve_seconds: float
    profiled: int = 0
    time_limited: int = 0
    """Decisions whose MILP hit its time limit (each kept the best map in hand)."""
    lost_work: float = 0.0
    """Samples lost to leaves since the Trainers' last checkpoints (``checkpoint_s``); not in
    ``samples``."""

    @property
    def throughput(self) -> float:
        """Aggregate useful throughput, samples per second of stream."""
        return self.samples / (self.hours * 3600)


@dataclass
class _Run:
    job: MalleableJob
    nodes: list[str] = field(default_factory=list)
    done: float = 0.0
    paused_until: float = 0.0
    measured: dict[int, float] = field(default_factory=dict)
    profile: list[int] = field(default_factory=list)
    """Scales JPA still has to measure (the current one first)."""
    step_end: float | None = None
    since_s: float = 0.0
    """Seconds of work since the last checkpoint (``checkpoint_s``)."""
    since_samples: float = 0.0
    """Samples processed in those seconds: what a leave loses."""

    def rate(self) -> float:
        return _interp(self.job.points, len(self.nodes))

    def work(self, seconds: float, gained: float, checkpoint_s: float | None) -> None:
        """Record ``seconds`` of work at a constant rate that processed ``gained`` samples."""
        if checkpoint_s is None or seconds <= 0:
            return
        total = self.since_s + seconds
        if total < checkpoint_s:
            self.since_s, self.since_samples = total, self.since_samples + gained
        else:  # checkpoints during this stretch: only the part after the last one is at risk
            self.since_s = total % checkpoint_s
            self.since_samples = gained * self.since_s / seconds

    def checkpointed(self) -> None:
        """A planned rescale (or a start) saves the state first: nothing is at risk."""
        self.since_s = self.since_samples = 0.0

    def roll_back(self) -> float:
        """A node left without warning: back to the last checkpoint; the samples lost."""
        lost = min(self.since_samples, self.done)
        self.done -= lost
        self.checkpointed()
        return lost


def _interp(points: Sequence[tuple[int, float]], n: float) -> float:
    if n <= 0:
        return 0.0
    xs, ys = zip(*((0, 0.0), *points), strict=True)
    return float(np.interp(n, xs, ys))


def replay(
    stream: NodeStream,
    nodes: Sequence[str],
    jobs: Sequence[MalleableJob],
    config: ReplayConfig | None = None,
) -> ReplayResult:
    """Replay ``jobs`` on the idle ``nodes`` of ``stream`` under ``config.system``."""
    cfg = config or ReplayConfig()
    end = (cfg.hours * 3600.0) if cfg.hours is not None else stream.end
    guess_rates = [j.points[0][1] / j.points[0][0] for j in jobs]
    pending = sorted(jobs, key=lambda j: (j.arrival, j.key))
    waiting: list[MalleableJob] = []
    runs: dict[int, _Run] = {}
    t = 0.0
    samples = lost_rescale = lost_preempt = lost_work = idle = solve_s = 0.0
    completed = decisions = profiled = time_limited = 0
    while t < end:
        pool = list(stream.available(nodes, t))
        up = set(pool)
        # nodes that left: preemption without warning
        for run in runs.values():
            gone = [n for n in run.nodes if n not in up]
            if gone:
                lost = run.roll_back()
                lost_work += lost
                samples -= lost
                run.nodes = [n for n in run.nodes if n in up]
                if len(run.nodes) < run.job.n_min:
                    run.nodes = []
                else:
                    run.paused_until = max(run.paused_until, t) + run.job.r_dw
                    lost_preempt += run.job.r_dw * len(run.nodes)
                if run.profile:
                    _profile_preempted(run, cfg.measure_s)
        while pending and pending[0].arrival <= t:
            waiting.append(pending.pop(0))
        admitted, rest = admit_batch(len(runs), [j.key for j in waiting], cfg.pj_max)
        by_key = {j.key: j for j in waiting}
        for key in admitted:
            runs[key] = _Run(by_key[key])
        waiting = [by_key[k] for k in rest]
        if cfg.system == "malletrain":
            box = [0.0]
            profiled += _profile_steps(runs, pool, t, cfg.measure_s, box)
            lost_rescale += box[0]
        # the MILP over the idle nodes not held by profiling runs
        profiling = {n for r in runs.values() if r.profile for n in r.nodes}
        milp_pool = [n for n in pool if n not in profiling]
        trainers = []
        for key, run in sorted(runs.items()):
            if run.profile:
                continue
            points = _known_points(run, cfg.system, guess_rates)
            if points is None:
                continue
            trainers.append(
                Trainer(
                    key,
                    run.job.n_min,
                    run.job.n_max,
                    points,
                    len(run.nodes),
                    run.job.r_up,
                    run.job.r_dw,
                )
            )
        if trainers:
            result = solve(trainers, len(milp_pool), cfg.t_fwd, time_limit=cfg.time_limit)
            decisions += 1
            solve_s += result.seconds
            time_limited += result.time_limit_hit
            mapping = assign_nodes(
                result.counts, {tr.key: runs[tr.key].nodes for tr in trainers}, milp_pool
            )
            for tr in trainers:
                run, new = runs[tr.key], list(mapping[tr.key])
                if len(new) > len(run.nodes):
                    run.paused_until = t + run.job.r_up
                    lost_rescale += run.job.r_up * len(new)
                elif 0 < len(new) < len(run.nodes):
                    run.paused_until = t + run.job.r_dw
                    lost_rescale += run.job.r_dw * len(new)
                if len(new) != len(run.nodes):
                    run.checkpointed()
                run.nodes = new
        # the next event
        nxt = [end]
        following = stream.next_time(t)
        if following is not None:
            nxt.append(following)
        if pending:
            nxt.append(max(pending[0].arrival, t))
        for run in runs.values():
            if run.step_end is not None:
                nxt.append(run.step_end)
            rate = run.rate()
            if rate > 0:
                nxt.append(max(t, run.paused_until) + (run.job.samples - run.done) / rate)
        t_next = max(min(nxt), t + 1e-6)
        idle += len(pool) * (t_next - t)
        for key in sorted(runs):
            run = runs[key]
            work = max(0.0, t_next - max(t, run.paused_until))
            gained = min(run.rate() * work, run.job.samples - run.done)
            run.done += gained
            run.work(work, gained, cfg.checkpoint_s)
            samples += gained
            if run.done >= run.job.samples - 1e-6:
                completed += 1
                del runs[key]
        t = t_next
    return ReplayResult(
        cfg.system,
        end / 3600,
        samples,
        completed,
        lost_rescale,
        lost_preempt,
        idle,
        decisions,
        solve_s,
        profiled,
        time_limited,
        lost_work,
    )


def _known_points(
    run: _Run, system: str, guess_rates: Sequence[float]
) -> tuple[tuple[int, float], ...] | None:
    """What the MILP is told about ``run``'s scalability (None: not schedulable yet)."""
    if system == "bftrainer":
        return run.job.points
    if system == "freetrain":
        return freetrain_guess(guess_rates, run.job.n_max)
    if not run.measured:
        return None
    return extrapolated(list(run.measured.items()), run.job.n_max)


def _profile_preempted(run: _Run, measure_s: float) -> None:
    """A profiling run lost nodes (it already paid its forced scale-down): the measurement at
    the current scale is lost; with nodes for its next scale it goes on there, keeping what it
    measured, else it is profiled again from the top later (its nodes go back to the pool)."""
    nxt = run.profile[1:]
    if nxt and run.nodes and len(run.nodes) >= nxt[0]:
        run.profile = nxt
        run.nodes = run.nodes[: nxt[0]]
        run.step_end = run.paused_until + measure_s
        return
    run.profile, run.step_end, run.nodes = [], None, []
    run.measured.clear()


def _profile_steps(
    runs: Mapping[int, _Run], pool: Sequence[str], t: float, measure_s: float, lost: list[float]
) -> int:
    """Advance JPA: finish due measurement steps (record the rate, scale down to the next
    scale) and start profiling new Trainers; returns how many Trainers finished profiling."""
    finished = 0
    for run in runs.values():
        if run.step_end is not None and t >= run.step_end - 1e-9:
            run.measured[len(run.nodes)] = run.rate()
            run.profile.pop(0)
            if run.profile:
                run.nodes = run.nodes[: run.profile[0]]
                run.checkpointed()
                run.paused_until = t + run.job.r_dw
                lost[0] += run.job.r_dw * len(run.nodes)
                run.step_end = run.paused_until + measure_s
            else:
                run.step_end = None
                finished += 1
    held = {n for r in runs.values() for n in r.nodes}
    for key in sorted(runs):
        run = runs[key]
        if run.measured or run.profile:
            continue
        scales = profile_scales(run.job.n_min, run.job.n_max, len(pool) // 2 or 1)
        if not scales:
            continue
        top = profile_schedule(scales)[0]
        free = [n for n in pool if n not in held]
        donors = sorted(
            (r for r in runs.values() if r.nodes and not r.profile),
            key=lambda r: (-len(r.nodes), r.job.key),
        )
        spare = sum(max(0, len(d.nodes) - d.job.n_min) for d in donors)
        if not can_profile(top, len(free), spare):
            continue  # back to the queue until its largest scale fits
        for donor in donors:  # preempt from the largest Trainers: a forced scale-down each
            if len(free) >= top:
                break
            before = len(donor.nodes)
            while len(free) < top and len(donor.nodes) > donor.job.n_min:
                free.append(donor.nodes.pop())
            if len(donor.nodes) < before:
                donor.checkpointed()
                donor.paused_until = max(donor.paused_until, t) + donor.job.r_dw
                lost[0] += donor.job.r_dw * len(donor.nodes)
        run.nodes = free[:top]
        held |= set(run.nodes)
        run.profile = [s for s in profile_schedule(scales) if s <= len(run.nodes)]
        run.nodes = run.nodes[: run.profile[0]]
        run.checkpointed()
        run.paused_until = t + run.job.r_up
        lost[0] += run.job.r_up * len(run.nodes)
        run.step_end = run.paused_until + measure_s
    return finished


def static_rate(jobs: Sequence[MalleableJob], nodes: int, pj_max: int = DEFAULT_PJ_MAX) -> float:
    """Samples per second the first ``pj_max`` of ``jobs`` reach on ``nodes`` static nodes
    shared to maximise it (each node to the Trainer it speeds up most, within ``n_max``): the
    baseline A_s of BFTrainer's resource utilisation efficiency (§4.1.2), where no node ever
    joins or leaves and nothing is rescaled."""
    held = dict.fromkeys(range(min(pj_max, len(jobs))), 0)
    rate = 0.0
    for _ in range(max(0, nodes)):
        gains = {
            i: _interp(jobs[i].points, k + 1) - _interp(jobs[i].points, k)
            for i, k in held.items()
            if k < jobs[i].n_max
        }
        if not gains:
            break
        best = max(gains, key=lambda i: (gains[i], -i))
        held[best] += 1
        rate += gains[best]
    return rate


def utilisation_efficiency(
    result: ReplayResult, jobs: Sequence[MalleableJob], pj_max: int = DEFAULT_PJ_MAX
) -> float:
    """BFTrainer's U = A_e / A_s (§4.1.2): the samples the replay processed over those the same
    Trainers would process on the pool's average node count held static for as long."""
    seconds = result.hours * 3600
    n_eq = result.idle_node_s / seconds if seconds > 0 else 0.0
    static = static_rate(jobs, round(n_eq), pj_max) * seconds
    return result.samples / static if static > 0 else 0.0
