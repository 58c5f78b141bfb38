"""Hadar's default round (issue 9): every job re-planned each round, restarts paid and charged,
the TTD guard, LP prices by comparative advantage; the legacy configuration stays reachable."""

from __future__ import annotations

import pytest

from estimators.throughput import GavelThroughputTable, TableKey
from hadar.core.cluster import Cluster, Node
from hadar.core.jobs import Job, JobStatus
from hadar.policy import RoundContext
from hadar.policy_options import policy_with_options
from hadar.scheduler import HadarConfig, HadarPolicy
from hadar.simulator import SimConfig, simulate
from hadar.simulator.metrics import summarize
from hadar.workloads import load_workload

ONE_TYPE = GavelThroughputTable(
    {TableKey("A", "v100", 1, True): 1.0, TableKey("B", "v100", 1, True): 1.0}
)


def _ctx(cluster, statuses, current=None, throughput=ONE_TYPE, penalty=10.0, now=360.0):
    return RoundContext(
        now=now,
        round_index=1,
        round_s=360.0,
        cluster=cluster,
        jobs=tuple(statuses),
        current=current or {},
        throughput=throughput,
        restart_penalty_s=penalty,
    )


def _running_and_waiting(remaining_b: float):
    """Job 0 runs on the only GPU with 1000 s left; job 1 (started before) waits."""
    cluster = Cluster("one", (Node("n", {"v100": 1}),))
    a, b = Job(0, "A", 1, 5000.0), Job(1, "B", 1, 5000.0)
    statuses = [JobStatus(a, 1000.0), JobStatus(b, remaining_b)]
    return _ctx(cluster, statuses, current={(0, 0): {"n": {"v100": 1}}})


def test_a_preemption_is_taken_only_when_its_gain_exceeds_the_restart_cost():
    policy = HadarPolicy(HadarConfig(ttd_guard=False, tail_percentile=None))  # the DP alone
    # job 1 would finish 0.5 s sooner than job 0 but pays a 10 s restart: job 0 keeps the GPU
    keep = policy.decide(_running_and_waiting(989.5))
    assert keep.jobs() == {0} and keep.info["preempted"] == 0
    # job 1 is far shorter: preempting job 0 (and paying its later restart) is worth it
    swap = policy.decide(_running_and_waiting(300.0))
    assert swap.jobs() == {1} and swap.info["preempted"] == 1


def test_a_running_job_moves_only_for_more_than_the_minimum_gain():
    table = GavelThroughputTable(
        {TableKey("A", "v100", 1, True): 2.0, TableKey("A", "k80", 1, True): 1.0}
    )
    cluster = Cluster("two", (Node("v", {"v100": 1}), Node("k", {"k80": 1})))
    job = Job(0, "A", 1, 1e6)
    on_k80 = {(0, 0): {"k": {"k80": 1}}}
    # 2000 steps left: 2000 s on the K80, 1000 s + 10 s restart on the V100, gain 990 s > 360 s
    moved = HadarPolicy().decide(_ctx(cluster, [JobStatus(job, 2000.0)], on_k80, table))
    assert moved.allocation()[(0, 0)] == {"v": {"v100": 1}}
    # 600 steps left: gain 290 s < upgrade_min_gain_s (360 s): it stays (off the critical path:
    # without the guards; a lone job sets the TTD and the tail, so either guard moves it,
    # tests/hadar/scheduler/test_ttd.py)
    unguarded = HadarPolicy(HadarConfig(ttd_guard=False, tail_percentile=None))
    stays = unguarded.decide(_ctx(cluster, [JobStatus(job, 600.0)], on_k80, table))
    assert stays.allocation()[(0, 0)] == {"k": {"k80": 1}}


