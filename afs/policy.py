"""AFS (Hwang et al., NSDI 2021): elastic GPU shares for average JCT, re-decided at churn events.

The shares come from AFS-L (``afs/share.py``, Algorithm 1): GPUs handed out one at a
time by the pairwise rule Eq. 3 over each job's throughput at its share and one more GPU and its
remaining work. This module turns shares into rounds:

* **Churn events, round by round.** The harness decides once per round; AFS re-decides when the
  set of jobs (an arrival or a completion) or the cluster changed since its last decision, and
  keeps its shares otherwise (the paper: "jobs with a positive share run until the next churn
  event"). Events inside one round are handled together at the next round boundary, so a job
  arriving mid-round waits for it (as with every policy of the harness). The shares and the job
  set they were computed for are the policy's state (``Policy.state``).
* **Throughput curves** (docs/baselines.md, "AFS"): a job's rate at ``g`` GPUs of one type is the
  throughput model's rate (``ThroughputModel.run_rate``: goodput for Pollux's applications at
  their progress, steps/s from Gavel's table interpolated between measured counts,
  ``estimators/gang_sizes.py``) on ``g`` GPUs of that type on the fewest nodes, evaluated at
  1, 2, 4, ... GPUs, the job's ``min_gpus`` and ``max_gpus``, and linearly interpolated between.
  The job keeps its own batch size (AFS's jobs do: "the same batch size throughout training").
  Remaining work is ``remaining_steps`` in the same unit (samples at the initial batch for
  Pollux's applications). A rigid job (``min_gpus == max_gpus``) gets its whole gang or nothing.
* **Placement.** A job whose share did not change keeps its GPUs; a shrinking job keeps part of
  them (it leaves the nodes where it has fewest first); a growing job keeps its GPUs and takes
  the extra on the fewest nodes; the others are placed largest first on the fewest nodes,
  best-fit. Any change of placement is a re-allocation the simulator charges its restart delay
  for (CoDDL's cheap rescaling is not modelled).

Two policies:

* ``afs``: the paper's AFS-L, which assumes identical GPUs. On a cluster of several types
  (``pools=one``, the default) it sees one pool of all GPUs, each job's curve being its
  count-weighted mean over the types, and places shares on any GPUs (heterogeneity-unaware, like
  Tiresias); with ``pools=per-type`` each GPU type is its own AFS cluster and a job joins, when it
  first starts, the type with the fewest jobs per GPU (ties: its fastest), for good.
* ``afs-het``: heterogeneous AFS: the rule over (job, GPU type) pairs with per-type throughputs;
  a job starts on the type its pair won on and grows there.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from afs.share import ShareJob, afs_p_shares, afs_shares
from hadar.core.cluster import Cluster
from hadar.core.jobs import JobStatus, Placement
from hadar.core.threads import one_blas_thread
from hadar.core.validation import MAX_SECONDS
from hadar.placement import best_fit_costs, check_seed, fewest_nodes, node_rank, runnable_cells
from hadar.policy import Assignment, Policy, PolicyInfo, RoundContext, RoundPlan, register_policy

POOLS = ("one", "per-type")


@dataclass(frozen=True)
class AfsConfig:
    pools: str = "one"
    """``afs`` on several GPU types: ``one`` pool of all GPUs, or ``per-type`` pools."""
    seed: int = 0
    """Seed of the node tie-break order used by placement."""
    restart_aware: bool = False
    """Not the paper's rule (off by default): charge each job's re-allocation delay in Eq. 3,
    its rate at a share other than its current one (any share, for a preempted job) being its
    effective rate over its remaining work with the delay paid (:func:`charge_restart`)."""

    def __post_init__(self) -> None:
        if self.pools not in POOLS:
            raise ValueError(f"pools must be one of {', '.join(POOLS)}")
        check_seed(self.seed)


def sample_counts(lo: int, hi: int) -> list[int]:
    """GPU counts a curve is evaluated at: ``lo``, ``hi`` and the powers of two between."""
    out = {lo, hi}
    g = 1
    while g < hi:
        if g > lo:
            out.add(g)
        g *= 2
    return sorted(out)


def fill_curve(points: Mapping[int, float], hi: int) -> tuple[float, ...]:
    """``curve[g]`` for g = 0..hi: 0 below the first point, linear between points."""
    counts = sorted(points)
    curve = [0.0] * (hi + 1)
    for a, b in zip(counts, counts[1:], strict=False):
        for g in range(a, b):
            curve[g] = points[a] + (g - a) / (b - a) * (points[b] - points[a])
    curve[counts[-1]] = points[counts[-1]]
    return tuple(curve)


def consolidated(cluster: Cluster, gtype: str, g: int) -> Placement | None:
    """``g`` GPUs of type ``gtype`` on the fewest nodes (most such GPUs first, then node order),
    or None if the cluster has fewer."""
    k = cluster.type_index[gtype]
    cap = cluster.capacity[:, k]
    out: dict[str, dict[str, int]] = {}
    for h in sorted(range(len(cap)), key=lambda h: (-cap[h], h)):
        if g <= 0:
            break
        take = int(min(cap[h], g))
        if take:
            out[cluster.node_names[h]] = {gtype: take}
            g -= take
    return out if g <= 0 else None


def job_curve(ctx: RoundContext, st: JobStatus, gtype: str) -> tuple[float, ...]:
    """The job's rate at 0..max_gpus GPUs of ``gtype`` (module docstring); all zero where it
    cannot run."""
    lo, hi = st.job.gpu_range
    hi_here = min(hi, ctx.cluster.gpus_of_type(gtype))
    if hi_here < lo:
        return (0.0,) * (lo + 1)
    points = {g: _rate_at(ctx, st, gtype, g) for g in sample_counts(lo, hi_here)}
    return fill_curve(points, hi_here)


def _rate_at(ctx: RoundContext, st: JobStatus, gtype: str, g: int) -> float:
    placement = consolidated(ctx.cluster, gtype, g)
    assert placement is not None
    return ctx.throughput.run_rate(st.job, placement, ctx.cluster, st.done_steps).rate


class CurveCache:
    """Curves by (job type, GPU range, batch, GPU type, cluster, throughput model), scaled per
    decision by the job's rate at its ``min_gpus``: a job keeps its batch size, so its goodput
    at g GPUs is its throughput at g (independent of progress) times its statistical efficiency
    at that batch (independent of g), and only the efficiency moves with progress."""

    def __init__(self) -> None:
        self._shapes: dict[tuple[Hashable, ...], tuple[float, ...]] = {}

    def curve(self, ctx: RoundContext, st: JobStatus, gtype: str) -> tuple[float, ...]:
        job = st.job
        key = (
            job.job_type,
            job.gpu_range,
            job.num_gpus,
            job.batch_range,
            tuple(sorted((k, repr(v)) for k, v in job.spec.items() if k != "name")),
            gtype,
            ctx.cluster.gpu_types,
            tuple(ctx.cluster.capacity.ravel().tolist()),
            id(ctx.throughput),
        )
        lo = job.gpu_range[0]
        shape = self._shapes.get(key)
        if shape is None:
            shape = job_curve(ctx, st, gtype)
            base = shape[lo] if len(shape) > lo else 0.0
            shape = tuple(x / base for x in shape) if base > 0 else shape
            self._shapes[key] = shape
        if len(shape) <= lo or shape[lo] <= 0:
            return shape
        scale = _rate_at(ctx, st, gtype, lo)
        return tuple(x * scale for x in shape)


@register_policy
class AfsPolicy(Policy):
    """AFS-L shares re-decided at churn events (module docstring); on several GPU types, the
    paper's identical-GPU view (one pool or a pool per type)."""

    name = "afs"
    info = PolicyInfo(title="AFS", colour="#6baed6")
    config_class = AfsConfig
    heterogeneous = False

    def __init__(self, config: AfsConfig | None = None, **knobs: Any) -> None:
        self.config = config or AfsConfig(**knobs)
        self._shares: dict[int, tuple[str, int]] = {}
        self._signature: list[Any] | None = None
        self._pool: dict[int, str] = {}
        self._curves = CurveCache()

    def state(self) -> dict[str, Any]:
        return {
            "shares": {str(j): [k, g] for j, (k, g) in sorted(self._shares.items())},
            "signature": self._signature,
            "pool": {str(j): k for j, k in sorted(self._pool.items())},
        }

    def restore(self, state: Mapping[str, Any]) -> None:
        if not state:
            return
        self._shares = {int(j): (str(v[0]), int(v[1])) for j, v in state["shares"].items()}
        self._signature = state["signature"]
        self._pool = {int(j): str(k) for j, k in state["pool"].items()}

    # -- shares --------------------------------------------------------------------------
    def signature(self, ctx: RoundContext) -> list[Any]:
        """What the shares depend on besides progress: the jobs and the cluster (a change is a
        churn event)."""
        return [
            sorted(s.job_id for s in ctx.jobs),
            [[n.name, sorted(n.gpus.items())] for n in ctx.cluster.nodes],
        ]

    def decide(self, ctx: RoundContext) -> RoundPlan:
        with one_blas_thread():  # its fits and searches make many tiny BLAS calls
            return self._decide(ctx)

    def _decide(self, ctx: RoundContext) -> RoundPlan:
        signature = self.signature(ctx)
        recomputed = signature != self._signature
        if recomputed:
            self._shares = self.shares(ctx)
            self._signature = signature
        assignments = self.place(ctx, self._shares)
        info = {
            "recomputed": recomputed,
            "running": len(assignments),
            "gpus_shared": sum(g for _, g in self._shares.values()),
        }
        return RoundPlan(tuple(sorted(assignments, key=lambda a: a.job_id)), info)

    def shares(self, ctx: RoundContext) -> dict[int, tuple[str, int]]:
        """``{job id: (GPU type, GPUs)}`` for the jobs with a positive share."""
        types = list(ctx.cluster.gpu_types)
        counts = [ctx.cluster.gpus_of_type(k) for k in types]
        curves = {s.job_id: [self._curves.curve(ctx, s, k) for k in types] for s in ctx.jobs}
        if self.heterogeneous or len(types) == 1:
            return _solve(ctx.jobs, self.charged(ctx, curves, types), types, counts)
        if self.config.pools == "one":
            pooled = {j: [_mean_curve(c, counts)] for j, c in curves.items()}
            shares = _solve(ctx.jobs, self.charged(ctx, pooled, ["*"]), ["*"], [sum(counts)])
            return {j: ("*", g) for j, (_, g) in shares.items()}
        return self._per_type(ctx, self.charged(ctx, curves, types), types, counts)

    def charged(
        self,
        ctx: RoundContext,
        curves: Mapping[int, Sequence[tuple[float, ...]]],
        pools: Sequence[str],
    ) -> dict[int, list[tuple[float, ...]]]:
        """``curves`` (per job, one per pool: a GPU type, or ``*`` for all GPUs) with
        ``restart_aware``: each job's re-allocation delay charged (:func:`charge_restart`) at
        every share but the one it holds now, on the pool it holds it on; a job that has done no
        step starts free (as the simulator charges it). Without it, ``curves`` unchanged."""
        if not self.config.restart_aware:
            return {j: list(c) for j, c in curves.items()}
        out: dict[int, list[tuple[float, ...]]] = {}
        for s in ctx.jobs:
            mine = curves[s.job_id]
            if s.done_steps <= 0:
                out[s.job_id] = list(mine)
                continue
            delay = ctx.restart_penalty_s if s.job.restart_s is None else s.job.restart_s
            held = ctx.current.get((s.job_id, 0)) or {}
            held_types = {k for per in held.values() for k, c in per.items() if c > 0}
            count = sum(c for per in held.values() for c in per.values())
            out[s.job_id] = [
                charge_restart(
                    c, s.remaining_steps, delay, count if pool == "*" or {pool} == held_types else 0
                )
                for c, pool in zip(mine, pools, strict=True)
            ]
        return out

    def pooled_curves(self, ctx: RoundContext) -> dict[int, tuple[float, ...]]:
        """Each job's curve on all the cluster's GPUs seen as one type (count-weighted mean)."""
        types = list(ctx.cluster.gpu_types)
        counts = [ctx.cluster.gpus_of_type(k) for k in types]
        return {
            s.job_id: _mean_curve([self._curves.curve(ctx, s, k) for k in types], counts)
            for s in ctx.jobs
        }

    def _per_type(
        self,
        ctx: RoundContext,
        curves: Mapping[int, list[tuple[float, ...]]],
        types: list[str],
        counts: list[int],
    ) -> dict[int, tuple[str, int]]:
        self._pool = {s.job_id: self._pool[s.job_id] for s in ctx.jobs if s.job_id in self._pool}
        members = {k: sum(1 for v in self._pool.values() if v == k) for k in types}
        for s in ctx.jobs:
            if s.job_id in self._pool:
                continue
            ok = [i for i, k in enumerate(types) if usable(curves[s.job_id][i], s)]
            if not ok:
                continue
            i = min(ok, key=lambda i: (members[types[i]] / counts[i], -curves[s.job_id][i][-1]))
            self._pool[s.job_id] = types[i]
            members[types[i]] += 1
        out: dict[int, tuple[str, int]] = {}
        for i, k in enumerate(types):
            mine = [s for s in ctx.jobs if self._pool.get(s.job_id) == k]
            out.update(
                _solve(mine, {s.job_id: [curves[s.job_id][i]] for s in mine}, [k], [counts[i]])
            )
        return out

    # -- placement -----------------------------------------------------------------------
    def place(self, ctx: RoundContext, shares: Mapping[int, tuple[str, int]]) -> list[Assignment]:
        cluster = ctx.cluster
        free = cluster.capacity.copy()
        rank = node_rank(len(cluster.nodes), self.config.seed)
        statuses = {s.job_id: s for s in ctx.jobs}
        kept: dict[int, np.ndarray] = {}
        for j, (k, g) in shares.items():
            y = _current(ctx, j)
            if y is None:
                continue
            mask = self._cells(ctx, statuses[j], k)
            y = np.where(mask, y, 0)  # GPUs of other types are given up
            if int(y.sum()) > g:
                y = _shrink(y, g)
            kept[j] = y
            free -= y
        out: list[Assignment] = []
        for j, (k, g) in sorted(shares.items(), key=lambda e: (-e[1][1], e[0])):
            y = kept.get(j, np.zeros_like(free))
            need = g - int(y.sum())
            if need > 0:
                mask = self._cells(ctx, statuses[j], k)
                extra = fewest_nodes(free, mask, need, best_fit_costs(free, rank))
                if extra is None:  # the type's free GPUs are fewer than its share: cannot happen
                    free += y
                    continue
                free -= extra
                y = y + extra
            out.append(Assignment(j, cluster.placement_from_matrix(y)))
        return out

    def _cells(self, ctx: RoundContext, st: JobStatus, gtype: str) -> np.ndarray:
        mask = runnable_cells(st.job, ctx.cluster, ctx.throughput)
        if gtype != "*":
            column = np.zeros_like(mask)
            column[:, ctx.cluster.type_index[gtype]] = True
            mask = mask & column
        return mask


