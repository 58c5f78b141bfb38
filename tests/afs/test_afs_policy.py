"""The afs and afs-het policies (afs/policy.py) and Gavel's table between measured GPU counts
(estimators/gang_sizes.py): churn events, shrinking a running job for a newcomer, curves."""

from __future__ import annotations

import functools
from dataclasses import replace

import pytest

from afs.policy import CurveCache, charge_restart, fill_curve, job_curve, sample_counts
from estimators.gang_sizes import InterpolatedGangs, interpolate
from estimators.throughput import GavelThroughputTable
from hadar.api import simulate
from hadar.core.cluster_config import load_cluster
from hadar.core.jobs import Job, JobStatus
from hadar.policy import RoundContext, make_policy
from hadar.scenario import load_scenario
from hadar.workloads.pollux import pollux_jobs

TABLE = GavelThroughputTable.bundled()


def test_interpolation_between_measured_counts():
    points = {1: 1.0, 2: 2.0, 4: 3.0, 8: 4.0}
    assert interpolate(points, 3) == 2.5
    assert interpolate(points, 6) == 3.5
    assert interpolate(points, 8) == 4.0
    assert interpolate(points, 16) == 4.0  # no gain beyond the largest measured count
    assert interpolate({2: 1.0, 4: 2.0}, 1) == 0.0
    assert interpolate({2: 1.0, 4: 0.0}, 3) == 0.0  # cannot run at 4: no rate in between


def test_an_elastic_gavel_job_runs_at_the_placements_gpu_count():
    model = InterpolatedGangs(TABLE)
    cluster = load_cluster("sim-60gpu")
    jt = "ResNet-50 (batch size 64)"
    job = Job(0, jt, 4, 1000.0, min_gpus=1, max_gpus=8)
    node = next(n for n in cluster.nodes if n.gpus.get("v100", 0) >= 4)
    three = {node.name: {"v100": 3}}
    want = (TABLE.lookup(jt, "v100", 2) + TABLE.lookup(jt, "v100", 4)) / 2
    assert model.rate(job, three, cluster) == pytest.approx(want)
    four = {node.name: {"v100": 4}}
    rigid = Job(1, jt, 4, 1000.0)
    assert model.rate(rigid, four, cluster) == TABLE.rate(rigid, four, cluster)


def test_curves_sample_powers_of_two_and_interpolate():
    assert sample_counts(1, 12) == [1, 2, 4, 8, 12]
    assert sample_counts(3, 3) == [3]
    assert fill_curve({1: 1.0, 4: 4.0}, 5) == (0.0, 1.0, 2.0, 3.0, 4.0, 0.0)


@functools.cache
def _pollux_setup():
    cluster, _, throughput = load_scenario("pollux-64t4", pollux_jobs("pollux-6")[:6])
    return cluster, throughput


def _pollux_ctx(jobs, done_fraction=0.0, current=None, now=0.0):
    cluster, throughput = _pollux_setup()
    statuses = tuple(JobStatus(j, j.total_steps * (1 - done_fraction)) for j in jobs)
    return RoundContext(now, 0, 60.0, cluster, statuses, current or {}, throughput)


def test_cached_curve_shapes_equal_direct_curves_at_any_progress():
    jobs = pollux_jobs("pollux-6")[:6]
    cache = CurveCache()
    for fraction in (0.0, 0.8):
        ctx = _pollux_ctx(jobs, fraction)
        for st in ctx.jobs:
            direct = job_curve(ctx, st, "t4")
            assert cache.curve(ctx, st, "t4") == pytest.approx(direct, rel=1e-9)


def test_shares_change_only_at_churn_events():
    jobs = [replace(j, arrival=0.0) for j in pollux_jobs("pollux-6")[:5]]
    policy = make_policy("afs")
    first = policy.decide(_pollux_ctx(jobs))
    assert first.info["recomputed"]
    assert 0 < sum(a.num_gpus for a in first.assignments) <= 64
    assert first.jobs() == {j.job_id for j in jobs}  # fewer jobs than GPUs: all run
    steady = policy.decide(_pollux_ctx(jobs, 0.2, first.allocation(), 60.0))
    assert not steady.info["recomputed"]
    assert steady.allocation() == first.allocation()  # kept GPUs: no restart
    churn = policy.decide(_pollux_ctx(jobs[1:], 0.2, first.allocation(), 120.0))
    assert churn.info["recomputed"]


def test_a_running_job_shrinks_when_a_new_one_arrives():
    first, second = (replace(j, arrival=0.0) for j in pollux_jobs("pollux-6")[:2])
    second = replace(second, arrival=600.0)
    run = simulate("pollux-64t4", [first, second], "afs", round_s=60.0)
    gpus = run.placements.groupby(["round", "job"])["count"].sum().unstack(fill_value=0)
    times = run.placements.groupby("round")["time"].first()
    alone = gpus.loc[times[times < 600].index, first.job_id]
    shared = gpus.loc[times[(times >= 660) & (gpus[second.job_id] > 0)].index, first.job_id]
    assert len(alone) and len(shared)
    assert shared.iloc[0] < alone.iloc[-1]
    assert run.summary["completed"] == 2


def test_heterogeneous_afs_starts_a_job_on_its_fastest_type():
    cluster = load_cluster("sim-60gpu")
    jt = "ResNet-50 (batch size 64)"
    jobs = [Job(0, jt, 4, 1e6, min_gpus=1, max_gpus=4)]
    ctx = RoundContext(
        0.0,
        0,
        360.0,
        cluster,
        tuple(JobStatus(j, j.total_steps) for j in jobs),
        {},
        InterpolatedGangs(TABLE),
    )
    plan = make_policy("afs-het").decide(ctx)
    (a,) = plan.assignments
    assert {k for per in a.placement.values() for k in per} == {"v100"}
    assert a.num_gpus == 4


def test_charging_the_restart_delay_counts_it_in_the_rate_over_the_remaining_work():
    curve = (0.0, 1.0, 1.8, 2.4)
    assert charge_restart(curve, 100.0, 0.0, 0) == curve
    # 100 units at 2 per second take 50 s; with a 50 s delay, 100 s: an effective rate of 1
    assert charge_restart(curve, 100.0, 50.0, 0)[1] == pytest.approx(100 / 150)
    charged = charge_restart(curve, 100.0, 50.0, 2)
    assert charged[2] == 1.8 and charged[3] == pytest.approx(100 / (100 / 2.4 + 50))


@pytest.mark.parametrize("aware", [False, True])
def test_restart_aware_afs_keeps_shares_a_restart_could_not_pay_back(aware):
    jobs = [replace(j, arrival=0.0, restart_s=1e7) for j in pollux_jobs("pollux-6")[:5]]
    policy = make_policy("afs", restart_aware=aware)
    first = policy.decide(_pollux_ctx(jobs)).allocation()  # a first start is free
    churn = policy.decide(_pollux_ctx(jobs[1:], 0.5, first, 600.0)).allocation()
    kept = [churn.get(k) == first[k] for k in first if k[0] != jobs[0].job_id]
    # the paper's rule hands the finished job's GPUs out again; charged, no growth pays 1e7 s
    assert all(kept) if aware else not all(kept)
