"""MalleTrain and its baseline FreeTrain as round-loop policies: BFTrainer's MILP round
(``bftrainer/policy.py``) told what JPA measured (``malletrain``) or FreeTrain's linear guess
(``freetrain``); docs/bftrainer.md."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bftrainer.policy import (
    BFTrainerConfig,
    MilpPolicy,
    Shape,
    node_placement,
    node_type,
    shape_of,
)
from hadar.core.jobs import JobStatus
from hadar.policy import PolicyInfo, RoundContext, register_policy
from malletrain.jpa import (
    can_profile,
    extrapolated,
    freetrain_guess,
    profile_scales,
    profile_schedule,
)


@register_policy
class FreeTrainPolicy(MilpPolicy):
    """BFTrainer's MILP told a guess (no profiling): MalleTrain's baseline."""

    name = "freetrain"
    info = PolicyInfo(title="FreeTrain", colour="#fc9272", rank=72)

    def __init__(self, config: BFTrainerConfig | None = None, **knobs: Any) -> None:
        super().__init__(config, **knobs)
        self._cache: tuple[tuple[int, float] | None, list[float]] = (None, [])

    def known_points(
        self, ctx: RoundContext, status: JobStatus, shape: Shape, truth: list[tuple[int, float]]
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
            sh = shape_of(s, per_node)
            if sh is None:
                continue
            pool = list(ctx.cluster.node_names)[: sh.n_min]
            if len(pool) < sh.n_min:
                continue
            rate = ctx.throughput.run_rate(
                s.job, node_placement(ctx, pool, sh.per_node), ctx.cluster, s.done_steps
            ).rate
            singles.append(rate / sh.n_min)
        return singles


@register_policy
class MalleTrainPolicy(MilpPolicy):
    """BFTrainer's MILP fed by JPA's online profiling, with batch admission."""

    name = "malletrain"
    info = PolicyInfo(title="MalleTrain", colour="#54278f", rank=71)

    def __init__(self, config: BFTrainerConfig | None = None, **knobs: Any) -> None:
        super().__init__(config, **knobs)
        self.measured: dict[int, dict[int, float]] = {}
        self.profile: dict[int, list[int]] = {}
        self.placed: dict[int, list[str]] = {}
        """The nodes each profiling Trainer was given last round: the simulator drops a
        placement a node left from ``ctx.current``, and JPA goes on with the survivors."""
        self.admitted_ids: list[int] = []

    def state(self) -> dict[str, Any]:
        return {
            "measured": {
                str(j): {str(n): r for n, r in m.items()} for j, m in self.measured.items()
            },
            "profile": {str(j): list(s) for j, s in self.profile.items()},
            "placed": {str(j): list(n) for j, n in self.placed.items()},
            "admitted": list(self.admitted_ids),
        }

    def restore(self, state: Mapping[str, Any]) -> None:
        unknown = sorted(set(state) - {"measured", "profile", "placed", "admitted"})
        if unknown:
            raise ValueError(f"policy {self.name}: unknown state key(s) {unknown}")
        self.measured = {
            int(j): {int(n): float(r) for n, r in m.items()}
            for j, m in state.get("measured", {}).items()
        }
        self.profile = {int(j): [int(n) for n in s] for j, s in state.get("profile", {}).items()}
        self.placed = {int(j): [str(n) for n in s] for j, s in state.get("placed", {}).items()}
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
        self, ctx: RoundContext, status: JobStatus, shape: Shape, truth: list[tuple[int, float]]
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
        per_node = min(node_type(ctx, n)[1] for n in pool)
        up = set(pool)
        out: dict[int, list[str]] = {}
        # record what the last round measured, then go one scale down (inverse order)
        for job_id in sorted(self.profile):
            scales = self.profile[job_id]
            ran = ctx.current.get((job_id, 0))
            given = self.placed.get(job_id, [])
            status = next((s for s in ctx.jobs if s.job_id == job_id), None)
            if status is None:
                del self.profile[job_id]
                continue
            shape = shape_of(status, per_node)
            lost = False
            if ran is not None and shape is not None and len(ran) == scales[0]:
                self.measured.setdefault(job_id, {})[scales[0]] = ctx.throughput.run_rate(
                    status.job, ran, ctx.cluster, status.done_steps
                ).rate
                scales.pop(0)
            elif ran is None and given:  # a node left under it: this scale's measurement is lost
                scales.pop(0)
                lost = True
            if not scales and not lost:
                del self.profile[job_id]  # every scale measured: the MILP takes it from here
                continue
            mine = sorted(n for n in (ran if ran is not None else given) if n in up)
            if scales and len(mine) >= scales[0]:
                out[job_id] = mine[: scales[0]]  # on at the next scale, keeping what it measured
            else:  # preempted below the next scale: profile again from the top
                del self.profile[job_id]
                self.measured.pop(job_id, None)
        # start profiling admitted Trainers that have no measurements yet
        for status in self.admitted(ctx):
            job_id = status.job_id
            if job_id in self.measured or job_id in self.profile:
                continue
            shape = shape_of(status, per_node)
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
                donor_shape = shape_of(ctx.status(donor), per_node)
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
        self.placed = {j: list(nodes) for j, nodes in out.items()}
        return out
