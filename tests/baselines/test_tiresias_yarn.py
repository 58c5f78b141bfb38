"""Tiresias (2D-LAS: demotion, preemption in favour of the high queue, skipping) and YARN-CS
(FIFO: never preempts, never backfills), both heterogeneity-unaware."""

from __future__ import annotations

from collections import defaultdict

from baselines.tiresias import DEFAULT_THRESHOLD_GPU_S, TiresiasPolicy
from baselines.yarn_cs import YarnCapacityPolicy
from hadar.core.cluster import Cluster, Node
from hadar.simulator import SimConfig, simulate
from tests.baselines.helpers import LM, R18, R50, TABLE, context, job, one_type, status

ONE_GPU = one_type(1)


def test_queue_is_set_by_attained_service_against_the_threshold():
    p = TiresiasPolicy(threshold=1000.0)
    assert p.queue_of(status(job(0), attained=999.0)) == 0
    assert p.queue_of(status(job(0), attained=1000.0)) == 1
    assert TiresiasPolicy().config.threshold == DEFAULT_THRESHOLD_GPU_S == 3250.0


def test_demoted_job_is_preempted_by_a_high_queue_job():
    a, b = job(0, arrival=0.0), job(1, arrival=100.0)
    running = {(0, 0): {"n0": {"v100": 1}}}
    plan = TiresiasPolicy().decide(
        context(ONE_GPU, [status(a, attained=4000.0), status(b)], current=running, now=3600)
    )
    assert plan.jobs() == {1}
    assert plan.info["preempted"] == 1


def test_fifo_within_the_high_queue_does_not_preempt():
    a, b = job(0, arrival=0.0), job(1, arrival=100.0)
    running = {(0, 0): {"n0": {"v100": 1}}}
    plan = TiresiasPolicy().decide(
        context(ONE_GPU, [status(a, attained=1000.0), status(b)], current=running, now=1080)
    )
    assert plan.allocation() == running


def test_demotion_and_preemption_in_a_simulation():
    # One GPU: A (long) arrives at 0, B at 1000 s. A keeps the GPU while in the high queue (FIFO);
    # after 10 rounds A has 3600 GPU-s >= 3250 and is demoted, so B takes over at t = 3600 s.
    jobs = [job(0, steps=200_000), job(1, steps=10_000, arrival=1000.0)]
    res = simulate(ONE_GPU, jobs, TiresiasPolicy(), TABLE, SimConfig(restart_penalty_s=10.0))
    by_job = {j.job_id: j for j in res.jobs}
    assert by_job[1].start == 3600.0
    first_b_round = min(p.round_index for p in res.placements if p.job_id == 1)
    assert {p.job_id for p in res.placements if p.round_index == first_b_round} == {1}
    assert by_job[0].restarts >= 1 and by_job[0].finish > by_job[1].finish


def test_tiresias_skips_jobs_that_do_not_fit():
    # 4 GPUs, all in the high queue, arrival order W = 2, 4, 1: 2 runs, 4 does not fit, 1 runs.
    statuses = [status(job(i, gpus=g, arrival=float(i))) for i, g in enumerate([2, 4, 1])]
    assert TiresiasPolicy().decide(context(one_type(4), statuses)).jobs() == {0, 2}


def test_tiresias_ignores_gpu_types_and_prefers_one_node():
    # Two 1-GPU nodes of different types: a 2-GPU job takes both (types do not matter to it).
    two = Cluster("two", (Node("v", {"v100": 1}), Node("k", {"k80": 1})))
    assert TiresiasPolicy().decide(context(two, [status(job(0, gpus=2))])).allocation()[(0, 0)] == {
        "v": {"v100": 1},
        "k": {"k80": 1},
    }
    # On 2 x 4 GPUs with one GPU busy, a 4-GPU job is consolidated on the free node.
    cluster = one_type(4, nodes=2)
    running = {(0, 0): {"n0": {"v100": 1}}}
    plan = TiresiasPolicy().decide(
        context(cluster, [status(job(0)), status(job(1, gpus=4))], current=running)
    )
    assert plan.allocation()[(1, 0)] == {"n1": {"v100": 4}}


