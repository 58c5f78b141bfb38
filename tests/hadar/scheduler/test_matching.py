"""Hadar's type matching (hadar/scheduler/matching.py, issue 27 point 3): once the DP has chosen
which jobs run, their GPU types minimise the sum of projected completion times, so the job with
the largest speed-up on the fast type gets it, not the shortest."""

from __future__ import annotations

import math

import numpy as np
import pytest

from estimators.throughput import GavelThroughputTable, TableKey
from hadar.core.cluster import Cluster, Node
from hadar.core.jobs import Job, JobStatus
from hadar.policy import RoundContext
from hadar.scheduler import HadarConfig, HadarPolicy
from hadar.scheduler.matching import Group, projected_completion, solve_assignment

# "T" is 5x faster on the fast type, "C" 1.25x; "U" is equally fast on both
TABLE = GavelThroughputTable(
    {
        TableKey("T", "fast", 1, True): 5.0,
        TableKey("T", "slow", 1, True): 1.0,
        TableKey("C", "fast", 1, True): 5.0,
        TableKey("C", "slow", 1, True): 4.0,
        TableKey("U", "fast", 1, True): 2.0,
        TableKey("U", "slow", 1, True): 2.0,
    }
)
CLUSTER = Cluster("two", (Node("f", {"fast": 1}), Node("s", {"slow": 1})))


def _ctx(jobs: list[tuple[str, float]], round_s: float = 360.0) -> RoundContext:
    statuses = tuple(JobStatus(Job(i, t, 1, steps), steps) for i, (t, steps) in enumerate(jobs))
    return RoundContext(
        now=0.0,
        round_index=0,
        round_s=round_s,
        cluster=CLUSTER,
        jobs=statuses,
        current={},
        throughput=TABLE,
        restart_penalty_s=10.0,
    )


def _types(ctx: RoundContext, **knobs: object) -> dict[int, str]:
    """Each job's GPU type this round, without the guards (they place the longest job first)."""
    config = HadarConfig(ttd_guard=False, tail_percentile=None, max_rho=None, **knobs)  # type: ignore[arg-type]
    plan = HadarPolicy(config).decide(ctx)
    return {a.job_id: next(iter(next(iter(a.placement.values())))) for a in plan.assignments}


def test_the_job_with_the_largest_speed_up_gets_the_fast_gpu_not_the_shortest():
    # the DP (its utility is inverse remaining time) puts C, 4 times shorter at best, on the fast
    # GPU; a round there gives T 0.8 of a round of its best progress more than the slow GPU, C 0.2
    ctx = _ctx([("T", 5e5), ("C", 1e5)])
    assert _types(ctx, type_matching=False) == {0: "slow", 1: "fast"}
    assert _types(ctx, type_matching=True) == {0: "fast", 1: "slow"}


def test_a_job_that_a_fast_gpu_finishes_within_the_round_keeps_it_when_that_saves_more():
    # C finishes in 200 s on the fast GPU, 250 s on the slow one (50 s saved); T on the fast GPU
    # gains 0.8 x 360 = 288 s of its later time: T takes it. With a U-like job that gains nothing
    # instead of T, C keeps the fast GPU.
    assert _types(_ctx([("T", 5e5), ("C", 1000.0)]), type_matching=True) == {0: "fast", 1: "slow"}
    assert _types(_ctx([("U", 5e5), ("C", 1000.0)]), type_matching=True) == {0: "slow", 1: "fast"}


def test_equally_fast_types_keep_the_dps_plan():
    ctx = _ctx([("U", 5e5), ("U", 2e5)])
    assert _types(ctx, type_matching=True) == _types(ctx, type_matching=False)


