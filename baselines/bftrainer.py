"""BFTrainer, FreeTrain and MalleTrain as round-loop policies (docs/bftrainer.md).

Every round (with ``--node-stream`` a round ends at every join or leave, so this is BFTrainer's
"re-solve at every event and every completion") the policy solves BFTrainer's MILP
(``baselines/bftrainer_milp.py``) over the nodes up this round:

* a Trainer gets whole nodes, ``q`` GPUs of each (``q`` = the fewest GPUs a node has, at most the
  job's ``max_gpus``), so ``N_min = ceil(min_gpus / q)``, ``N_max = floor(max_gpus / q)``; a
  node runs one Trainer; nobody migrates (a Trainer keeps a subset or superset of its nodes);
* ``O_j(n)`` is the Trainer's progress rate (``ThroughputModel.run_rate``: goodput for elastic
  jobs with efficiency data, steps/s otherwise) at breakpoints 1, 2, 4, ..., ``N_max``, or that
  rate normalised by its rate at the smallest scale (``objective=efficiency``, the paper's
  "scaling efficiency" metric), times the job's weight (the paper's administrator priority);
* ``R_up = R_dw`` = the job's restart seconds (``restart_s``, else the run's restart penalty):
  this simulator charges a checkpoint-restart whenever a placement changes;
* at most ``pj_max`` Trainers (first come, first served) are in the MILP (§5.3).

What the MILP is told about scalability differs:

* ``bftrainer``: the true rates (BFTrainer with exact scalability);
* ``freetrain``: FreeTrain's guess, linear scaling at the mean one-node rate of the Trainers it
  holds (``baselines.malletrain_jpa.freetrain_guess``);
* ``malletrain``: what JPA measured: a new Trainer is run once at its largest profiled scale
  (nodes taken from idle ones, then from the largest Trainers), then one round at each smaller
  scale (inverse order), each round's rate recorded; then the MILP uses the measured points.
  MalleTrain admits new Trainers as one batch (``pj_max - running``, §3.2).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from baselines.bftrainer_milp import DEFAULT_T_FWD_S, Trainer, assign_nodes, solve
from baselines.malletrain_jpa import (
    can_profile,
    extrapolated,
    freetrain_guess,
    profile_scales,
    profile_schedule,
)
from hadar.core.jobs import JobStatus
from hadar.policy import Assignment, Policy, PolicyInfo, RoundContext, RoundPlan, register_policy

OBJECTIVES = ("throughput", "efficiency")


@dataclass(frozen=True)
class BFTrainerConfig:
    t_fwd: float = DEFAULT_T_FWD_S
    """Forward-looking time of Eq. 16, seconds (BFTrainer saturates at about 120 s, Fig. 9)."""
    pj_max: int = 10
    """Trainers considered at once, first come first served (§5.2 uses 10)."""
    objective: str = "throughput"
    """``throughput`` (aggregate progress rate) or ``efficiency`` (each rate normalised)."""
    time_limit: float = 2.0
    """Seconds HiGHS may spend on one decision (then its best solution, or the current map)."""

    def __post_init__(self) -> None:
        if self.objective not in OBJECTIVES:
            raise ValueError(f"objective must be one of {', '.join(OBJECTIVES)}")
        if self.pj_max < 1 or self.t_fwd < 0 or self.time_limit <= 0:
            raise ValueError("pj_max >= 1, t_fwd >= 0 and time_limit > 0 are required")


@dataclass(frozen=True)
class _Shape:
    """How a job maps onto whole nodes of this round's pool."""

    per_node: int
    n_min: int
    n_max: int


def _node_type(ctx: RoundContext, node: str) -> tuple[str, int]:
    gpus = ctx.cluster.node(node).gpus
    gtype = max(sorted(gpus), key=lambda k: gpus[k])
    return gtype, gpus[gtype]