@register_policy
class AfsHeterogeneousPolicy(AfsPolicy):
    """Heterogeneous AFS: the rule over (job, GPU type) pairs."""

    name = "afs-het"
    info = PolicyInfo(title="AFS-het", colour="#08306b")
    heterogeneous = True


def charge_restart(
    curve: Sequence[float], remaining: float, delay: float, kept: int
) -> tuple[float, ...]:
    """A job's rates with a re-allocation delay charged: at every share but ``kept`` (the one it
    holds; 0: none) its rate becomes its effective rate over its remaining work,
    ``remaining / (remaining / p + delay)``, so Eq. 3, which compares the jobs' completion
    times through their rates, counts the delay each re-allocation adds to the job's JCT."""
    return tuple(
        p if g == kept or p <= 0 else remaining / (remaining / p + delay)
        for g, p in enumerate(curve)
    )


def usable(curve: Sequence[float], st: JobStatus) -> bool:
    lo = st.job.gpu_range[0]
    return len(curve) > lo and curve[lo] > 0


def _mean_curve(curves: Sequence[tuple[float, ...]], counts: Sequence[int]) -> tuple[float, ...]:
    """The count-weighted mean of a job's per-type curves (what a type-blind scheduler expects)."""
    n = max(len(c) for c in curves)
    total = float(sum(counts))
    return tuple(
        sum(c[g] * w for c, w in zip(curves, counts, strict=True) if g < len(c)) / total
        for g in range(n)
    )