def test_the_gpu_goes_to_the_job_that_gains_most_on_it_whatever_the_queue_order():
    """Job 0 (first in the queue) is 1.25x faster on the V100, job 1 8x: LP prices give job 1 the
    V100; the exponential prices of the legacy configuration let the first job take it."""
    t = {
        TableKey("small-gain", "v100", 1, True): 1.25,
        TableKey("small-gain", "k80", 1, True): 1.0,
        TableKey("big-gain", "v100", 1, True): 8.0,
        TableKey("big-gain", "k80", 1, True): 1.0,
    }
    table = GavelThroughputTable(t)
    cluster = Cluster("two", (Node("v", {"v100": 1}), Node("k", {"k80": 1})))
    jobs = [
        JobStatus(Job(0, "small-gain", 1, 1e5), 1e5),
        JobStatus(Job(1, "big-gain", 1, 1e5), 1e5),
    ]
    # without the guards (of two jobs, the longer sets the TTD and the p99: a guard places it first)
    plan = HadarPolicy(HadarConfig(ttd_guard=False, tail_percentile=None)).decide(
        _ctx(cluster, jobs, throughput=table, now=0)
    )
    assert plan.allocation() == {(1, 0): {"v": {"v100": 1}}, (0, 0): {"k": {"k80": 1}}}
    legacy = HadarPolicy(HadarConfig.legacy()).decide(_ctx(cluster, jobs, throughput=table, now=0))
    assert legacy.allocation()[(0, 0)] == {"v": {"v100": 1}}


def test_the_ttd_guard_starts_the_longest_job_at_once_on_its_fastest_gpu():
    table = GavelThroughputTable(
        {TableKey("A", "v100", 1, True): 2.0, TableKey("A", "k80", 1, True): 1.0}
    )
    cluster = Cluster("two", (Node("v", {"v100": 1}), Node("k", {"k80": 1})))
    jobs = [Job(i, "A", 1, 360.0) for i in range(6)] + [Job(6, "A", 1, 40_000.0)]
    guarded = simulate(cluster, jobs, HadarPolicy(), table, SimConfig())
    first = [p for p in guarded.placements if p.job_id == 6][0]
    assert first.round_index == 0 and first.node == "v"
    unguarded = simulate(
        cluster,
        jobs,
        HadarPolicy(HadarConfig(ttd_guard=False, tail_percentile=None)),
        table,
        SimConfig(),
    )
    assert [p for p in unguarded.placements if p.job_id == 6][
        0
    ].round_index > 0  # SRPT: shortest first
    assert summarize(guarded)["ttd_s"] < summarize(unguarded)["ttd_s"]


# Hadar as first implemented, philly-96 / sim-60gpu, seed 0 (computed on the code before issue 9).
# HadarE over it: pinned since HadarE runs on a replay of (here legacy) Hadar and forks only while
# no job falls behind it (before, its primary copies came from legacy Hadar over its own state:
# 7,941 / 2,045 / 1,734 s; the new rule never finishes a job later than legacy Hadar, 29,607 s).
# Before refills and the split that lets copies with less of the round stop with the others it
# was 8,520 / 2,286 / 1,938 s; without refills it is now 8,513 / 2,286 / 1,938 s, with them (the
# default: the GPUs a job leaves mid-round go to another job's copy) 8,097 / 2,135 / 1,687 s; with
# one averaging per forked round (a job alone after a forked round pays no second one) the
# average 2,135.07 -> 2,134.97 s.
LEGACY = {
    "hadar-legacy": ({}, (29607.044409709124, 2901.8799905662613, 1937.8866190698955)),
    "hadare-no-refill": (
        {"refill": "false"},
        (8512.613779560012, 2285.719123893635, 1937.8866190698955),
    ),
    "hadare": ({}, (8097.154525974486, 2134.9671148104244, 1687.228292820314)),
}


@pytest.mark.parametrize("case", sorted(LEGACY))
def test_the_legacy_configuration_is_bit_identical_to_the_original_hadar(case):
    table = GavelThroughputTable.bundled()
    from hadar.clusters import load_cluster

    options, figures = LEGACY[case]
    policy = policy_with_options(case.split("-no-")[0], {"preset": "legacy", **options})
    s = summarize(
        simulate(
            load_cluster("sim-60gpu"),
            load_workload("philly-96", table, seed=0),
            policy,
            table,
            SimConfig(fork_progress="steps"),  # pinned under the paper's accounting of forks
        )
    )
    assert (s["ttd_s"], s["avg_jct_s"], s["median_jct_s"]) == pytest.approx(figures, rel=1e-12)