def _shape(status: JobStatus, per_node: int) -> _Shape | None:
    lo, hi = status.job.gpu_range
    q = min(per_node, hi)
    n_min, n_max = math.ceil(lo / q), hi // q
    return _Shape(q, n_min, n_max) if n_min <= n_max and n_min >= 1 else None


def _placement(ctx: RoundContext, nodes: Sequence[str], q: int) -> dict[str, dict[str, int]]:
    return {n: {_node_type(ctx, n)[0]: q} for n in nodes}


def _scales(shape: _Shape) -> list[int]:
    out = {shape.n_min, shape.n_max}
    n = 1
    while n < shape.n_max:
        if n >= shape.n_min:
            out.add(n)
        n *= 2
    return sorted(out)


class _MilpPolicy(Policy):
    """The shared round: pool, shapes, MILP, node map. Subclasses say what the MILP knows."""

    config_class = BFTrainerConfig

    def __init__(self, **options: Any) -> None:
        self.config = BFTrainerConfig(**options)

    # what the MILP is told: (nodes, rate) points, or None when not schedulable yet
    def known_points(
        self, ctx: RoundContext, status: JobStatus, shape: _Shape, truth: list[tuple[int, float]]
    ) -> list[tuple[int, float]] | None:
        return truth

    def admitted(self, ctx: RoundContext) -> list[JobStatus]:
        return list(ctx.jobs[: self.config.pj_max])

    def reserved(
        self, ctx: RoundContext, pool: list[str], held: dict[int, list[str]]
    ) -> dict[int, list[str]]:
        """Nodes held outside the MILP this round (MalleTrain's profiling runs)."""
        return {}

    def decide(self, ctx: RoundContext) -> RoundPlan:
        pool = list(ctx.cluster.node_names)
        if not pool:
            return RoundPlan(info={"milp": "no nodes"})
        per_node = min(_node_type(ctx, n)[1] for n in pool)
        held: dict[int, list[str]] = {}
        for (job_id, copy), placement in sorted(ctx.current.items()):
            if copy == 0:
                held[job_id] = sorted(placement)
        reserved = self.reserved(ctx, pool, held)
        taken = {n for nodes in reserved.values() for n in nodes}
        milp_pool = [n for n in pool if n not in taken]
        trainers, shapes = [], {}
        for status in self.admitted(ctx):
            job_id = status.job_id
            if job_id in reserved:
                continue
            shape = _shape(status, per_node)
            if shape is None:
                continue
            truth = self.true_points(ctx, status, shape, milp_pool or pool)
            points = self.known_points(ctx, status, shape, truth)
            if not points:
                continue
            mine = [n for n in held.get(job_id, []) if n in milp_pool]
            current = len(mine) if shape.n_min <= len(mine) <= shape.n_max else 0
            held[job_id] = mine if current else []
            weight = status.job.weight
            if self.config.objective == "efficiency":
                base = points[0][1] or 1.0
                points = [(n, v / base) for n, v in points]
            cost = ctx.restart_penalty_s if status.job.restart_s is None else status.job.restart_s
            trainers.append(
                Trainer(
                    job_id,
                    shape.n_min,
                    shape.n_max,
                    tuple((n, weight * v) for n, v in points),
                    current,
                    cost,
                    cost,
                )
            )
            shapes[job_id] = shape
        assignments = [
            Assignment(job_id, _placement(ctx, nodes, self.shape_of(ctx, job_id, per_node)))
            for job_id, nodes in sorted(reserved.items())
            if nodes
        ]
        info: dict[str, Any] = {"milp_trainers": len(trainers)}
        if trainers:
            result = solve(
                trainers, len(milp_pool), self.config.t_fwd, time_limit=self.config.time_limit
            )
            mapping = assign_nodes(
                result.counts, {t.key: held.get(t.key, []) for t in trainers}, milp_pool
            )
            for t in trainers:
                if mapping[t.key]:
                    assignments.append(
                        Assignment(t.key, _placement(ctx, mapping[t.key], shapes[t.key].per_node))
                    )
            info.update(milp_status=result.status, milp_gap=result.gap, milp_s=result.seconds)
            if result.time_limit_hit:
                info["time_limit_hit"] = True
        return RoundPlan(tuple(assignments), info)

    def shape_of(self, ctx: RoundContext, job_id: int, per_node: int) -> int:
        shape = _shape(ctx.status(job_id), per_node)
        return shape.per_node if shape else per_node

    def true_points(
        self, ctx: RoundContext, status: JobStatus, shape: _Shape, pool: Sequence[str]
    ) -> list[tuple[int, float]]:
        """The job's rate at its breakpoints on this round's nodes (the simulator's truth)."""
        out = []
        for n in _scales(shape):
            if n > len(pool):
                break
            rate = ctx.throughput.run_rate(
                status.job,
                _placement(ctx, pool[:n], shape.per_node),
                ctx.cluster,
                status.done_steps,
            ).rate
            out.append((n, rate))
        return out


