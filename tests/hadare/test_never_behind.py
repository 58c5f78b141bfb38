"""HadarE never does worse than plain Hadar in the simulator (fixed-length rounds): over random
clusters of the measured GPU types and random job mixes, the TTD and the average JCT are never
worse; without its look-ahead (the never-behind rule alone) no job finishes later."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from estimators.throughput import GavelThroughputTable
from hadar.core.cluster import Cluster, Node
from hadar.core.jobs import Job
from hadar.scheduler import HadarPolicy
from hadar.simulator import SimConfig, simulate
from hadare.policy import HadarEConfig, HadarEPolicy
from tests.hadare.test_hadare import five_nodes

TABLE = GavelThroughputTable.bundled()
TYPES = ("v100", "p100", "k80")
JOB_TYPES = (
    "ResNet-18 (batch size 64)",
    "ResNet-50 (batch size 64)",
    "Transformer (batch size 64)",
    "LM (batch size 20)",
    "Recommendation (batch size 2048)",
    "A3C",
    "CycleGAN",
)
"""Jobs with efficiency data (goodput-bounded forks: ResNet, Transformer, LM, Recommendation)
and without (A3C, CycleGAN)."""
ONE_GPU_ONLY = {"A3C", "CycleGAN", "Recommendation (batch size 2048)"}
"""Gavel measured these on one GPU only."""


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[Cluster, list[Job], float]:
    n_nodes = draw(st.integers(1, 5))
    nodes = tuple(
        Node(
            f"n{i}",
            {draw(st.sampled_from(TYPES)): draw(st.sampled_from((1, 1, 2, 4)))},
        )
        for i in range(n_nodes)
    )
    jobs = []
    for i in range(draw(st.integers(1, 9))):
        job_type = draw(st.sampled_from(JOB_TYPES))
        gpus = 1 if job_type in ONE_GPU_ONLY else draw(st.sampled_from((1, 1, 1, 2)))
        jobs.append(Job(i, job_type, gpus, float(draw(st.integers(500, 60_000)))))
    round_s = float(draw(st.sampled_from((120, 360))))
    return Cluster("random", nodes), jobs, round_s


def finishes(policy: object, cluster: Cluster, jobs: list[Job], round_s: float) -> dict[int, float]:
    result = simulate(cluster, jobs, policy, TABLE, SimConfig(round_s=round_s))  # type: ignore[arg-type]
    return {r.job_id: r.finish for r in result.jobs if r.finish is not None}


SETTINGS = settings(
    max_examples=30,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


def both(
    sc: tuple[Cluster, list[Job], float], hadare: HadarEPolicy
) -> tuple[dict[int, float], dict[int, float]]:
    """Every job's finish under plain Hadar and under ``hadare`` (both finish every job)."""
    cluster, jobs, round_s = sc
    per_type = cluster.capacity.sum(axis=0)
    assume(max(j.num_gpus for j in jobs) <= per_type.max())  # a gang runs on one GPU type
    plain = finishes(HadarPolicy(), cluster, jobs, round_s)
    forked = finishes(hadare, cluster, jobs, round_s)
    assert set(forked) == set(plain) == {j.job_id for j in jobs}
    return plain, forked


@SETTINGS
@given(sc=scenarios())
def test_without_look_ahead_hadare_never_finishes_a_job_later_than_hadar(
    sc: tuple[Cluster, list[Job], float],
):
    hadar, hadare = both(sc, HadarEPolicy(HadarEConfig(lookahead_jobs=0)))
    for job_id, finish in hadar.items():
        assert hadare[job_id] <= finish + 1e-6, (job_id, hadare[job_id], finish)


@SETTINGS
@given(sc=scenarios())
def test_hadare_ttd_and_total_completion_never_worse_than_hadar(
    sc: tuple[Cluster, list[Job], float],
):
    hadar, hadare = both(sc, HadarEPolicy())
    assert max(hadare.values()) <= max(hadar.values()) + 1e-6
    assert sum(hadare.values()) <= sum(hadar.values()) + 1e-6 * len(hadar)


@pytest.mark.parametrize("cluster_name", ["aws-5node", "lab-5node"])
@pytest.mark.parametrize("mix", ["M-1", "M-2", "M-3", "M-4", "M-5", "M-6", "M-8", "M-10", "M-12"])
def test_hadare_ttd_and_average_jct_never_above_hadar_on_the_physical_mixes(cluster_name, mix):
    from hadar.api import simulate as api_simulate

    hadar = api_simulate(f"cluster_configs/{cluster_name}.yaml", mix, policy="hadar").summary
    hadare = api_simulate(f"cluster_configs/{cluster_name}.yaml", mix, policy="hadare").summary
    assert hadare["ttd_s"] <= hadar["ttd_s"] + 1e-6
    assert hadare["avg_jct_s"] <= hadar["avg_jct_s"] + 1e-6


def test_forked_jobs_finish_earlier_where_nodes_idle():
    """The guarantee is not bought by never forking: one job on five nodes forks and halves
    its time (M-1's set-up)."""
    cluster = five_nodes()
    job = [Job(0, "A3C", 1, 200_000.0)]
    hadar = finishes(HadarPolicy(), cluster, job, 360.0)[0]
    hadare = finishes(HadarEPolicy(), cluster, job, 360.0)[0]
    assert hadare < 0.6 * hadar