R50_128 = "ResNet-50 (batch size 128)"  # rate 0 on 2+ K80s in Gavel's table (out of memory)


def test_unaware_policies_only_avoid_gpus_a_job_cannot_run_on():
    # K80 node with 2 free GPUs (the best fit) and an empty V100 node: a 2-GPU R18 job takes the
    # K80s (types do not matter), a 2-GPU ResNet-50/128 job must take V100s (rate 0 on K80s).
    cluster = Cluster("kv", (Node("k", {"k80": 4}), Node("v", {"v100": 4})))
    busy = {(9, 0): {"k": {"k80": 2}}}
    for policy in (TiresiasPolicy(), YarnCapacityPolicy()):
        blocker = status(job(9, gpus=2, arrival=-1.0))
        plan = policy.decide(context(cluster, [blocker, status(job(0, gpus=2))], current=busy))
        assert plan.allocation()[(0, 0)] == {"k": {"k80": 2}}
        plan = policy.decide(
            context(cluster, [blocker, status(job(0, gpus=2, job_type=R50_128))], current=busy)
        )
        assert plan.allocation()[(0, 0)] == {"v": {"v100": 2}}


def test_yarn_never_preempts_and_never_backfills():
    # 4 GPUs; R (2 GPUs) runs although H arrived earlier; H needs 4, only 2 are free; S (1 GPU)
    # would fit but must wait behind H.
    r, h, s = (
        job(0, gpus=2, arrival=10.0),
        job(1, gpus=4, arrival=0.0),
        job(2, gpus=1, arrival=20.0),
    )
    running = {(0, 0): {"n0": {"v100": 2}}}
    plan = YarnCapacityPolicy().decide(
        context(one_type(4), [status(r), status(h), status(s)], current=running)
    )
    assert plan.allocation() == running


def test_yarn_head_starts_on_any_types():
    two = Cluster("two", (Node("v", {"v100": 1}), Node("k", {"k80": 1})))
    plan = YarnCapacityPolicy().decide(context(two, [status(job(0, gpus=2))]))
    assert plan.allocation()[(0, 0)] == {"v": {"v100": 1}, "k": {"k80": 1}}


def test_yarn_simulation_runs_each_job_once_in_fifo_order():
    cluster = Cluster("c", (Node("a", {"v100": 2, "k80": 2}), Node("b", {"p100": 4})))
    jobs = [
        job(i, gpus=g, steps=s, arrival=a, job_type=t)
        for i, (g, s, a, t) in enumerate(
            [
                (2, 20_000, 0, R18),
                (4, 9_000, 0, R50),
                (1, 30_000, 0, LM),
                (1, 5_000, 0, R18),
                (2, 40_000, 500, LM),
                (8, 20_000, 700, R18),
                (1, 3_000, 800, R50),
            ]
        )
    ]
    res = simulate(cluster, jobs, YarnCapacityPolicy(), TABLE, SimConfig(restart_penalty_s=10.0))
    rounds: dict[int, list[int]] = defaultdict(list)
    placement: dict[int, set] = defaultdict(set)
    for p in res.placements:
        rounds[p.job_id].append(p.round_index)
        placement[p.job_id].add((p.node, p.gpu_type, p.count))
    per_round: dict[tuple[int, int], set] = defaultdict(set)
    for p in res.placements:
        per_round[(p.job_id, p.round_index)].add((p.node, p.gpu_type, p.count))
    for j in res.jobs:
        rs = sorted(set(rounds[j.job_id]))
        assert rs == list(range(rs[0], rs[-1] + 1)), f"job {j.job_id} was paused"
        assert len({frozenset(per_round[(j.job_id, r)]) for r in rs}) == 1, f"job {j.job_id} moved"
        assert j.restarts == 0
    # FIFO without backfilling: start times never decrease along the queue (arrival, id).
    starts = [j.start for j in sorted(res.jobs, key=lambda j: (j.arrival, j.job_id))]
    assert starts == sorted(starts)
    # The 8-GPU job blocked the 1-GPU job behind it in rounds that had idle GPUs.
    blocked = [r for r in res.rounds if 800 <= r.time < res.jobs[5].start and r.busy_gpus < 8]
    assert blocked and res.jobs[6].start >= res.jobs[5].start
