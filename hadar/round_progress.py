"""One job's progress within one round, as the simulator plays it (pure functions).

The simulator (``hadar/simulator/engine.py``) and HadarE's replay of plain Hadar
(``hadare/shadow.py``) both play a job's runs through :func:`play_job_round`, so the replay is
the simulator's own arithmetic, not a second copy of it: a run starts after its restart penalty
and overhead, progresses at ``throughput.run_rate`` (copies of a forked job bounded together by
their combined batch under ``goodput`` accounting), stops at its step budget, and the job
finishes at the exact moment its steps reach the target.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from estimators.throughput import RunRate, ThroughputModel
from hadar.core.cluster import Cluster
from hadar.core.job_service import JobService
from hadar.core.jobs import Job, Placement
from hadar.policy import Assignment


@dataclass(frozen=True)
class Run:
    """A run starting ``start`` seconds into the round at ``rate`` steps/s for at most ``cap`` steps."""

    start: float
    rate: float
    cap: float

    def steps_by(self, t: float) -> float:
        return min(self.cap, self.rate * max(0.0, t - self.start))

    def stop_time(self) -> float:
        return self.start + (self.cap / self.rate if self.rate > 0 else float("inf"))


def steps_by(runs: Sequence[Run], t: float) -> float:
    return sum(r.steps_by(t) for r in runs)


def reach_slack(target: float) -> float:
    """How far short of ``target`` steps counts as reaching it: floating-point error, never
    work. Relative as well as absolute, since step budgets that sum to a large target (a Pollux
    job's samples, about 1e7-1e9) can add up to an ulp or two (1e-8) below it, and the job then
    finished only at the round's end instead of when its copies' budgets ran out."""
    return 1e-9 + 1e-12 * abs(target)


def time_to_reach(runs: Sequence[Run], target: float, horizon: float) -> float | None:
    """Earliest t <= horizon at which the runs together have done ``target`` steps (within
    :func:`reach_slack`), else None."""
    if target <= 0:
        return 0.0
    slack = reach_slack(target)
    if steps_by(runs, horizon) < target - slack:
        return None
    points = sorted(
        {0.0, horizon, *(r.start for r in runs), *(min(r.stop_time(), horizon) for r in runs)}
    )
    points = points[: bisect_right(points, horizon)]
    # the first point by which the target is reached, by bisection: steps_by is non-decreasing
    # in t (each run's term is, and so is a float sum of such terms in a fixed order), so this
    # is the point a scan from 0 would find, after O(log n) sums instead of O(n)
    i = bisect_left(
        range(len(points)), True, key=lambda j: steps_by(runs, points[j]) >= target - slack
    )
    if i == len(points):
        return horizon
    lo, hi = (points[i - 1] if i else 0.0), points[i]
    done_lo = steps_by(runs, lo)
    # runs going on just after lo (a run whose cap ends exactly at lo counts no more, even
    # where rate x time falls a rounding error short of the cap)
    slope = sum(r.rate for r in runs if r.start <= lo < r.stop_time())
    if slope <= 0:
        # nothing runs between lo and hi: what was missing at lo is such a rounding error,
        # and the target was reached when the last run stopped, at lo
        return lo
    return min(hi, lo + (target - done_lo) / slope)


@dataclass(frozen=True)
class JobRound:
    """What one job's runs (one per assignment, in order) do in one round."""

    assignments: tuple[Assignment, ...]
    runs: tuple[Run, ...]
    rates: tuple[RunRate, ...]
    remaining: float
    """Steps the job had left when the round started."""
    round_s: float
    restarted: bool
    """Some run resumed from a checkpoint (paid the restart penalty)."""
    finish_at: float | None
    """Seconds into the round at which the job finished; None if it did not."""
    step_credit: tuple[float, ...]
    """Per run: steps-accounting progress per credited unit (``steps`` over ``goodput``)."""
    free_at: tuple[float, ...] = ()
    """Per run, seconds into the round when it got its GPUs (0 but for a refill)."""

    @property
    def end(self) -> float:
        return self.round_s if self.finish_at is None else self.finish_at

    @property
    def done(self) -> float:
        """Progress units done this round."""
        return steps_by(self.runs, self.end)

    def done_by(self, t: float) -> float:
        """Progress units done ``t`` seconds into the round (never past the job's target)."""
        return min(self.remaining, steps_by(self.runs, min(t, self.end)))

    def stops(self) -> list[float]:
        """Per run, when it stopped holding its GPUs (finished, budget spent or round over); a
        refill that never got its GPUs (:attr:`Assignment.after`) stops when it would start."""
        out = []
        for r in self.runs:
            stop = min(self.end, r.stop_time()) if r.rate > 0 else self.end
            out.append(max(stop, r.start))
        return out

    def ran(self) -> list[float]:
        """Per run, the seconds it trained."""
        return [
            max(0.0, min(s, self.end) - r.start)
            for r, s in zip(self.runs, self.stops(), strict=True)
        ]


def job_restart_s(job: Job, restart_penalty_s: float) -> float:
    """The checkpoint-restart penalty ``job`` pays (its own ``restart_s`` where it has one)."""
    return job.restart_cost_s(restart_penalty_s)


def play_job_round(
    job: Job,
    remaining: float,
    assigns: Sequence[Assignment],
    current: Mapping[tuple[int, int], Placement],
    throughput: ThroughputModel,
    cluster: Cluster,
    round_s: float,
    restart_penalty_s: float,
    fork_progress: str,
    free_at: Sequence[float] | None = None,
    run_rates: Sequence[RunRate] | None = None,
) -> JobRound:
    """Play ``job``'s ``assigns`` (its runs this round) from ``remaining`` steps; ``free_at``:
    per run, seconds into the round when its GPUs are free (a refill's: when the run it follows
    stopped; default 0). A run starts after that, its restart penalty and its overhead.
    ``run_rates``: per run, ``throughput.run_rate`` of it, where the caller has them already."""
    done_before = job.total_steps - remaining
    restart_s = job_restart_s(job, restart_penalty_s)
    rates = (
        [throughput.run_rate(job, a.placement, cluster, done_before, a.batch_size) for a in assigns]
        if run_rates is None
        else list(run_rates)
    )
    rates = _fork_bound(job, rates, done_before, throughput, fork_progress)
    runs: list[Run] = []
    credit: list[float] = []
    restarted = False
    offsets = [0.0] * len(assigns) if free_at is None else list(free_at)
    for a, run_rate, offset in zip(assigns, rates, offsets, strict=True):
        rate = run_rate.rate
        credited = rate if run_rate.step_rate is None else run_rate.step_rate
        credit.append(credited / rate if rate > 0 else 0.0)
        if a.restart is not None:
            moved = a.restart
        else:  # a refill loads its job where another job's process ran
            moved = a.after is not None or current.get(a.run_key) != a.placement
        resumed = moved and remaining < job.total_steps
        restarted = restarted or resumed
        start = min(round_s, offset + (restart_s if resumed else 0.0) + a.overhead_s)
        cap = remaining if a.step_budget is None else min(a.step_budget, remaining)
        runs.append(Run(start, rate, max(cap, 0.0)))
    finish_at = time_to_reach(runs, remaining, round_s) if any(r.rate > 0 for r in runs) else None
    return JobRound(
        tuple(assigns),
        tuple(runs),
        tuple(rates),
        remaining,
        round_s,
        restarted,
        finish_at,
        tuple(credit),
        tuple(offsets),
    )


def play_plan(
    assignments: Sequence[Assignment],
    jobs: Mapping[int, tuple[Job, float]],
    current: Mapping[tuple[int, int], Placement],
    throughput: ThroughputModel,
    cluster: Cluster,
    round_s: float,
    restart_penalty_s: float,
    fork_progress: str,
) -> dict[int, JobRound]:
    """Every job's round under a plan (``jobs``: id -> (job, remaining steps)), in plan order
    except that a job with a refill (:attr:`Assignment.after`) plays after the runs it follows,
    its refill starting when the run of that job on its node stopped."""
    by_job: dict[int, list[Assignment]] = {}
    for a in assignments:
        by_job.setdefault(a.job_id, []).append(a)
    refilling = {a.job_id for a in assignments if a.after is not None}
    stopped: dict[tuple[int, str], float] = {}  # (job, node): when its run there stopped
    out: dict[int, JobRound] = {}
    for job_id in sorted(by_job, key=lambda j: j in refilling):  # stable: plan order otherwise
        assigns = by_job[job_id]
        job, remaining = jobs[job_id]
        free_at = [
            0.0 if a.after is None else stopped.get((a.after, a.nodes[0]), round_s) for a in assigns
        ]
        outcome = play_job_round(
            job,
            remaining,
            assigns,
            current,
            throughput,
            cluster,
            round_s,
            restart_penalty_s,
            fork_progress,
            free_at,
        )
        for a, stop in zip(assigns, outcome.stops(), strict=True):
            for node in a.nodes:
                stopped[(job_id, node)] = stop
        out[job_id] = outcome
    return {j: out[j] for j in by_job}


def book_job_round(service: JobService, outcome: JobRound, now: float) -> float:
    """Book ``outcome`` on ``service`` (time on each GPU type, first start, rounds, finish) and
    return the job's remaining steps after it."""
    done = outcome.done
    for a, ran in zip(outcome.assignments, outcome.ran(), strict=True):
        service.charge(
            a.num_gpus,
            ran,
            {k for per in a.placement.values() for k, c in per.items() if c > 0},
        )
    if service.first_start is None and done > 0:
        service.first_start = now + min(r.start for r in outcome.runs)
    service.rounds += 1
    remaining = max(0.0, outcome.remaining - done)
    if outcome.finish_at is not None or remaining <= 1e-6:
        remaining = 0.0
        service.finish = now + outcome.end
    return remaining


def _fork_bound(
    job: Job, rates: list[RunRate], done: float, throughput: ThroughputModel, mode: str
) -> list[RunRate]:
    """With ``goodput`` accounting, a job's copies running together progress at most as one job
    at their combined batch (``hadar.workloads.fork_efficiency``). One copy, jobs without
    efficiency data and ``steps`` accounting are unchanged."""
    if mode != "goodput" or len(rates) < 2:
        return rates
    # imported here: the efficiency data loads pandas and SciPy, which listing the policies
    # (HadarE imports this module) must not (tests/hadar/commands/test_startup_imports.py)
    from hadar.workloads.fork_efficiency import fork_factors

    factors = fork_factors(job, [r.batch_size for r in rates], done, throughput)
    if factors is None:
        return rates
    combined = sum(r.batch_size or 0 for r in rates)
    together = throughput.efficiency(job, combined, done) if combined else None
    bounded: dict[tuple[RunRate, float], RunRate] = {}  # copies on like GPUs share one
    out = []
    for r, f in zip(rates, factors, strict=True):
        hit = bounded.get((r, f))
        if hit is None:
            hit = bounded[(r, f)] = replace(
                r,
                rate=r.rate * f,
                efficiency=together if together is not None else r.efficiency,
                step_rate=r.rate,
            )
        out.append(hit)
    return out
