"""Sia: configurations, its ILP (checked against brute force), the restart factor against churn,
bootstrapped goodput per GPU type, and whole rounds on a mixed cluster."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from baselines.sia import estimate as sg
from baselines.sia.ilp import Configuration, configurations, objective, solve
from hadar.core.cluster import Cluster
from hadar.core.jobs import JobStatus
from hadar.policy import RoundContext, make_policy
from hadar.workloads.gpu_scaling import compute_scale
from hadar.workloads.pollux import jobs_from_pollux_csv
from hadar.workloads.pollux_throughput import PolluxThroughput
from tests.hadar.helpers import MIXED, TABLE


def _ctx(csv: str, cluster: Cluster = MIXED, now: float = 0.0, current=None) -> RoundContext:
    jobs = jobs_from_pollux_csv(csv, source="t")
    statuses = [JobStatus(j, j.total_steps) for j in jobs]
    return RoundContext(
        now, 0, 60.0, cluster, statuses, current or {}, PolluxThroughput(TABLE), 30.0
    )


def test_configurations_are_powers_of_two_on_a_node_then_whole_nodes() -> None:
    got = configurations([4, 8], [3, 1])
    assert [(c.gpu_type, c.nodes, c.gpus) for c in got] == [
        (0, 1, 1),
        (0, 1, 2),
        (0, 1, 4),
        (0, 2, 8),
        (0, 3, 12),
        (1, 1, 1),
        (1, 1, 2),
        (1, 1, 4),
        (1, 1, 8),
    ]
    assert [c.gpus for c in configurations([6], [1])] == [1, 2, 4, 6]


def _brute(cost: np.ndarray, configs: tuple[Configuration, ...], cap: np.ndarray) -> float:
    best = 0.0
    options = [[-1, *np.flatnonzero(np.isfinite(row))] for row in cost]
    for pick in itertools.product(*options):
        used = np.zeros(len(cap))
        total = 0.0
        for j, k in enumerate(pick):
            if k >= 0:
                used[configs[k].gpu_type] += configs[k].gpus
                total += cost[j, k]
        if np.all(used <= cap):
            best = min(best, total)
    return best


@pytest.mark.parametrize("seed", range(6))
def test_the_ilp_finds_the_brute_force_optimum(seed: int) -> None:
    rng = np.random.default_rng(seed)
    configs = configurations([2, 4], [2, 1])  # 5 + 3 configurations, 4 + 4 GPUs
    jobs = 4
    good = rng.uniform(1.0, 6.0, (jobs, len(configs))) * np.array([c.gpus for c in configs])
    good[rng.uniform(size=good.shape) < 0.2] = 0.0  # some configurations not allowed
    current = np.zeros_like(good, dtype=bool)
    current[0, 1] = True
    cost = objective(good, current, np.full(jobs, 0.7), -0.5, 1.1, 0.01)
    chosen = solve(cost, configs, np.array([4, 4]))
    got = sum(cost[j, k] for j, k in enumerate(chosen) if k >= 0)
    assert got == pytest.approx(_brute(cost, configs, np.array([4, 4])), abs=1e-9)
    used = np.zeros(2)
    for k in chosen[chosen >= 0]:
        used[configs[k].gpu_type] += configs[k].gpus
    assert np.all(used <= [4, 4])


def test_the_restart_factor_keeps_a_young_job_where_it_is() -> None:
    configs = configurations([4], [2])
    good = np.array([[1.0, 1.8, 3.0, 4.0]])  # holds 2 GPUs; 4 GPUs would be 1.67x as fast
    current = np.array([[False, True, False, False]])
    young = solve(objective(good, current, np.array([0.3]), -0.5, 1.1, 0.01), configs, [8])
    assert configs[young[0]].gpus == 2  # restarting now would cost more than it gains
    old = solve(objective(good, current, np.array([0.98]), -0.5, 1.1, 0.01), configs, [8])
    assert configs[old[0]].gpus == 8  # an old job pays the restart once and moves up


def test_every_job_is_allocated_when_the_gpus_suffice_and_none_spans_types() -> None:
    csv = "name,time,application,num_replicas,batch_size\n" + "".join(
        f"j{i},0,{app},1,128\n" for i, app in enumerate(["cifar10", "bert", "deepspeech2"] * 4)
    )
    ctx = _ctx(csv)
    plan = make_policy("sia").decide(ctx)
    assert len(plan.assignments) == 12
    used = np.zeros_like(MIXED.capacity)
    for a in plan.assignments:
        assert len({t for per in a.placement.values() for t in per}) == 1
        used += MIXED.placement_matrix(a.placement)
    assert np.all(used <= MIXED.capacity)


def test_a_lone_job_takes_the_fastest_type_and_grows_where_it_scales() -> None:
    csv = "name,time,application,num_replicas,batch_size\nj,0,imagenet,4,800\n"
    policy = make_policy("sia")
    ctx = _ctx(csv)
    first = policy.decide(ctx)
    (a,) = first.assignments
    assert a.placement == {"c": {"v100": 1}}  # exploration: one GPU, of the fastest type
    for r in range(1, 6):  # it ran there: it may double each round, still on the V100s
        ctx = RoundContext(
            60.0 * r, r, 60.0, MIXED, ctx.jobs, {(0, 0): a.placement}, ctx.throughput, 30.0
        )
        (a,) = policy.decide(ctx).assignments
        assert set(a.placement) == {"c"}
    assert a.num_gpus >= 4  # doubled at least twice (the restart factor slows the last step)


def test_a_profiled_type_borrows_the_scaling_of_the_type_the_job_ran_on() -> None:
    jobs = jobs_from_pollux_csv(
        "name,time,application,num_replicas,batch_size\nj,0,cifar10,1,128\n", source="t"
    )
    types = ("k80", "t4", "v100")
    est = sg.new_estimate(jobs[0], types)
    one = np.ones(1)
    solo = {t: float(sg.goodputs(est, t, types, one, one)[0]) for t in types}
    # the one-GPU profiles see the types' speeds: V100 fastest, K80 slowest (Gavel's ratios)
    assert solo["v100"] > solo["t4"] > solo["k80"]
    assert compute_scale("k80", "cifar10")[0] > compute_scale("v100", "cifar10")[0]
    for k in (2, 4):
        point, grad = sg.simulated_point(est, "t4", (k,), 128 * k, 0.0)
        est = sg.observe(est, "t4", point, grad)
    assert sg.scaling_source(est, types) == "t4"
    nodes, gpus = np.array([1, 1]), np.array([2, 4])
    on_t4 = sg.goodputs(est, "t4", types, nodes, gpus)
    t4_solo = float(sg.goodputs(est, "t4", types, one, one)[0])
    v100_solo = float(sg.goodputs(est, "v100", types, one, one)[0])
    on_v100 = sg.goodputs(est, "v100", types, nodes, gpus)
    np.testing.assert_allclose(on_v100, on_t4 * v100_solo / t4_solo, rtol=1e-9)
    assert on_t4[1] < 4 * t4_solo  # the fitted sync time: not the perfect-scaling prior


def test_state_round_trips_and_the_restored_policy_decides_alike() -> None:
    csv = (
        "name,time,application,num_replicas,batch_size\n"
        "a,0,cifar10,1,128\nb,0,bert,1,12\nc,0,yolov3,1,8\n"
    )
    ctx = _ctx(csv)
    policy = make_policy("sia")
    plan = policy.decide(ctx)
    held = {(a.job_id, 0): a.placement for a in plan.assignments}
    nxt = RoundContext(60.0, 1, 60.0, MIXED, ctx.jobs, held, ctx.throughput, 30.0)
    other = make_policy("sia")
    other.restore(policy.state())
    assert other.state() == policy.state()
    assert other.decide(nxt).assignments == policy.decide(nxt).assignments


def test_bad_knobs_are_refused() -> None:
    with pytest.raises(ValueError, match="negative"):
        make_policy("sia", p=0.5)
    with pytest.raises(ValueError, match="lambda"):
        make_policy("sia", lambda_n=-1.0)