def _solve(
    jobs: Sequence[JobStatus],
    curves: Mapping[int, Sequence[tuple[float, ...]]],
    types: Sequence[str],
    counts: Sequence[int],
) -> dict[int, tuple[str, int]]:
    ids = [s.job_id for s in jobs]
    share_jobs = [
        ShareJob(max(s.remaining_steps, 1e-9), tuple(curves[s.job_id]), s.job.gpu_range[0])
        for s in jobs
    ]
    held = afs_shares(share_jobs, counts)
    return {j: (types[k], g) for j, (k, g) in zip(ids, held, strict=True) if g > 0}


def _current(ctx: RoundContext, job_id: int) -> np.ndarray | None:
    placement = ctx.current.get((job_id, 0))
    if not placement:
        return None
    try:
        return ctx.cluster.placement_matrix(placement)
    except KeyError:  # a node or type gone
        return None


def _shrink(y: np.ndarray, g: int) -> np.ndarray:
    """Keep ``g`` of the GPUs in ``y``, leaving the nodes where the job has fewest first."""
    y = y.copy()
    drop = int(y.sum()) - g
    for h in sorted(range(y.shape[0]), key=lambda h: (y[h].sum(), h)):
        for k in range(y.shape[1]):
            take = int(min(y[h, k], drop))
            y[h, k] -= take
            drop -= take
        if drop <= 0:
            break
    return y