def test_projected_completion_within_and_beyond_the_round():
    rates = np.array([1.0, 4.0])  # slow, fast
    # 1,000 steps, not started: 1,000 s on slow (beyond the round: 360 + 640 / 4), 250 s on fast
    got, stay = projected_completion(rates, 1, 4.0, False, False, 1000.0, 4.0, 360.0, 10.0)
    assert got[1] == pytest.approx(250.0)
    assert got[0] == pytest.approx(360.0 + (1000.0 - 360.0) / 4.0, rel=1e-5)
    assert list(stay) == pytest.approx([1000.0, 250.0])  # if it stayed there to the end
    # started and planned to stay on the fast type (kept): no restart there, one elsewhere
    got, stay = projected_completion(rates, 1, 4.0, False, True, 1e4, 4.0, 360.0, 10.0)
    assert got[1] == pytest.approx(360.0 + (1e4 - 4 * 360.0) / 4.0)
    assert got[0] == pytest.approx(360.0 + (1e4 - 350.0) / 4.0, rel=1e-5)
    assert list(stay) == pytest.approx([10.0 + 1e4, 2500.0])
    # a type the job cannot use
    assert math.isinf(
        projected_completion(np.array([0.0, 4.0]), 1, 4.0, False, False, 1e4, 4.0, 360.0, 10.0)[0][
            0
        ]
    )


def test_the_assignment_respects_each_types_gpus_with_gangs():
    # two 2-GPU jobs that both want type 1 (2 GPUs there): one gets it; a 1-GPU group of three
    # fills what is left of type 0 (4 GPUs)
    groups = [
        Group((0,), 2, 0, np.array([10.0, 1.0])),
        Group((1,), 2, 0, np.array([10.0, 2.0])),
        Group((2, 3), 1, 0, np.array([1.0, 1.0])),
    ]
    counts = solve_assignment(groups, np.array([4, 2]))
    assert counts is not None
    assert [list(c) for c in counts] == [[0, 1], [1, 0], [2, 0]]
    used = sum(c * g.gang for c, g in zip(counts, groups, strict=True))
    assert (used <= np.array([4, 2])).all()


def test_matching_never_breaks_capacity_on_the_paper_cluster():
    from hadar.simulator.engine import validate_plan
    from tests.hadar.helpers import TABLE as GAVEL
    from tests.hadar.helpers import context, small_cluster

    cluster = small_cluster()
    types = sorted(t for t in GAVEL.job_types if GAVEL.gang_sizes(t) >= {1, 2, 4})
    jobs = [Job(i, types[i % len(types)], (1, 2, 4)[i % 3], 1e3 * (i + 1)) for i in range(30)]
    ctx = context(cluster, jobs)
    plan = HadarPolicy(HadarConfig(type_matching=True)).decide(ctx)
    validate_plan(plan, ctx)
    assert plan.assignments


def test_an_overdue_job_moves_only_to_a_type_that_meets_its_deadline():
    """A job placed by the deferral bound joins the matching only on the types that still meet
    its deadline: T (5x faster on the fast GPU) cannot give the fast GPU up to C if the slow one
    would finish it too late."""
    from hadar.scheduler.matching import job_groups
    from hadar.valuation import value_jobs
    from primal_dual.find_alloc import Candidate

    ctx = _ctx([("T", 2000.0), ("C", 1e5)])
    vals = value_jobs(ctx, ctx.jobs)
    fast = np.array([[1, 0], [0, 0]])
    slow = np.array([[0, 0], [0, 1]])
    placed = {0: Candidate(fast, 5.0, 0.0, 1), 1: Candidate(slow, 4.0, 0.0, 1)}
    groups = {g.members[0]: g for g in job_groups({0: 0, 1: 1}, placed, vals, ctx, {0: 1000.0})}
    assert math.isinf(groups[0].cost[1])  # 2,000 s on the slow GPU: past its 1,000 s deadline
    groups = {g.members[0]: g for g in job_groups({0: 0, 1: 1}, placed, vals, ctx, {0: 3000.0})}
    assert math.isfinite(groups[0].cost[1])


def test_no_job_is_moved_past_its_fairness_bound():
    """Any job joins the matching only on the types whose projected completion keeps its
    finish-time fairness bound (the planned type stays allowed)."""
    from hadar.scheduler.matching import job_groups
    from hadar.valuation import value_jobs
    from primal_dual.find_alloc import Candidate

    ctx = _ctx([("T", 5000.0), ("C", 1e5)])
    vals = value_jobs(ctx, ctx.jobs)
    fast = np.array([[1, 0], [0, 0]])
    slow = np.array([[0, 0], [0, 1]])
    placed = {0: Candidate(fast, 5.0, 0.0, 1), 1: Candidate(slow, 4.0, 0.0, 1)}
    # T on the slow GPU this round: 360 + (5,000 - 360) / 5 = 1,288 s; on the fast one 1,000 s
    late = {g.members[0]: g for g in job_groups({0: 0, 1: 1}, placed, vals, ctx, {}, {0: 1100.0})}
    assert math.isinf(late[0].cost[1]) and math.isfinite(late[0].cost[0])
    ok = {g.members[0]: g for g in job_groups({0: 0, 1: 1}, placed, vals, ctx, {}, {0: 1300.0})}
    assert math.isfinite(ok[0].cost[1])


