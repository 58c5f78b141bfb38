"""Plain Hadar's own run, replayed beside HadarE: the schedule HadarE's forks must never fall
behind.

Each round HadarE asks the replay for the round plain Hadar would decide in its own state (its
jobs' progress, its last placements, its own policy state), plays it with the simulator's
arithmetic (:func:`hadar.round_progress.play_job_round`) and books it. HadarE then runs every job
it still has where the replay runs it and forks only onto what is left, while keeping each of its
jobs at least as far along as the replay's at every moment of the round. In the simulator, with
rounds of a fixed length, every job therefore finishes no later under HadarE than under Hadar:
TTD, each JCT and so the average are never worse (``tests/hadare/test_never_behind.py``).

When HadarE's clock runs ahead of the replay's by a round or more (HadarE finished every job it
had and the simulator skipped an idle gap to the next arrival while Hadar was still busy), the
replay plays whole rounds of its own until it is less than a round behind; then, as when a real
round ran a little longer than its length, its next round starts with HadarE's. The guarantee
is exact only where the rounds line up (the simulator's fixed-length rounds without idle gaps
while Hadar is busy). Where they cannot (HadarE's round ended before the replay's, or no node
was up for a round while jobs waited: nodes come and go), the replay starts again from HadarE's
own state (:meth:`HadarReplay.resync`): it would otherwise play rounds that never ran.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, fields, replace
from functools import cached_property
from typing import Any

from hadar.core.job_service import JobService
from hadar.core.jobs import Job, JobStatus, Placement
from hadar.policy import Policy, RoundContext, RoundPlan
from hadar.round_progress import JobRound, book_job_round, play_plan
from hadar.scheduler import HadarConfig, HadarPolicy

ROUND_TIME_TOLERANCE_S = 1e-6
"""Clocks this close are the same round start."""


@dataclass
class ReplayedJob:
    """A job as the replay of plain Hadar has it."""

    job: Job
    remaining: float
    service: JobService

    def status(self) -> JobStatus:
        return self.service.status(self.job, self.remaining)


@dataclass(frozen=True)
class ReplayRound:
    """One round of the replay: the plan plain Hadar made and what each of its jobs did."""

    plan: RoundPlan
    before: Mapping[int, float]
    """Each replayed job's progress (done steps) when the round started."""
    played: Mapping[int, JobRound]
    """The jobs that ran this round, as played."""

    def done_by(self, job: Job, t: float) -> float:
        """The replayed ``job``'s done steps ``t`` seconds into the round."""
        done = self.before.get(job.job_id, job.total_steps)
        outcome = self.played.get(job.job_id)
        return done if outcome is None else done + outcome.done_by(t)

    def placement(self, job_id: int) -> Placement | None:
        """The job's placement in the replayed plan (its first assignment's), None if it did
        not run."""
        return self._placements.get(job_id)

    @cached_property
    def _placements(self) -> dict[int, Placement]:
        out: dict[int, Placement] = {}
        for a in self.plan.assignments:
            out.setdefault(a.job_id, a.placement)
        return out


@dataclass(frozen=True)
class Projection:
    """Where a replay (of plain Hadar, or in a rollout of HadarE) leads a set of jobs: their last
    finish and the sum of their finishes (seconds from the run's start; the sum orders average JCTs over the same jobs)."""

    last_finish: float
    finish_sum: float
    last_job: int | None = None
    """The job that finishes last (the lowest id on ties)."""
    rounds: int = 0
    """Rounds played to see it."""

    def with_finished(self, finishes: Iterable[float]) -> Projection:
        """This projection with jobs that finished already (at ``finishes``, before any job
        projected) added."""
        done = list(finishes)
        last = max([self.last_finish, *done])
        return Projection(last, self.finish_sum + sum(done), self.last_job, self.rounds)

    def sooner_than(self, other: Projection) -> bool:
        """An earlier last finish, or the same and a smaller sum (beyond rounding)."""
        tol_last = 1e-9 * max(1.0, other.last_finish)
        if self.last_finish < other.last_finish - tol_last:
            return True
        return (
            self.last_finish <= other.last_finish + tol_last
            and self.finish_sum < other.finish_sum - 1e-9 * max(1.0, other.finish_sum)
        )

    def no_later_than(self, other: Projection) -> bool:
        """Neither a later last finish nor a larger sum than ``other`` (beyond rounding)."""
        return self.last_finish <= other.last_finish + 1e-9 * max(
            1.0, other.last_finish
        ) and self.finish_sum <= other.finish_sum + 1e-9 * max(1.0, other.finish_sum)