@register_policy
class BFTrainerPolicy(_MilpPolicy):
    """BFTrainer with exact scalability."""

    name = "bftrainer"
    info = PolicyInfo(title="BFTrainer", colour="#a50f15", rank=70)


@register_policy
class FreeTrainPolicy(_MilpPolicy):
    """BFTrainer's MILP told a guess (no profiling): MalleTrain's baseline."""

    name = "freetrain"
    info = PolicyInfo(title="FreeTrain", colour="#fc9272", rank=72)

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._cache: tuple[tuple[int, float] | None, list[float]] = (None, [])

    def known_points(
        self, ctx: RoundContext, status: JobStatus, shape: _Shape, truth: list[tuple[int, float]]
    ) -> list[tuple[int, float]] | None:
        if self._cache[0] != (ctx.round_index, ctx.now):
            self._cache = ((ctx.round_index, ctx.now), self._singles(ctx, shape.per_node))
        singles = self._cache[1]
        if not singles:
            return None
        guess = freetrain_guess(singles, shape.n_max)
        return [(n, v) for n, v in guess if n >= shape.n_min] or [
            (shape.n_min, guess[0][1] * shape.n_min)
        ]

    def _singles(self, ctx: RoundContext, per_node: int) -> list[float]:
        """Per-node rates of the admitted Trainers at their smallest scale (the guess's base)."""
        singles = []
        for s in self.admitted(ctx):
            sh = _shape(s, per_node)
            if sh is None:
                continue
            pool = list(ctx.cluster.node_names)[: sh.n_min]
            if len(pool) < sh.n_min:
                continue
            rate = ctx.throughput.run_rate(
                s.job, _placement(ctx, pool, sh.per_node), ctx.cluster, s.done_steps
            ).rate
            singles.append(rate / sh.n_min)
        return singles