def test_cheapest_alone_is_the_programs_solution_when_it_applies():
    # random groups whose cheapest types are unique: where they all fit, the shortcut's counts
    # are the integer program's
    from hadar.scheduler.matching import cheapest_alone

    rng = np.random.default_rng(1)
    applied = 0
    for _ in range(40):
        n = int(rng.integers(2, 8))
        groups = [
            Group(
                tuple(range(10 * g, 10 * g + int(rng.integers(1, 4)))),
                int(rng.choice([1, 2])),
                int(rng.integers(0, 3)),
                rng.uniform(1.0, 5.0, 3),
            )
            for g in range(n)
        ]
        per_type = rng.integers(2, 12, 3)
        gangs = np.array([g.gang for g in groups], dtype=float)
        size = np.array([len(g.members) for g in groups], dtype=float)
        cost = np.array([g.cost for g in groups])
        alone = cheapest_alone(cost, gangs, size, per_type)
        if alone is None:
            continue
        applied += 1
        ok = gangs[:, None] <= per_type[None, :]
        gi, ki = np.nonzero(ok)
        from scipy import sparse
        from scipy.optimize import Bounds, LinearConstraint, milp

        a = sparse.csr_matrix(
            (
                np.concatenate([np.ones(gi.size), gangs[gi]]),
                (np.concatenate([gi, n + ki]), np.concatenate([np.arange(gi.size)] * 2)),
            ),
            shape=(n + 3, gi.size),
        )
        res = milp(
            cost[gi, ki],
            constraints=LinearConstraint(
                a, np.concatenate([size, np.zeros(3)]), np.concatenate([size, per_type])
            ),
            integrality=np.ones(gi.size),
            bounds=Bounds(np.zeros(gi.size), size[gi]),
        )
        x = np.zeros((n, 3), dtype=int)
        x[gi, ki] = np.round(res.x).astype(int)
        assert [list(c) for c in alone] == [list(c) for c in x]
    assert applied >= 5


def test_cheapest_alone_declines_ties_and_overfull_types():
    from hadar.scheduler.matching import cheapest_alone

    one = np.ones(2)
    tie = np.array([[1.0, 1.0], [1.0, 2.0]])
    assert cheapest_alone(tie, one, one, np.array([4, 4])) is None
    both_fast = np.array([[1.0, 2.0], [1.0, 2.0]])
    assert cheapest_alone(both_fast, one, one, np.array([1, 4])) is None
    counts = cheapest_alone(both_fast, one, one, np.array([2, 0]))
    assert counts is not None and [list(c) for c in counts] == [[1, 0], [1, 0]]


def test_the_plan_stands_when_the_solver_only_finds_a_worse_map(monkeypatch):
    # a time limit that leaves HiGHS with a map costlier than the plan: the plan is kept, and
    # the time limit is reported
    from hadar.scheduler import matching
    from primal_dual.mip import MipResult

    groups = [
        Group((0,), 1, 0, np.array([1.0, 2.0])),
        Group((1,), 1, 1, np.array([1.0, 1.5])),
    ]
    worse = np.array([0.0, 1.0, 1.0, 0.0])  # group 0 on type 1, group 1 on type 0: cost 3 > 2.5
    monkeypatch.setattr(matching, "solve_mip", lambda *a, **k: MipResult(worse, 3.0, True))
    counts, timed_out = matching.assign_types(groups, np.array([1, 1]))
    assert counts is None and timed_out
    better = np.array([1.0, 0.0, 0.0, 1.0])
    monkeypatch.setattr(matching, "solve_mip", lambda *a, **k: MipResult(better, 2.5, True))
    counts, timed_out = matching.assign_types(groups, np.array([1, 1]))
    assert counts is not None and [list(c) for c in counts] == [[1, 0], [0, 1]] and timed_out