class HadarReplay:
    """Plain Hadar (``config``) run on its own state, one round per HadarE round."""

    def __init__(self, config: HadarConfig) -> None:
        self.config = config
        self.hadar: Policy = HadarPolicy(config)
        """The policy replayed: plain Hadar, or in a look-ahead's rollout HadarE itself."""
        self.jobs: dict[int, ReplayedJob] = {}
        self.current: dict[tuple[int, int], Placement] = {}
        self.now: float | None = None
        self.decisions = DecisionCache()
        """Plain Hadar's decisions by the state it decided in, shared with this replay's copies
        and look-ahead rollouts (which replay the same rounds again)."""

    def step(self, ctx: RoundContext, followed: bool = True) -> ReplayRound:
        """Plain Hadar's round at ``ctx.now`` (catching up first if HadarE's clock ran ahead).
        A ``followed`` replay (the one the never-behind rule follows) is never ahead of HadarE's
        jobs; one kept only as a bound runs free."""
        for st in ctx.jobs:
            if st.job_id not in self.jobs:
                self.jobs[st.job_id] = ReplayedJob(st.job, st.remaining_steps, _service_of(st))
        for st in ctx.jobs if followed else ():
            # never ahead of what HadarE measured: in the simulator HadarE is never behind (no
            # effect); in real runs the replay's progress comes from throughput estimates, which
            # a loaded machine can undershoot, and would make every fork look like falling behind
            rec = self.jobs[st.job_id]
            if st.remaining_steps > rec.remaining:
                rec.remaining = st.remaining_steps
                rec.service.finish = None
        if self.now is None:
            self.now = ctx.now
        # whole rounds HadarE did not run (it skipped an idle gap): the replay plays them
        while self._active() and ctx.now - self.now >= ctx.round_s - ROUND_TIME_TOLERANCE_S:
            self._play(ctx, self.now)
        if not self._active() or self.now < ctx.now:
            # the rest of an idle gap, or a real round that ran a little longer than its length:
            # the replay's round starts with HadarE's
            self.now = ctx.now
        return self._play(ctx, self.now)

    def out_of_step(self, ctx: RoundContext) -> bool:
        """Whether the replay's clock no longer follows Hadar's run: HadarE's last round ended
        before the replay's did (the round was cut short; in the simulator, by a node joining or
        leaving), or HadarE ran no round for a round or more while it had jobs (no node was up,
        so plain Hadar could not run either). The replay would otherwise play rounds that did
        not happen, on nodes that may have gone."""
        if self.now is None or not self._active():
            return False
        if ctx.now < self.now - ROUND_TIME_TOLERANCE_S:
            return True
        skipped = ctx.now - self.now >= ctx.round_s - ROUND_TIME_TOLERANCE_S
        return skipped and any(
            st.job.arrival < self.now + ROUND_TIME_TOLERANCE_S for st in ctx.jobs
        )

    def resync(self, ctx: RoundContext, running: Mapping[int, Placement]) -> None:
        """Plain Hadar from where HadarE's jobs (``ctx.jobs``) stand now, each job running on
        ``running`` (its primary copy), the inner Hadar's state kept: when the replay is
        :meth:`out_of_step`, it is no longer Hadar's run, and HadarE follows Hadar's decision
        from its own state instead."""
        self.jobs = {
            st.job_id: ReplayedJob(st.job, st.remaining_steps, _service_of(st)) for st in ctx.jobs
        }
        self.current = {(job_id, 0): p for job_id, p in running.items() if job_id in self.jobs}
        self.now = ctx.now

    def clone(self) -> HadarReplay:
        """An independent copy (its inner policy's state included)."""
        twin = HadarReplay(self.config)
        twin.decisions = self.decisions
        twin.hadar = copy_policy(self.hadar)
        share_configurations(self.hadar, twin.hadar)
        twin.jobs = {
            j: ReplayedJob(r.job, r.remaining, _copy_service(r.service))
            for j, r in self.jobs.items()
        }
        twin.current = dict(self.current)
        twin.now = self.now
        return twin

    def driven_by(
        self, policy: Policy, current: Mapping[tuple[int, int], Placement]
    ) -> HadarReplay:
        """A copy of this replay's jobs and clock, decided from now on by ``policy`` (a
        look-ahead's rollout of HadarE) with ``current`` its runs' placements."""
        twin = self.clone()
        twin.hadar = policy
        twin.current = {k: p for k, p in current.items() if twin.jobs[k[0]].remaining > 0}
        return twin

    def rebased(
        self,
        ctx: RoundContext,
        played: Mapping[int, JobRound],
        primary: Mapping[int, Placement],
    ) -> HadarReplay:
        """Plain Hadar from where HadarE's jobs (``ctx.jobs``) stand once this round has played
        as ``played``: each job's progress and service booked, ``primary`` (each job's fastest
        copy) its running placements, the inner Hadar's state this replay's."""
        twin = HadarReplay(self.config)
        twin.decisions = self.decisions
        twin.hadar = copy_policy(self.hadar)
        share_configurations(self.hadar, twin.hadar)
        for st in ctx.jobs:
            service = _service_of(st)
            outcome = played.get(st.job_id)
            remaining = (
                st.remaining_steps if outcome is None else book_job_round(service, outcome, ctx.now)
            )
            twin.jobs[st.job_id] = ReplayedJob(st.job, remaining, service)
        twin.current = {
            (job_id, 0): p for job_id, p in primary.items() if twin.jobs[job_id].remaining > 0
        }
        twin.now = ctx.now + ctx.round_s
        return twin

    def projected(
        self, ctx: RoundContext, job_ids: Iterable[int], max_rounds: int
    ) -> Projection | None:
        """When the replayed policy, continuing from here with no new arrivals, finishes
        ``job_ids`` (None: not within ``max_rounds`` rounds). Leaves this replay as it is."""
        twin = self.clone()
        rounds = 0
        while twin._active() and rounds < max_rounds:
            assert twin.now is not None
            twin._play(ctx, twin.now)
            rounds += 1
        if twin._active():
            return None
        finishes = {j: twin.jobs[j].service.finish for j in job_ids}
        done = {j: float(f) for j, f in finishes.items() if f is not None}
        if len(done) < len(finishes):
            return None
        last = min(done, key=lambda j: (-done[j], j)) if done else None
        return Projection(max(done.values(), default=0.0), sum(done.values()), last, rounds)

    def _active(self) -> list[ReplayedJob]:
        return [r for r in self.jobs.values() if r.remaining > 0]

    def _play(self, ctx: RoundContext, now: float) -> ReplayRound:
        active = sorted(self._active(), key=lambda r: (r.job.arrival, r.job.job_id))
        up = set(ctx.cluster.node_names)
        current = {k: p for k, p in self.current.items() if all(n in up for n in p)}
        view = replace(ctx, now=now, jobs=tuple(r.status() for r in active), current=current)
        plan = self.decisions.decide(self.hadar, view) if active else RoundPlan()
        before = {r.job.job_id: r.job.total_steps - r.remaining for r in self.jobs.values()}
        played = _play_plan(plan, view, self.jobs)
        for job_id, outcome in played.items():
            rec = self.jobs[job_id]
            rec.remaining = book_job_round(rec.service, outcome, now)
        self.current = {
            a.run_key: a.placement for a in plan.assignments if self.jobs[a.job_id].remaining > 0
        }
        self.now = now + ctx.round_s
        return ReplayRound(plan, before, played)

    def state(self) -> dict[str, Any]:
        """JSON-able: the inner Hadar's state, each replayed job and last round's placements."""
        return {
            "policy": self.hadar.state(),
            "now": self.now,
            "jobs": [
                {
                    "job": _job_to_json(r.job),
                    "remaining": r.remaining,
                    "service": asdict(r.service),
                }
                for r in self.jobs.values()
            ],
            "current": [
                [job_id, copy, {n: dict(per) for n, per in p.items()}]
                for (job_id, copy), p in self.current.items()
            ],
        }

    def restore(self, state: Mapping[str, Any]) -> None:
        self.hadar.restore(state.get("policy", {}))
        self.now = state.get("now")
        self.jobs = {}
        for rec in state.get("jobs", []):
            job = _job_from_json(rec["job"])
            self.jobs[job.job_id] = ReplayedJob(
                job, float(rec["remaining"]), JobService(**rec["service"])
            )
        self.current = {
            (int(job_id), int(copy)): {n: dict(per) for n, per in p.items()}
            for job_id, copy, p in state.get("current", [])
        }


