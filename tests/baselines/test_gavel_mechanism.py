"""Gavel's round-based mechanism: one type per job per round, exact gangs, rotation by priority,
reallocation timing (normal vs Gavel-compatible), placement stickiness, FIFO/makespan variants."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace

import numpy as np
import pytest

from baselines.gavel import GavelFifoPolicy, GavelMakespanPolicy, GavelPolicy, fastest_first
from hadar.policy import make_policy
from hadar.simulator import SimConfig, simulate
from tests.baselines.helpers import LM, R18, R50, TABLE, context, job, mixed_nodes, one_type, status


def test_fastest_type_first_by_the_jobs_measured_throughputs():
    # columns k80, p100, v100: Gavel's own order for jobs that are fastest on V100 ...
    assert fastest_first(("k80", "p100", "v100"), np.array([[1.0, 3.0, 5.0], [2.0, 4.0, 8.0]])) == [
        "v100",
        "p100",
        "k80",
    ]
    # ... but measured figures decide, not names: jobs fastest on the K80 column walk it first
    assert fastest_first(("k80", "p100", "v100"), np.array([[9.0, 3.0, 5.0], [8.0, 1.0, 4.0]])) == [
        "k80",
        "v100",
        "p100",
    ]
    # a job that cannot run anywhere does not count; ties keep the cluster's order
    assert fastest_first(("a", "b"), np.array([[0.0, 0.0], [2.0, 2.0]])) == ["a", "b"]


@pytest.mark.parametrize("name", ["gavel", "gavel-fifo", "gavel-makespan"])
def test_one_gpu_type_per_job_and_exactly_w_gpus_every_round(name):
    cluster = mixed_nodes()  # every node has two types, so mixing would be easy
    jobs = [
        job(i, gpus=g, steps=s, arrival=a, job_type=t)
        for i, (g, s, a, t) in enumerate(
            [
                (1, 30_000, 0, R18),
                (2, 40_000, 0, LM),
                (4, 9_000, 0, R50),
                (1, 20_000, 0, R50),
                (2, 60_000, 0, R18),
                (4, 50_000, 400, LM),
                (1, 8_000, 800, LM),
                (2, 5_000, 800, R50),
                (1, 40_000, 1500, R18),
            ]
        )
    ]
    result = simulate(cluster, jobs, make_policy(name), TABLE, SimConfig(restart_penalty_s=10.0))
    assert all(j.finish is not None for j in result.jobs)
    per_run: dict[tuple[int, int], list] = defaultdict(list)
    for p in result.placements:
        per_run[(p.round_index, p.job_id)].append(p)
    assert per_run
    gang = {j.job_id: j.num_gpus for j in jobs}
    for (_, job_id), recs in per_run.items():
        assert len({p.gpu_type for p in recs}) == 1, recs
        assert sum(p.count for p in recs) == gang[job_id]


def _rounds(policy, cluster, jobs, n_rounds):
    """Drive ``policy`` for ``n_rounds`` one-slot rounds; every job runs a full slot when placed."""
    on = {j.job_id: 0.0 for j in jobs}
    current: dict = {}
    ran = []
    for r in range(n_rounds):
        statuses = [status(j, time_on_type={"v100": on[j.job_id]}) for j in jobs]
        plan = policy.decide(
            context(cluster, statuses, current=current, now=360.0 * r, round_index=r)
        )
        ran.append(sorted(plan.jobs()))
        for a in plan.assignments:
            on[a.job_id] += 360.0
        current = plan.allocation()
    return ran


def test_priorities_rotate_equal_jobs_round_robin():
    # 4 equal 1-GPU jobs on 2 GPUs: the LP gives each x = 0.5 (sum x <= 2, x >= t), so the
    # mechanism must alternate: after a round, the two that ran have 3x the time of the others.
    jobs = [job(i) for i in range(4)]
    ran = _rounds(GavelPolicy(), one_type(2), jobs, 6)
    assert ran == [[0, 1], [2, 3], [0, 1], [2, 3], [0, 1], [2, 3]]


def test_rotation_follows_an_unequal_allocation():
    # One GPU, two equal jobs, priority weight 2 on job 0: the LP gives x = [2/3, 1/3] (see
    # test_gavel_lp), so over 6 rounds job 0 must run 4 times and job 1 twice. By hand, with the
    # half-round seed (180 s) each: priorities x / (own time / total time) give 0,1,0,0,1,0.
    jobs = [replace(job(0), weight=2.0), job(1)]
    ran = _rounds(GavelPolicy(), one_type(1), jobs, 6)
    assert ran == [[0], [1], [0], [0], [1], [0]]


def test_reallocates_at_every_job_set_change_in_normal_mode():
    p = GavelPolicy()
    cluster = one_type(4)
    a, b, c = job(0), job(1), job(2, arrival=300)
    plan0 = p.decide(context(cluster, [status(a), status(b)]))
    plan1 = p.decide(context(cluster, [status(a), status(b)], current=plan0.allocation(), now=360))
    plan2 = p.decide(
        context(cluster, [status(a), status(b), status(c)], current=plan1.allocation(), now=720)
    )
    plan3 = p.decide(context(cluster, [status(a), status(c)], current=plan2.allocation(), now=1080))
    assert [pl.info["lp_solved"] for pl in (plan0, plan1, plan2, plan3)] == [
        True,
        False,
        True,
        True,
    ]
    assert plan2.jobs() == {0, 1, 2}


def test_reallocation_interval_and_unallocated_jobs_in_compatible_mode():
    # Gavel: recompute at most every 1920 s, except while the last reset happened at time 0.
    p = GavelPolicy(reallocation_interval=1920.0)
    cluster = one_type(4)
    jobs = [job(0), job(1), job(2, arrival=200), job(3, arrival=500)]
    st = {j.job_id: status(j) for j in jobs}
    plan = p.decide(context(cluster, [st[0], st[1]]))
    assert plan.info["lp_solved"]  # first allocation
    plan = p.decide(context(cluster, [st[0], st[1], st[2]], current=plan.allocation(), now=360))
    assert plan.info["lp_solved"]  # last reset was at t=0: Gavel resets again
    plan = p.decide(context(cluster, [st[i] for i in range(4)], current=plan.allocation(), now=720))
    assert not plan.info["lp_solved"]  # 360 s since the last reset < 1920 s
    # Job 3 has no allocation yet: the walk gives it the 4th GPU, which then stays idle (Gavel).
    assert plan.jobs() == {0, 1, 2}
    assert plan.info["idle_claimed_gpus"] == 1
    plan = p.decide(
        context(cluster, [st[i] for i in range(4)], current=plan.allocation(), now=2280)
    )
    assert plan.info["lp_solved"]  # 1920 s after the reset at 360 s
    assert plan.jobs() == {0, 1, 2, 3}


def test_keeps_last_rounds_gpus_when_still_free():
    cluster = one_type(2, nodes=3)
    j = job(0, gpus=2)
    p = GavelPolicy()
    plan = p.decide(context(cluster, [status(j)], current={(0, 0): {"n2": {"v100": 2}}}, now=360))
    assert plan.allocation()[(0, 0)] == {"n2": {"v100": 2}}  # fresh placement would use n0


def test_new_placement_uses_fewest_nodes():
    cluster = one_type(4, nodes=2)
    p = GavelPolicy()
    plan = p.decide(context(cluster, [status(job(0, gpus=1)), status(job(1, gpus=4))]))
    placement = plan.allocation()[(1, 0)]
    assert len(placement) == 1 and sum(placement[n]["v100"] for n in placement) == 4


def test_fifo_variant_never_runs_jobs_without_allocation():
    # 3 GPUs; arrival order W = 2, 2, 1. FIFO gives job 0 the type (x=1), job 1 does not fit,
    # which stops the allocation: job 2 (1 GPU) gets nothing and FIFO never schedules it, even
    # though a GPU is free. Max-min fairness would run it.
    cluster = one_type(3)
    statuses = [status(job(0, gpus=2)), status(job(1, gpus=2)), status(job(2, gpus=1))]
    assert GavelFifoPolicy().decide(context(cluster, statuses)).jobs() == {0}
    assert 2 in GavelPolicy().decide(context(cluster, statuses)).jobs()


def test_makespan_variant_gives_longer_jobs_more_time():
    p = GavelMakespanPolicy()
    statuses = [status(job(0), remaining=3000.0), status(job(1), remaining=1000.0)]
    x = p.allocate(statuses, np.array([[1.0], [1.0]]), np.array([1]), ["v100"])
    assert x[:, 0] == pytest.approx([0.75, 0.25])


def test_same_inputs_same_decisions():
    cluster = mixed_nodes()
    statuses = [status(job(i, gpus=1 + i % 3, job_type=[R18, LM, R50][i % 3])) for i in range(10)]
    a = GavelPolicy().decide(context(cluster, statuses))
    b = GavelPolicy().decide(context(cluster, statuses))
    assert a.allocation() == b.allocation()
