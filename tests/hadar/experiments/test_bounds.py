"""TTD lower bounds: LP values by hand, the relations between them, and that they bound the simulator."""

from __future__ import annotations

import numpy as np
import pytest

from hadar.core.cluster import Cluster, Node
from hadar.core.jobs import Job
from hadar.experiments.bounds import (
    NO_BOUNDS,
    discounted_fork_s,
    mix_bounds,
    rate_matrix,
    ttd_bounds,
)
from hadar.policy import make_policy
from hadar.scenario import load_table, throughput_for
from hadar.simulator import SimConfig, simulate
from hadar.simulator.metrics import summarize
from hadar.workloads.fork_efficiency import largest_fork_factors
from hadar.workloads.mixes import mix_jobs


def test_one_job_two_equal_gpus_forking_halves_the_time():
    b = ttd_bounds(np.array([[1.0, 1.0]]), [4.0])
    assert b.fork_s == pytest.approx(2.0)
    assert b.nofork_s == pytest.approx(4.0)
    assert b.fastest_job_s == pytest.approx(4.0)


def test_unequal_jobs_on_identical_gpus():
    # work 3 + 1 on two unit GPUs: forking balances to 2; without it the 3-step job needs 3 s
    b = ttd_bounds(np.ones((2, 2)), [3.0, 1.0])
    assert b.fork_s == pytest.approx(2.0)
    assert b.nofork_s == pytest.approx(3.0)


def test_affinity_beats_running_jobs_one_after_another_on_the_whole_cluster():
    # each job is twice as fast on "its" GPU: 1 s each in parallel; the sequential whole-cluster
    # schedule (sum_j N_j / sum_g r_jg = 4/3 s) is feasible but not a lower bound
    rates = np.array([[2.0, 1.0], [1.0, 2.0]])
    b = ttd_bounds(rates, [2.0, 2.0])
    assert b.fork_s == pytest.approx(1.0)
    assert b.nofork_s == pytest.approx(1.0)
    assert (np.array([2.0, 2.0]) / rates.sum(axis=1)).sum() == pytest.approx(4 / 3)


def test_proportional_rates_fork_bound_is_total_work_over_total_rate():
    job, gpu = np.array([1.0, 3.0, 0.5]), np.array([4.0, 2.0, 1.0])
    steps = [100.0, 900.0, 30.0]
    b = ttd_bounds(np.outer(job, gpu), steps)
    assert b.fork_s == pytest.approx(
        sum(n / (j * gpu.sum()) for n, j in zip(steps, job, strict=True))
    )


def test_gpu_a_job_cannot_use_is_left_out():
    b = ttd_bounds(np.array([[0.0, 2.0], [1.0, 1.0]]), [4.0, 1.0])
    # job 0 only on GPU 1 (2 s); job 1 fits on GPU 0 meanwhile
    assert b.fork_s == pytest.approx(2.0)
    assert b.nofork_s == pytest.approx(2.0)
    with pytest.raises(ValueError):
        ttd_bounds(np.array([[0.0, 0.0]]), [1.0])


def test_discounted_fork_bound_spans_the_fork_and_no_fork_bounds():
    # factors 1: copies are worth their steps (the fork bound); zero beyond one copy: a job runs
    # one copy at a time (the no-fork bound); in between, in between
    rng = np.random.default_rng(7)
    for _ in range(10):
        rates = rng.uniform(0.2, 3.0, size=(4, 3))
        steps = rng.uniform(50.0, 500.0, size=4)
        b = ttd_bounds(rates, steps)
        full = discounted_fork_s(rates, steps, np.ones((4, 3)))
        alone = discounted_fork_s(rates, steps, np.array([[1.0, 0.0, 0.0]] * 4))
        half = discounted_fork_s(rates, steps, np.array([[1.0, 0.5, 0.5]] * 4))
        assert full == pytest.approx(b.fork_s, rel=1e-6)
        assert alone == pytest.approx(b.nofork_s, rel=1e-6)
        assert b.fork_s - 1e-6 <= half <= b.nofork_s + 1e-6


def test_discounted_fork_bound_of_one_job_by_hand():
    # one job, two unit GPUs, 4 steps; two copies each count 0.75: 1.5 steps/s, 8/3 s
    assert discounted_fork_s(np.ones((1, 2)), [4.0], np.array([[1.0, 0.75]])) == pytest.approx(
        8 / 3
    )
    # copies worth under half: one copy alone is faster (4 s)
    assert discounted_fork_s(np.ones((1, 2)), [4.0], np.array([[1.0, 0.4]])) == pytest.approx(4.0)


def test_orderings_hold_on_random_instances():
    rng = np.random.default_rng(7)
    for _ in range(20):
        rates = rng.uniform(0.1, 5.0, size=(rng.integers(1, 6), rng.integers(1, 5)))
        steps = rng.uniform(1.0, 100.0, size=rates.shape[0])
        b = ttd_bounds(rates, steps)
        assert b.fork_s <= b.nofork_s + 1e-6
        assert b.fastest_job_s <= b.nofork_s + 1e-6
        assert b.fork_s >= (steps / rates.sum(axis=1)).max() - 1e-6  # a job on the whole cluster
        assert b.fork_s <= (steps / rates.sum(axis=1)).sum() + 1e-6  # one after another: feasible


def test_rate_matrix_has_one_column_per_gpu_and_skips_multi_gpu_jobs():
    cluster = Cluster("c", (Node("a", {"v100": 2}), Node("b", {"k80": 1})))
    table = load_table(None)
    job = Job(0, "ResNet-18 (batch size 64)", 1, 1000.0)
    rates = rate_matrix([job], cluster, table)
    assert rates.shape == (1, 3)
    assert rates[0, 0] == rates[0, 1] == pytest.approx(table.lookup(job.job_type, "v100", 1))
    assert rates[0, 2] == pytest.approx(table.lookup(job.job_type, "k80", 1))
    assert mix_bounds([Job(1, "ResNet-18 (batch size 64)", 2, 1000.0)], cluster, table) == NO_BOUNDS


@pytest.mark.parametrize("cluster_name,mix", [("aws-5node", "M-5"), ("lab-5node", "M-4")])
def test_no_policy_beats_its_bound_in_the_simulator(cluster_name, mix):
    from hadar.clusters import load_cluster

    cluster, jobs = load_cluster(cluster_name), mix_jobs(mix)
    throughput = throughput_for(jobs, cluster, load_table(None))
    b = mix_bounds(jobs, cluster, throughput)
    rates = rate_matrix(jobs, cluster, throughput)
    assert rates is not None
    factors = np.array([largest_fork_factors(j, rates.shape[1], throughput) for j in jobs])
    goodput = discounted_fork_s(rates, [j.total_steps for j in jobs], factors)
    assert goodput >= b.fork_s - 1e-6
    for policy, bound in (("gavel", b.nofork_s), ("hadar", b.nofork_s), ("hadare", goodput)):
        result = simulate(cluster, jobs, make_policy(policy), throughput, SimConfig(round_s=90.0))
        assert summarize(result)["ttd_s"] >= bound - 1e-6, policy