class DecisionCache:
    """Plain Hadar's round plans keyed by everything its decision depends on (the clock, the
    jobs' progress and service, last round's placements, the nodes, its own state), with the
    state it left; only while the throughput model does not learn (a simulation), for the same
    model throughout. Other policies always decide afresh."""

    LIMIT = 4096
    """Entries kept; the oldest go first."""

    def __init__(self) -> None:
        self._model: object | None = None
        self._plans: dict[str, tuple[RoundPlan, str]] = {}
        self.enabled = True
        """Whether decisions are remembered and looked up now (off: each is decided afresh,
        as it would be: where no rollout will ask again, keying the state is the only cost)."""

    def decide(self, policy: Policy, view: RoundContext) -> RoundPlan:
        if not self.enabled or not isinstance(policy, HadarPolicy) or view.throughput.learns:
            return policy.decide(view)
        if self._model is not view.throughput:
            self._model, self._plans = view.throughput, {}
        key = _decision_key(policy, view)
        hit = self._plans.get(key)
        if hit is not None:
            policy.restore(json.loads(hit[1]))
            return hit[0]
        plan = policy.decide(view)
        if len(self._plans) >= self.LIMIT:
            del self._plans[next(iter(self._plans))]
        self._plans[key] = (plan, json.dumps(policy.state()))
        return plan


