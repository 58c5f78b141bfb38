"""BFTrainer as a round-loop policy, and the MILP round FreeTrain and MalleTrain share
(``malletrain/policy.py``; docs/bftrainer.md).

Every round (with ``--node-stream`` a round ends at every join or leave, so this is BFTrainer's
"re-solve at every event and every completion") the policy solves BFTrainer's MILP
(``bftrainer/milp.py``) over the nodes up this round:

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
  holds (``malletrain.jpa.freetrain_guess``);
* ``malletrain``: what JPA measured: a new Trainer is run once at its largest profiled scale
  (nodes taken from idle ones, then from the largest Trainers), then one round at each smaller
  scale (inverse order), each round's rate recorded; then the MILP uses the measured points.
  MalleTrain admits new Trainers as one batch (``pj_max - running``, §3.2).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bftrainer.milp import DEFAULT_T_FWD_S, Trainer, assign_nodes, solve
from hadar.core.jobs import JobStatus
from hadar.core.validation import MAX_SECONDS
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
        if self.pj_max < 1 or not 0 < self.t_fwd <= MAX_SECONDS or self.time_limit <= 0:
            raise ValueError(
                f"pj_max >= 1, 0 < t_fwd <= {MAX_SECONDS:g} (ten years: the MILP's coefficients"
                " stay finite; at 0 no map is worth more than none) and time_limit > 0 are"
                " required"
            )


@dataclass(frozen=True)
class Shape:
    """How a job maps onto whole nodes of this round's pool."""

    per_node: int
    n_min: int
    n_max: int


def node_type(ctx: RoundContext, node: str) -> tuple[str, int]:
    gpus = ctx.cluster.node(node).gpus
    gtype = max(sorted(gpus), key=lambda k: gpus[k])
    return gtype, gpus[gtype]


def shape_of(status: JobStatus, per_node: int) -> Shape | None:
    lo, hi = status.job.gpu_range
    q = min(per_node, hi)
    n_min, n_max = math.ceil(lo / q), hi // q
    return Shape(q, n_min, n_max) if n_min <= n_max and n_min >= 1 else None


def node_placement(ctx: RoundContext, nodes: Sequence[str], q: int) -> dict[str, dict[str, int]]:
    return {n: {node_type(ctx, n)[0]: q} for n in nodes}


def _scales(shape: Shape) -> list[int]:
    out = {shape.n_min, shape.n_max}
    n = 1
    while n < shape.n_max:
        if n >= shape.n_min:
            out.add(n)
        n *= 2
    return sorted(out)


class MilpPolicy(Policy):
    """The shared round: pool, shapes, MILP, node map. Subclasses say what the MILP knows."""

    config_class = BFTrainerConfig

    def __init__(self, config: BFTrainerConfig | None = None, **knobs: Any) -> None:
        self.config = config or BFTrainerConfig(**knobs)

    # what the MILP is told: (nodes, rate) points, or None when not schedulable yet
    def known_points(
        self, ctx: RoundContext, status: JobStatus, shape: Shape, truth: list[tuple[int, float]]
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
        per_node = min(node_type(ctx, n)[1] for n in pool)
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
            shape = shape_of(status, per_node)
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
            Assignment(job_id, node_placement(ctx, nodes, self.shape_of(ctx, job_id, per_node)))
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
                        Assignment(
                            t.key, node_placement(ctx, mapping[t.key], shapes[t.key].per_node)
                        )
                    )
            info.update(milp_status=result.status, milp_gap=result.gap, milp_s=result.seconds)
            if result.time_limit_hit:
                info["time_limit_hit"] = True
        return RoundPlan(tuple(assignments), info)

    def shape_of(self, ctx: RoundContext, job_id: int, per_node: int) -> int:
        shape = shape_of(ctx.status(job_id), per_node)
        return shape.per_node if shape else per_node

    def true_points(
        self, ctx: RoundContext, status: JobStatus, shape: Shape, pool: Sequence[str]
    ) -> list[tuple[int, float]]:
        """The job's rate at its breakpoints on this round's nodes (the simulator's truth)."""
        out = []
        for n in _scales(shape):
            if n > len(pool):
                break
            rate = ctx.throughput.run_rate(
                status.job,
                node_placement(ctx, pool[:n], shape.per_node),
                ctx.cluster,
                status.done_steps,
            ).rate
            out.append((n, rate))
        return out


@register_policy
class BFTrainerPolicy(MilpPolicy):
    """BFTrainer with exact scalability."""

    name = "bftrainer"
    info = PolicyInfo(title="BFTrainer", colour="#a50f15", rank=70)