MIN_QUANTUM_S = 1e-3
"""AFS-P's smallest quantum: executed seconds are counted in whole quanta (a subnormal quantum
made the count infinite)."""


@dataclass(frozen=True)
class AfsPConfig(AfsConfig):
    quantum: float = 7200.0
    """AFS-P's unit of executed time, seconds (the paper: 2 h for its full-scale traces)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if not MIN_QUANTUM_S <= self.quantum <= MAX_SECONDS:
            raise ValueError(f"quantum must be from {MIN_QUANTUM_S:g} s to {MAX_SECONDS:g} s")


@register_policy
class AfsPPolicy(AfsPolicy):
    """AFS-P, without job lengths: with more jobs than GPUs (their ``min_gpus`` summed), one
    share each by least executed time counted in quanta, a job evicted (shares recomputed) when
    its count grows; otherwise Eq. 3 both ways (``afs_share.afs_p_shares``), jobs scanned by
    (count, arrival). All GPUs seen as one pool, as ``afs``."""

    name = "afs-p"
    info = PolicyInfo(title="AFS-P", colour="#9ecae1")
    config_class = AfsPConfig
    config: AfsPConfig

    def __init__(self, config: AfsPConfig | None = None, **knobs: Any) -> None:
        super().__init__(config or AfsPConfig(**knobs))

    def _count(self, st: JobStatus) -> int:
        return int(sum(st.time_on_type.values()) // self.config.quantum)

    def _crowded(self, ctx: RoundContext) -> bool:
        return sum(s.job.gpu_range[0] for s in ctx.jobs) > ctx.cluster.total_gpus

    def signature(self, ctx: RoundContext) -> list[Any]:
        counts = [[s.job_id, self._count(s)] for s in ctx.jobs] if self._crowded(ctx) else []
        return [*super().signature(ctx), counts]

    def shares(self, ctx: RoundContext) -> dict[int, tuple[str, int]]:
        order = sorted(ctx.jobs, key=lambda s: (self._count(s), s.job.arrival, s.job_id))
        pooled = self.charged(ctx, {j: [c] for j, c in self.pooled_curves(ctx).items()}, ["*"])
        curves = {j: c[0] for j, c in pooled.items()}
        if self._crowded(ctx):
            free, out = ctx.cluster.total_gpus, {}
            for s in order:
                lo = s.job.gpu_range[0]
                if lo <= free and usable(curves[s.job_id], s):
                    out[s.job_id] = ("*", lo)
                    free -= lo
            return out
        share_jobs = [
            ShareJob(max(s.remaining_steps, 1e-9), (curves[s.job_id],), s.job.gpu_range[0])
            for s in order
        ]
        held = afs_p_shares(share_jobs, [ctx.cluster.total_gpus])
        return {s.job_id: ("*", g) for s, (_, g) in zip(order, held, strict=True) if g > 0}