def _decision_key(policy: Policy, view: RoundContext) -> str:
    return json.dumps(
        [
            view.now,
            view.round_s,
            view.restart_penalty_s,
            [[n.name, sorted(n.gpus.items())] for n in view.cluster.nodes],
            [
                [
                    st.job_id,
                    st.remaining_steps,
                    st.attained_service,
                    sorted(st.time_on_type.items()),
                    st.rounds_scheduled,
                    st.first_start,
                ]
                for st in view.jobs
            ],
            sorted(
                [k[0], k[1], sorted((n, sorted(per.items())) for n, per in p.items())]
                for k, p in view.current.items()
            ),
            policy.state(),
        ],
        sort_keys=True,
    )


def share_configurations(source: Policy, target: Policy) -> None:
    """Where both are Hadar, ``target`` keeps the adapting jobs' configurations and best batches
    in ``source``'s memo (:class:`ConfigurationMemo`): both decide for the same kinds of jobs
    on the same cluster and throughput model, whose answers do not depend on the deciding
    policy's configuration or state, so each is computed once."""
    if isinstance(source, HadarPolicy) and isinstance(target, HadarPolicy):
        target.configurations = source.configurations


def copy_policy(policy: Policy) -> Policy:
    """A policy of the same class and configuration in the same state (a policy class takes
    its configuration as its first argument)."""
    make: Any = type(policy)
    twin: Policy = make(getattr(policy, "config", None))
    twin.restore(policy.state())
    return twin


def _service_of(status: JobStatus) -> JobService:
    """The service ``status`` records (a copy: the replay books its own rounds on it)."""
    return JobService(
        attained=status.attained_service,
        time_on_type=dict(status.time_on_type),
        rounds=status.rounds_scheduled,
        first_start=status.first_start,
    )


def _copy_service(service: JobService) -> JobService:
    return replace(service, time_on_type=dict(service.time_on_type))


def _play_plan(
    plan: RoundPlan, ctx: RoundContext, jobs: Mapping[int, ReplayedJob]
) -> dict[int, JobRound]:
    return play_plan(
        plan.assignments,
        {a.job_id: (jobs[a.job_id].job, jobs[a.job_id].remaining) for a in plan.assignments},
        ctx.current,
        ctx.throughput,
        ctx.cluster,
        ctx.round_s,
        ctx.restart_penalty_s,
        ctx.fork_progress,  # Hadar never forks: its one run per job is the same under either
    )


def _job_to_json(job: Job) -> dict[str, Any]:
    out = {f.name: getattr(job, f.name) for f in fields(job)}
    out["spec"] = dict(job.spec)
    return out


def _job_from_json(data: Mapping[str, Any]) -> Job:
    values = dict(data)
    if values.get("batch_range") is not None:
        values["batch_range"] = tuple(values["batch_range"])
    return Job(**values)
