"""A regression test on data nobody tuned to. GPU types the measured table does
not cover (A100, T4, RTX 3090) in nodes of 4 and 8 GPUs, every figure the cold-start estimate
(Eq. 10) anchored on Gavel's V100 measurements, and a heavy trace: ten jobs per GPU, all at t=0
(a cut-down of ``cluster_configs/sim-64gpu-a100-t4-rtx.yaml`` with ``philly-960``; the full run
is in docs/results.md, "Independent data: A100, T4 and RTX 3090, heavy trace")."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from hadar.api import simulate
from hadar.core.cluster import Cluster, Node
from hadar.core.gpu_catalogue import catalogue, forget_user_gpus, register_gpu

WORKLOAD = "philly-160"
TYPES = {"a100": "accel-one", "t4": "accel-two", "rtx3090": "accel-three"}


def cluster(names: dict[str, str]) -> Cluster:
    """16 GPUs: one node of 8 A100, one of 4 T4, one of 4 RTX 3090 (types called ``names``)."""
    return Cluster(
        "independent-16",
        (
            Node("n-a", {names["a100"]: 8}, pcie_gen=4),
            Node("n-t", {names["t4"]: 4}, pcie_gen=3),
            Node("n-r", {names["rtx3090"]: 4}, pcie_gen=4),
        ),
    )


@pytest.fixture(scope="module")
def runs() -> dict[str, dict[str, Any]]:
    plain = cluster({k: k for k in TYPES})
    return {p: simulate(plain, WORKLOAD, p, seed=0).summary for p in ("hadar", "gavel")}


@pytest.fixture()
def renamed_types() -> Iterator[dict[str, str]]:
    """The same GPUs declared under other names (``gpu_types:``), with the same figures."""
    forget_user_gpus()
    specs = catalogue()
    for old, new in TYPES.items():
        register_gpu(replace(specs[old], id=new, name=new, smi_pattern=""))
    yield TYPES
    forget_user_gpus()


def test_hadar_is_ahead_of_gavel_on_the_heavy_independent_trace(
    runs: dict[str, dict[str, Any]],
) -> None:
    hadar, gavel = runs["hadar"], runs["gavel"]
    assert hadar["completed"] == gavel["completed"] == 160
    for key in ("ttd_s", "avg_jct_s", "median_jct_s", "p99_jct_s", "max_jct_s", "rho_max"):
        assert hadar[key] < gavel[key], key
    # the deferral bound (max_rho = 1: a job finishes by its fair-share JCT plus a round) keeps
    # the worst finish-time fairness far below Gavel's: 1.58 against 12.60. (It was 1.18 before
    # type matching: the worst job now is a 47-second job that waited two rounds, as 160 jobs
    # arrived at once on 16 GPUs, then ran 260 s on a T4 within its deadline, leaving the RTX 3090
    # to a job that gained more on it; rho's reference has no round.)
    assert hadar["rho_max"] < gavel["rho_max"] / 5


def test_renaming_the_gpu_types_changes_nothing(
    runs: dict[str, dict[str, Any]], renamed_types: dict[str, str]
) -> None:
    again = simulate(cluster(renamed_types), WORKLOAD, "hadar", seed=0).summary
    for key in ("ttd_s", "avg_jct_s", "median_jct_s", "p99_jct_s", "rho_max", "restarts_per_job"):
        assert again[key] == pytest.approx(runs["hadar"][key], rel=1e-12), key


@pytest.mark.slow
def test_the_full_heavy_trace_keeps_hadar_ahead_and_nobody_starves() -> None:
    """The full independent data set: ``philly-960`` (15 jobs per GPU, all at t=0) on the 64-GPU
    A100/T4/RTX 3090 cluster of 4- and 8-GPU nodes (about 7 s of CPU for both policies, hence
    slow). Issue 27 reported, on data like this, Hadar losing TTD and average JCT to Gavel and jobs
    waiting exactly the old 24 h wall-clock bound; here Hadar must stay ahead of Gavel on TTD,
    average, median and max JCT, worst finish-time fairness and work efficiency (class-to-type
    matching), and no job may wait anywhere near 24 h to start. (Seed 0; on seed 1 Hadar's p99 is
    1 % above Gavel's, docs/results.md, so p99 is not asserted.)"""
    runs = {
        p: simulate("sim-64gpu-a100-t4-rtx", "philly-960", p, seed=0) for p in ("hadar", "gavel")
    }
    hadar, gavel = runs["hadar"].summary, runs["gavel"].summary
    assert hadar["completed"] == gavel["completed"] == 960
    for key in ("ttd_s", "avg_jct_s", "median_jct_s", "max_jct_s", "rho_max"):
        assert hadar[key] < gavel[key], key
    assert hadar["work_efficiency"] > gavel["work_efficiency"]
    # the symptom was jobs waiting exactly the old 24 h wall-clock bound (measured: at
    # most 10.8 h here, against Gavel's 7.3 h)
    assert runs["hadar"].jobs["queueing_delay"].max() < 86400.0 / 2
    assert hadar["rho_max"] < 1.5