@register_policy
class MalleTrainPolicy(_MilpPolicy):
    """BFTrainer's MILP fed by JPA's online profiling, with batch admission."""

    name = "malletrain"
    info = PolicyInfo(title="MalleTrain", colour="#54278f", rank=71)

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self.measured: dict[int, dict[int, float]] = {}
        self.profile: dict[int, list[int]] = {}
        self.admitted_ids: list[int] = []

    def state(self) -> dict[str, Any]:
        return {
            "measured": {
                str(j): {str(n): r for n, r in m.items()} for j, m in self.measured.items()
            },
            "profile": {str(j): list(s) for j, s in self.profile.items()},
            "admitted": list(self.admitted_ids),
        }

    def restore(self, state: Mapping[str, Any]) -> None:
        unknown = sorted(set(state) - {"measured", "profile", "admitted"})
        if unknown:
            raise ValueError(f"policy {self.name}: unknown state key(s) {unknown}")
        self.measured = {
            int(j): {int(n): float(r) for n, r in m.items()}
            for j, m in state.get("measured", {}).items()
        }
        self.profile = {int(j): [int(n) for n in s] for j, s in state.get("profile", {}).items()}
        self.admitted_ids = [int(j) for j in state.get("admitted", [])]

    def admitted(self, ctx: RoundContext) -> list[JobStatus]:
        """Batch admission: running Trainers stay; ``pj_max - running`` waiting ones join at once."""
        alive = {s.job_id for s in ctx.jobs}
        self.admitted_ids = [j for j in self.admitted_ids if j in alive]
        waiting = [s.job_id for s in ctx.jobs if s.job_id not in self.admitted_ids]
        room = self.config.pj_max - len(self.admitted_ids)
        self.admitted_ids += waiting[: max(0, room)]
        chosen = set(self.admitted_ids)
        return [s for s in ctx.jobs if s.job_id in chosen]

    def known_points(
        self, ctx: RoundContext, status: JobStatus, shape: _Shape, truth: list[tuple[int, float]]
    ) -> list[tuple[int, float]] | None:
        got = self.measured.get(status.job_id)
        if not got or status.job_id in self.profile:
            return None
        pts = sorted((n, r) for n, r in got.items() if shape.n_min <= n <= shape.n_max)
        if not pts:
            return None
        return list(extrapolated(pts, shape.n_max))  # linear beyond the largest measured

    def reserved(
        self, ctx: RoundContext, pool: list[str], held: dict[int, list[str]]
    ) -> dict[int, list[str]]:
        per_node = min(_node_type(ctx, n)[1] for n in pool)
        out: dict[int, list[str]] = {}
        # record what the last round measured, then go one scale down (inverse order)
        for job_id in sorted(self.profile):
            scales = self.profile[job_id]
            ran = ctx.current.get((job_id, 0))
            status = next((s for s in ctx.jobs if s.job_id == job_id), None)
            if status is None:
                del self.profile[job_id]
                continue
            shape = _shape(status, per_node)
            if ran is not None and shape is not None and len(ran) == scales[0]:
                self.measured.setdefault(job_id, {})[scales[0]] = ctx.throughput.run_rate(
                    status.job, ran, ctx.cluster, status.done_steps
                ).rate
                scales.pop(0)
            if not scales:
                del self.profile[job_id]
                continue
            mine = sorted(n for n in held.get(job_id, []) if n in set(pool))
            out[job_id] = mine[: scales[0]] if len(mine) >= scales[0] else []
            if not out[job_id]:  # preempted below the next scale: profile again from the top
                del self.profile[job_id]
                self.measured.pop(job_id, None)
                del out[job_id]
        # start profiling admitted Trainers that have no measurements yet
        for status in self.admitted(ctx):
            job_id = status.job_id
            if job_id in self.measured or job_id in self.profile:
                continue
            shape = _shape(status, per_node)
            if shape is None:
                continue
            scales = [s for s in profile_scales(shape.n_min, shape.n_max, max(1, len(pool) // 2))]
            if not scales:
                continue
            top = profile_schedule(scales)[0]
            busy = {n for nodes in out.values() for n in nodes}
            free = [n for n in pool if n not in busy and all(n not in v for v in held.values())]
            donors = sorted(
                (j for j in held if held[j] and j not in out), key=lambda j: (-len(held[j]), j)
            )
            keep = {}
            for donor in donors:
                donor_shape = _shape(ctx.status(donor), per_node)
                keep[donor] = donor_shape.n_min if donor_shape else 0
            spare = sum(max(0, len(held[d]) - keep[d]) for d in donors)
            if not can_profile(top, len(free), spare):
                continue  # back to the queue until its largest scale fits
            for donor in donors:  # preempt from the largest Trainers
                while len(free) < top and len(held[donor]) > keep[donor]:
                    free.append(held[donor].pop())
            scales = [s for s in profile_schedule(scales) if s <= len(free)]
            self.profile[job_id] = scales
            out[job_id] = free[: scales[0]]
        return out
