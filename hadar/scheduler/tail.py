"""Hadar's tail guard (``tail_percentile``; docs/hadar.md, "Tail guard"): the TTD guard protects
the largest completion time, this protects the p-th percentile of the JCTs.

The p-th percentile of N JCTs (numpy's default, linear interpolation) is a weighted mean of the
two order statistics of ascending ranks ``floor(h)`` and ``ceil(h)``, ``h = p (N - 1)`` (for
p99 of 480 jobs: the 6th and the 5th largest, weights 0.79 and 0.21). Each round the guard lists
the JCTs of the jobs that finished and, for every job present, the JCT it would have if it ran
from now on its fastest placement (elapsed + best remaining time: a lower bound). For each of the
two ranks, the value at that rank of the list is a bound ``P`` on that order statistic; a job
within the tolerance of ``P`` would raise it if it waited, so it is placed right after the TTD
guard's jobs, with ``P`` as its deadline: the latest start that still finishes it by ``P``, as
the TTD guard starts a job at the latest start that keeps the TTD bound. As with the TTD guard's
bound, a job is on that path only when its own remaining time, not the work, sets the bound: its
best remaining time must reach the remaining work of the jobs not above ``P`` (GPU-seconds at best
rates) spread over every GPU. With ``p = 100`` both ranks are the maximum and this is the TTD
guard's longest-path rule.

Why: the utility (inverse remaining time) runs the short jobs first, SRPT on the fastest GPUs, so
the few long jobs that are not the longest start hours late on slow GPUs and set the p99 JCT;
finish-time fairness does not move them (their 1/n share of a cluster shared by hundreds of jobs
is small). The guard starts them when their finish reaches the percentile bound.

Displacing (:func:`may_displace`): a job on the tail path takes idle GPUs that meet its deadline;
when none do, a one-GPU job takes the GPUs of a running job (preempting it), a gang does not. The
percentile counts jobs: a one-GPU job displaces at most one job to keep one job under the bound, a
gang of W up to W, each losing its place and paying a restart, for hours (the tail's jobs are the
long ones). Measured on the load sweep over seeds 0-4 (``docs/history.md``, "Tail under
continuous arrivals: sixth session, seeds 0-4"): with gangs displacing, the average JCT was lost to Gavel's in
12 of 40 cells, by up to 13 %, and the window p99 in 18 (geometric mean of Hadar / Gavel 1.008);
with gangs on idle GPUs only, the average in 4 cells, by at most 1.9 %, and the p99 in 16 (0.994);
``philly-480`` keeps every target. A gang still gets the TTD guard, the deferral bound and idle
GPUs freed by finishing jobs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hadar.core.jobs import JobStatus
from hadar.policy import RoundContext
from hadar.scheduler.ttd import CRITICAL_TOLERANCE_ROUNDS, remaining_times
from hadar.valuation import JobValuation


def jobs_above(n: int, percentile: float) -> tuple[int, ...]:
    """For each order statistic the ``percentile`` of ``n`` values interpolates between (numpy's
    default, linear: ascending ranks ``floor(h)`` and ``ceil(h)``, ``h = p (n - 1)``), how many
    values lie above it; one number when ``h`` is whole (``p = 100``: the maximum, 0 above)."""
    if n <= 0:
        return ()
    h = round(percentile / 100.0 * (n - 1), 9)  # 0.99 * 100 is 99.00000000000001
    return tuple(sorted({n - 1 - math.ceil(h), n - 1 - math.floor(h)}))


@dataclass
class Finished:
    """The JCTs of the jobs that finished (the tail guard's percentile counts them). A job that
    left between two rounds is taken to finish at the later one: its JCT is over by less than a
    round."""

    arrivals: dict[int, float] = field(default_factory=dict)
    """Arrival time of each job present at the last observation."""
    jcts: list[float] = field(default_factory=list)

    def observe(self, now: float, jobs: Sequence[JobStatus]) -> None:
        present = {s.job_id for s in jobs}
        self.jcts += [now - a for j, a in sorted(self.arrivals.items()) if j not in present]
        self.arrivals = {s.job_id: s.job.arrival for s in jobs}

    def to_json(self) -> dict[str, Any]:
        return {
            "arrivals": {str(j): a for j, a in self.arrivals.items()},
            "jcts": list(self.jcts),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Finished:
        arrivals = {int(j): float(a) for j, a in data["arrivals"].items()}
        return cls(arrivals, [float(x) for x in data["jcts"]])


def may_displace(num_gpus: int) -> bool:
    """Whether the tail guard may take GPUs that running jobs hold for a job of ``num_gpus``
    GPUs: only for a one-GPU job (module docstring, "Displacing")."""
    return num_gpus == 1


def tail_jobs(
    vals: list[JobValuation],
    ctx: RoundContext,
    percentile: float,
    finished: Sequence[float],
    best: Sequence[float] | None = None,
) -> list[tuple[int, float]]:
    """The jobs on the path of the ``percentile`` JCT bound (module docstring), longest predicted
    JCT first (ties: position), each with its deadline in seconds from now; ``finished`` are the
    JCTs of the jobs that left; ``best``: the jobs' :func:`~hadar.scheduler.ttd.remaining_times`,
    when the caller has them."""
    best = remaining_times(vals, ctx) if best is None else best
    elapsed = [ctx.now - v.status.job.arrival for v in vals]
    pred = [e + b for e, b in zip(elapsed, best, strict=True)]
    values = sorted([*finished, *(p for p in pred if math.isfinite(p))], reverse=True)
    if not values:
        return []
    tol = CRITICAL_TOLERANCE_ROUNDS * ctx.round_s
    out: dict[int, float] = {}
    for k in jobs_above(len(values), percentile):
        bound = values[k]
        below = [i for i, p in enumerate(pred) if p <= bound + tol]
        work_bound = sum(vals[i].status.job.num_gpus * best[i] for i in below) / max(
            1, ctx.cluster.total_gpus
        )
        for i in below:
            if i not in out and pred[i] >= bound - tol and best[i] >= work_bound - tol:
                out[i] = max(bound, pred[i]) - elapsed[i]
    return sorted(out.items(), key=lambda it: (-pred[it[0]], it[0]))
