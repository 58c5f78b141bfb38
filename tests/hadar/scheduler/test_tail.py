"""Hadar's tail guard (hadar/scheduler/tail.py, issue 27): the jobs whose JCT, if they waited,
would raise the bound on the percentile's order statistics are placed right after the TTD
guard's, with that bound as deadline; at ``p = 100`` it is the TTD guard's longest path."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from estimators.throughput import GavelThroughputTable, TableKey
from hadar.api import simulate
from hadar.core.cluster import Cluster, Node
from hadar.core.jobs import Job, JobStatus
from hadar.policy import RoundContext
from hadar.scheduler import HadarConfig, HadarPolicy
from hadar.scheduler.tail import Finished, jobs_above, tail_jobs
from hadar.valuation import value_jobs

# every job twice as fast on "fast" as on "slow": 2 steps/s at best
TABLE = GavelThroughputTable(
    {TableKey("A", "fast", 1, True): 2.0, TableKey("A", "slow", 1, True): 1.0}
)
CLUSTER = Cluster("two", (Node("f", {"fast": 1}), Node("s", {"slow": 1})))


def _ctx(steps: list[float], now: float = 360.0) -> RoundContext:
    statuses = tuple(JobStatus(Job(i, "A", 1, 1e5), s) for i, s in enumerate(steps))
    return RoundContext(
        now=now,
        round_index=1,
        round_s=360.0,
        cluster=CLUSTER,
        jobs=statuses,
        current={},
        throughput=TABLE,
        restart_penalty_s=10.0,
    )


def _tail(steps: list[float], percentile: float, finished: list[float] = ()) -> list:
    ctx = _ctx(steps)
    return tail_jobs(value_jobs(ctx, ctx.jobs), ctx, percentile, list(finished))


def test_the_order_statistics_a_percentile_interpolates_between():
    # p99 of 480 values: ascending ranks 474 and 475 (h = 474.21), the 6th and 5th largest
    assert jobs_above(480, 99) == (4, 5)
    assert np.percentile(np.arange(480.0), 99) == pytest.approx(474.21)
    # p99 of 10 values: the largest and the second largest (h = 8.91)
    assert jobs_above(10, 99) == (0, 1)
    # a whole h is one order statistic: 0.99 * 100 is not exactly 99 in floating point
    assert jobs_above(101, 99) == (1,)
    assert jobs_above(480, 100) == (0,)
    assert jobs_above(0, 99) == ()


def test_the_job_at_the_percentile_bound_is_protected_with_that_bound_as_deadline():
    # at t = 360 s: predicted JCTs 360 + 500, 360 + 400, 360 + 50 s. The median of three is the
    # second largest (760 s): job 1, deadline 400 s from now; the longest may finish above it
    got = _tail([1000.0, 800.0, 100.0], 50)
    assert got == [(1, pytest.approx(400.0))]
    # two finished jobs with longer JCTs move the median up to the longest job present
    got = _tail([1000.0, 800.0, 100.0], 50, finished=[5000.0, 4000.0])
    assert got == [(0, pytest.approx(500.0))]
    # at the maximum (p = 100) it is the longest job, as the TTD guard's longest path
    assert [i for i, _ in _tail([1000.0, 800.0, 100.0], 100)] == [0]


@pytest.mark.parametrize("gang", [1, 2])
def test_only_a_one_gpu_job_displaces_running_jobs_to_keep_the_bound(gang: int):
    # job 1 is at the median's bound (deadline 400 s: only the fast GPUs make it); job 0 holds
    # both slow GPUs and the short job 2 both fast ones, so no GPU is idle
    table = GavelThroughputTable(
        {
            TableKey("A", gpu, w, True): rate * w
            for gpu, rate in (("fast", 2.0), ("slow", 1.0))
            for w in (1, 2)
        }
    )
    cluster = Cluster("four", (Node("f", {"fast": 2}), Node("s", {"slow": 2})))
    jobs = (Job(0, "A", 2, 1e5), Job(1, "A", gang, 1e5), Job(2, "A", 2, 1e5))
    ctx = RoundContext(
        now=360.0,
        round_index=1,
        round_s=360.0,
        cluster=cluster,
        jobs=tuple(
            JobStatus(j, s) for j, s in zip(jobs, (2000.0, 800.0 * gang, 200.0), strict=True)
        ),
        current={(0, 0): {"s": {"slow": 2}}, (2, 0): {"f": {"fast": 2}}},
        throughput=table,
        restart_penalty_s=10.0,
    )
    assert tail_jobs(value_jobs(ctx, ctx.jobs), ctx, 50, []) == [(1, pytest.approx(400.0))]
    policy = HadarPolicy(
        HadarConfig(tail_percentile=50, ttd_guard=False, max_rho=None, type_matching=False)
    )
    nodes = {a.job_id: a.nodes for a in policy.decide(ctx).assignments}
    if gang == 1:  # it takes a fast GPU from the running job 2
        assert nodes[1] == ("f",) and nodes[2] == ("s",)
    else:  # a gang would preempt a job per GPU: it waits for idle GPUs; job 2 keeps its own
        assert nodes[2] == ("f",) and nodes.get(1) != ("f",)


def test_no_job_is_protected_when_the_work_not_one_job_sets_the_bound():
    # ten 150-second jobs at the median: 1,500 GPU-seconds over 2 GPUs is 750 s, more than any
    # one of them needs, so none has to start now to keep the bound
    assert _tail([1000.0, 800.0] + [300.0] * 10, 50) == []
    # one of them alone is on the path
    assert [i for i, _ in _tail([1000.0, 800.0, 300.0], 0.0)] == [2]


def test_finished_jobs_are_counted_once_and_survive_a_restore():
    f = Finished()
    a, b = Job(0, "A", 1, 10.0, arrival=0.0), Job(1, "A", 1, 10.0, arrival=100.0)
    f.observe(0.0, [JobStatus(a, 10.0)])
    f.observe(360.0, [JobStatus(a, 5.0), JobStatus(b, 10.0)])
    f.observe(720.0, [JobStatus(b, 5.0)])
    f.observe(1080.0, [])
    assert f.jcts == [720.0, 980.0]  # each at the first round it was gone
    again = Finished.from_json(f.to_json())
    assert again == f
    policy = HadarPolicy(HadarConfig(tail_percentile=99))
    policy.finished = f
    other = HadarPolicy(HadarConfig(tail_percentile=99))
    other.restore(policy.state())
    assert other.finished == f and other.state() == policy.state()


def test_tail_percentile_is_validated():
    with pytest.raises(ValueError, match="tail_percentile"):
        HadarConfig(tail_percentile=0)
    with pytest.raises(ValueError, match="tail_percentile"):
        HadarConfig(tail_percentile=101)


def _jobs(workload: str, seed: int, **opts: str) -> pd.DataFrame:
    run = simulate("sim-60gpu", workload, policy="hadar", seed=seed, policy_options=opts or None)
    return run.jobs


def test_at_100_the_tail_guard_is_the_ttd_guards_schedule():
    # both order statistics are the maximum, which the TTD guard already protects
    unguarded = _jobs("philly-48", 2, tail_percentile="none")
    pd.testing.assert_frame_equal(_jobs("philly-48", 2, tail_percentile="100"), unguarded)


def test_the_tail_guard_is_on_by_default():
    assert HadarConfig().tail_percentile == 99


def test_the_tail_guard_lowers_p99():
    default = _jobs("philly-96", 0, tail_percentile="none")
    tail = _jobs("philly-96", 0, tail_percentile="99")
    p99 = np.percentile(tail["jct"], 99)
    assert p99 < 0.95 * np.percentile(default["jct"], 99)  # 5.39 h against 5.85 h
    assert tail["jct"].max() == pytest.approx(default["jct"].max())  # TTD unchanged here
    assert tail["jct"].mean() <= 1.01 * default["jct"].mean()
