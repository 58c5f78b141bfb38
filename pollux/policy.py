"""Pollux (Qiao et al., OSDI 2021) as a policy: PolluxAgent per job, PolluxSched per round.

Every round (Pollux's scheduling interval, 60 s, is its declared round, ``PolicyInfo.round_s``:
the drivers use it when no ``--round`` is given; a longer round only re-decides less often):

1. **Agents observe** the round just played: for each job that ran, its iteration time on the
   configuration it had (nodes, GPUs, local batch) and its gradient statistics at its progress.
   In simulation these are the noise-free lookups of the simulator's ground truth (the measured
   traces, ``goodput.traces``), as Pollux's own simulator feeds its agents; the agent refits the
   throughput model (Eq. 11) whenever a configuration is new (``agent.observe``).
2. **PolluxSched** builds each job's SPEEDUP table (best goodput per GPU count over its goodput
   with a fair 1/J share of the cluster) and REALLOC_FACTOR, and maximises FITNESS_p
   (``solver.solve``: interference avoidance, no needless split).
3. **Agents tune** each placed job's batch size (Eq. 13) for its new allocation; the plan
   carries the total batch (``Assignment.batch_size``).

Elastic jobs of real runs with a batch range (``elastic-N``) are *measured*: their agents fit
Eq. 11 to the step and sync times their workers report and estimate the gradient noise from the
per-replica gradient norms (``observe.measured_observation``); they reach the policy through the
round context's throughput model (``ctx.throughput.iterations``), as measured throughputs do.

Jobs without statistical-efficiency data (not one of Pollux's applications: e.g. the Philly
workloads' jobs) adapt their GPU count only, within their ``min_gpus``-``max_gpus`` range (a
rigid job: run on its gang or wait), valued by the run's throughput model (steps/s, assumed
linear in the GPU count for counts it was not measured at), at a fixed batch size. The plan's
``info`` says how many such jobs the round had.

Mixed clusters (Pollux is homogeneous, §2.3): as Sia's evaluation ran it, each job runs on one
GPU type, chosen by the solver by goodput per GPU (per type, the job's compute time is scaled by
the type's speed relative to the T4 traces for the job's application:
``hadar.workloads.gpu_scaling``, estimated).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from hadar.core.jobs import JobStatus
from hadar.core.threads import one_blas_thread
from hadar.core.validation import MAX_SECONDS
from hadar.policy import Assignment, Policy, PolicyInfo, RoundContext, RoundPlan, register_policy
from pollux.fitness import DEFAULT_DELTA_S, DEFAULT_P, fair_share_gpus, realloc_factor
from pollux.problem import AllocationProblem, speedups
from pollux.solver import solve
from pollux.speedup import BestGoodput, fair_goodput, speedup_row

if TYPE_CHECKING:
    from pollux.agent import AgentState

MAX_ABS_P = 100.0
MIN_ABS_P = 1e-6
"""The largest ``|p|`` taken: a speedup (plus 1e-3) to a larger power overflows or vanishes in
double precision (-1 is Pollux's default, 1 the plain mean)."""

MAX_GPUS_PER_JOB = 64
"""The most GPUs one job may get (Pollux's simulator caps jobs at 64)."""


@dataclass(frozen=True)
class PolluxConfig:
    p: float = DEFAULT_P
    """Fairness knob: the exponent of the generalised mean of speedups (-1: harmonic)."""
    delta_s: float = DEFAULT_DELTA_S
    """δ, the re-allocation delay REALLOC_FACTOR assumes (seconds)."""
    explore: bool = True
    """Prior-driven exploration (§4.1): a job may get at most twice the most GPUs it has held."""
    pin: bool = True
    """Run NCF jobs as the official simulator does: one GPU at the largest batch
    (``hadar.workloads.pollux.PINNED_APPLICATIONS``); false adapts them like the others."""

    def __post_init__(self) -> None:
        if not 0 <= self.delta_s <= MAX_SECONDS:
            raise ValueError(
                f"delta_s must be between 0 and {MAX_SECONDS:g} (ten years; got {self.delta_s:g}):"
                " beyond, every re-allocation factor is 0 and no job is ever started"
            )
        if not abs(self.p) <= MAX_ABS_P:
            raise ValueError(
                f"p must be between -{MAX_ABS_P:g} and {MAX_ABS_P:g} (got {self.p:g}): beyond, "
                "the powers of speedups leave double precision"
            )
        if 0 < abs(self.p) < MIN_ABS_P:
            raise ValueError(
                f"p must be 0 or at least {MIN_ABS_P:g} from it (got {self.p:g}): nearer, every "
                "speedup's power rounds to 1 and no allocation is better than none (p=0 is "
                "their limit, the geometric mean)"
            )


@register_policy
class PolluxPolicy(Policy):
    """Co-adaptive GPU counts and batch sizes maximising FITNESS_p of goodput speedups."""

    name = "pollux"
    config_class = PolluxConfig
    info = PolicyInfo(
        title="Pollux",
        colour="#006d2c",
        defaults=frozenset({"compare-elastic"}),
        rank=60,
        adapts_batch=True,
        round_s=60.0,
    )

    def __init__(self, config: PolluxConfig | None = None, **knobs: Any) -> None:
        self.config = config or PolluxConfig(**knobs)
        self._agents: dict[int, AgentState] = {}
        self._restarts: dict[int, int] = {}
        self._batch: dict[int, int] = {}
        self._seen: dict[int, int] = {}
        """Measured jobs: the last round whose report the agent has observed."""

    # -- state -------------------------------------------------------------------------------
    def state(self) -> dict[str, Any]:
        return {
            "agents": {str(j): a.to_json() for j, a in sorted(self._agents.items())},
            "restarts": {str(j): r for j, r in sorted(self._restarts.items())},
            "batch": {str(j): b for j, b in sorted(self._batch.items())},
            "seen": {str(j): r for j, r in sorted(self._seen.items())},
        }

    def restore(self, state: Mapping[str, Any]) -> None:
        from pollux.agent import AgentState

        self._agents = {int(j): AgentState.from_json(a) for j, a in state.get("agents", {}).items()}
        self._restarts = {int(j): int(r) for j, r in state.get("restarts", {}).items()}
        self._batch = {int(j): int(b) for j, b in state.get("batch", {}).items()}
        self._seen = {int(j): int(r) for j, r in state.get("seen", {}).items()}

    # -- one round ---------------------------------------------------------------------------
    def decide(self, ctx: RoundContext) -> RoundPlan:
        with one_blas_thread():  # its fits and searches make many tiny BLAS calls
            return self._decide(ctx)

    def _decide(self, ctx: RoundContext) -> RoundPlan:
        from pollux import observe as obs

        jobs = list(ctx.jobs)
        if not jobs:
            return RoundPlan((), {"jobs": 0})
        cluster = ctx.cluster
        for s in jobs:
            if obs.has_traces(s.job):
                self._observe(s, ctx)
            elif obs.is_measured(s.job):
                self._observe_measured(s, ctx)
        problem, throughput_only = self._problem(ctx, jobs)
        alloc = solve(problem)
        out: list[Assignment] = []
        for j, s in enumerate(jobs):
            count = int(alloc[j].sum())
            if count == 0:
                continue
            placement = cluster.placement_from_matrix(alloc[j])
            # R_j: re-allocations after the first (a move, or a restart after a preemption).
            if s.job_id not in self._restarts:
                self._restarts[s.job_id] = 0
            elif ctx.current.get((s.job_id, 0)) != placement:
                self._restarts[s.job_id] += 1
            batch = self._choose_batch(s, alloc[j], count, ctx)
            out.append(Assignment(s.job_id, placement, batch_size=batch))
        speedup = speedups(problem, alloc)
        info = {
            "jobs": len(jobs),
            "placed": len(out),
            "gpus_used": int(alloc.sum()),
            "throughput_only_jobs": throughput_only,
            "mean_speedup": float(speedup.mean()),
        }
        return RoundPlan(tuple(out), info)

    def _agent(self, s: JobStatus) -> AgentState:
        from pollux import observe as obs

        agent = self._agents.get(s.job_id)
        if agent is None:
            agent = obs.new_agent(s.job) if obs.has_traces(s.job) else obs.new_measured_agent(s.job)
            self._agents[s.job_id] = agent
        return agent

    def _observe(self, s: JobStatus, ctx: RoundContext) -> None:
        from pollux import observe as obs
        from pollux.agent import observe

        agent = self._agent(s)
        placement = ctx.current.get((s.job_id, 0))
        batch = self._batch.get(s.job_id)
        if placement and batch:
            point, grad = obs.simulated_observation(s, placement, batch)
            self._agents[s.job_id] = observe(agent, point, grad)

    def _observe_measured(self, s: JobStatus, ctx: RoundContext) -> None:
        """Every report of a round the agent has not seen yet (once each, also after a restart)."""
        from pollux import observe as obs
        from pollux.agent import observe

        agent = self._agent(s)
        last = self._seen.get(s.job_id, -1)
        for sample in ctx.throughput.iterations(s.job):
            if sample.round > last:
                point, grad = obs.measured_observation(sample, agent.init_batch_size)
                agent = observe(agent, point, grad)
                last = sample.round
        self._agents[s.job_id] = agent
        if last >= 0:
            self._seen[s.job_id] = last

    def _problem(self, ctx: RoundContext, jobs: list[JobStatus]) -> tuple[AllocationProblem, int]:
        from pollux import observe as obs
        from pollux.agent import best_goodput, exploration_limit

        cluster = ctx.cluster
        cap = cluster.capacity
        node_size = cap.max(axis=0)
        total = int(cap.sum())
        fair = fair_share_gpus(total, len(jobs))
        limits = []
        fns: list[list[BestGoodput]] = []
        throughput_only = 0
        for s in jobs:
            lo, hi = s.job.gpu_range
            hi = min(hi, total, MAX_GPUS_PER_JOB)
            if self.config.pin and obs.pinned(s.job):
                hi = min(hi, 1)  # the artifact's NCF: one GPU (its batch: _choose_batch)
            if obs.has_traces(s.job) or obs.is_measured(s.job):
                agent = self._agent(s)
                if self.config.explore:
                    hi = min(hi, max(exploration_limit(agent), lo))
                if obs.has_traces(s.job):
                    hi = min(hi, obs.max_useful_gpus(s.job))
                    scales = [obs.compute_scale(t, s.job.job_type) for t in cluster.gpu_types]
                else:  # measured where it runs: no T4 traces to scale from
                    scales = [1.0] * len(cluster.gpu_types)
                fns.append([best_goodput(agent, c) for c in scales])
            else:
                throughput_only += 1
                fns.append(obs.throughput_goodput(s.job, cluster, ctx.throughput))
            limits.append((lo, hi))
        width = max(hi for _, hi in limits) + 1
        num_types = len(cluster.gpu_types)
        local = np.full((len(jobs), num_types, width), np.nan)
        spread = np.full_like(local, np.nan)
        for j, (per_type, (lo, hi)) in enumerate(zip(fns, limits, strict=True)):
            base = max(fair_goodput(fn, fair, int(node_size[t])) for t, fn in enumerate(per_type))
            for t, fn in enumerate(per_type):
                local[j, t], spread[j, t] = speedup_row(
                    fn, base, hi, width, int(node_size[t]), min_k=lo
                )
        current = np.zeros((len(jobs), *cap.shape), dtype=np.int64)
        for j, s in enumerate(jobs):
            held = ctx.current.get((s.job_id, 0))
            if held:
                current[j] = cluster.placement_matrix(held)
        age = np.array([max(ctx.now - s.job.arrival, 0.0) for s in jobs])
        restarts = np.array([self._restarts.get(s.job_id, 0) for s in jobs])
        factor = realloc_factor(age, restarts, self.config.delta_s)
        problem = AllocationProblem(cap, local, spread, current, factor, p=self.config.p)
        return problem, throughput_only

    def _choose_batch(
        self, s: JobStatus, alloc: np.ndarray, count: int, ctx: RoundContext
    ) -> int | None:
        from pollux import observe as obs
        from pollux.agent import choose_batch

        if s.job.batch_range is None:
            return None
        measured = obs.is_measured(s.job)
        if not obs.has_traces(s.job) and not measured:
            return obs.fixed_batch(s.job)
        if self.config.pin and obs.pinned(s.job):
            self._batch[s.job_id] = s.job.batch_range[1]
            return s.job.batch_range[1]
        nodes = int(np.count_nonzero(alloc.sum(axis=1)))
        gtype = ctx.cluster.gpu_types[int(alloc.sum(axis=0).argmax())]
        scale = 1.0 if measured else obs.compute_scale(gtype, s.job.job_type)
        local, accum = choose_batch(self._agent(s), nodes, count, scale)
        lo, hi = s.job.batch_range
        batch = int(min(max(count * local * (accum + 1), lo), hi))
        self._batch[s.job_id] = batch
        return batch
