"""CompositeThroughput: measured figures where the table has them, flagged estimates elsewhere."""

from __future__ import annotations

import numpy as np
import pytest

from estimators.composite import CompositeThroughput
from estimators.pmi import PmiEstimator
from estimators.throughput import GavelThroughputTable
from hadar.core.cluster import Cluster, Node
from hadar.core.jobs import Job

R18 = "ResNet-18 (batch size 64)"
R50 = "ResNet-50 (batch size 128)"


@pytest.fixture(scope="module")
def table() -> GavelThroughputTable:
    return GavelThroughputTable.bundled()


@pytest.fixture(scope="module")
def aws() -> Cluster:
    return Cluster(
        "aws", (Node("p3", {"v100": 1}), Node("p2", {"k80": 1}), Node("g4dn", {"t4": 1}))
    )


def job(job_type: str, w: int = 1) -> Job:
    return Job(job_id=7, job_type=job_type, num_gpus=w, total_steps=10.0)


def test_measured_cells_come_from_the_table(table: GavelThroughputTable, aws: Cluster) -> None:
    model = CompositeThroughput(table)
    cons, unc = model.cell_rates(job(R18), aws)
    kv, kk, kt = (aws.type_index[g] for g in ("v100", "k80", "t4"))
    assert np.all(cons[:, kv] == table.measured(R18, "v100", 1))
    assert np.all(cons[:, kk] == table.measured(R18, "k80", 1))
    est = PmiEstimator(table)
    assert cons[2, kt] == pytest.approx(est.estimate(R18, "t4", pcie_gen=3).value)
    assert cons[2, kt] != table.measured(R18, "v100", 1)
    assert np.array_equal(cons, unc)


def test_estimated_pairs_are_flagged(table: GavelThroughputTable, aws: Cluster) -> None:
    model = CompositeThroughput(table)
    jobs = [job(R18), job("MM")]
    assert model.estimated_pairs(jobs, aws) == [
        ("MM", "k80"),
        ("MM", "t4"),
        ("MM", "v100"),
        (R18, "t4"),
    ]
    assert model.seen_estimated() == []
    model.cell_rates(job(R18), aws)
    assert model.seen_estimated() == [(R18, "t4")]
    text = model.describe(job(R18), aws)
    assert "measured (gavel_throughputs.json) on k80, v100" in text and "estimated on t4" in text
    assert model.describe(job("MM"), aws).startswith(
        "estimated on k80, t4, v100"
    )  # by datasheet figures


def test_gang_size_missing_from_the_table_is_estimated(
    table: GavelThroughputTable, aws: Cluster
) -> None:
    """A3C is measured at W = 1 only: a 2-GPU A3C job is an estimate everywhere."""
    model = CompositeThroughput(table)
    assert model.is_measured("A3C", "v100", 1) and not model.is_measured("A3C", "v100", 2)
    assert ("A3C", "v100") in model.estimated_pairs([job("A3C", 2)], aws)
    cons, _ = model.cell_rates(job("A3C", 2), aws)
    assert cons[0, aws.type_index["v100"]] == pytest.approx(
        table.measured("A3C", "v100", 1) * 2 * 0.85
    )


def test_measured_zero_means_cannot_run_and_is_kept(table: GavelThroughputTable) -> None:
    """Gavel measured ResNet-50 (batch 128) on 2 K80s as 0 steps/s: no estimate replaces it."""
    cluster = Cluster("c", (Node("a", {"k80": 4}), Node("b", {"v100": 4})))
    model = CompositeThroughput(table)
    assert table.measured(R50, "k80", 2) == 0
    cons, unc = model.cell_rates(job(R50, 2), cluster)
    assert np.all(cons[:, cluster.type_index["k80"]] == 0)
    assert np.all(cons[:, cluster.type_index["v100"]] == table.measured(R50, "v100", 2))
    assert np.all(unc[:, cluster.type_index["v100"]] == table.measured(R50, "v100", 2, False))


def test_multi_node_uses_the_tables_fallback_when_only_consolidated_is_measured() -> None:
    from estimators.throughput import TableKey

    t = GavelThroughputTable({TableKey(R18, "v100", 2, True): 50.0}, source="t")
    cluster = Cluster("c", (Node("a", {"v100": 1}), Node("b", {"v100": 1})))
    cons, unc = CompositeThroughput(t).cell_rates(job(R18, 2), cluster)
    assert np.all(cons == 50.0) and np.all(unc == pytest.approx(50.0 * t.unconsolidated_penalty))


def test_rate_and_best_rate_work_through_the_interface(
    table: GavelThroughputTable, aws: Cluster
) -> None:
    model = CompositeThroughput(table)
    assert model.rate(job(R18), {"p3": {"v100": 1}}, aws) == table.measured(R18, "v100", 1)
    assert model.best_rate(job("MM"), aws) > 0


def test_a_measured_multi_node_figure_is_used_when_the_consolidated_one_is_missing() -> None:
    """8-GPU jobs measured only across 4-GPU T4 nodes: the table's 3.29 steps/s is what a
    multi-node placement runs at, not the estimate; the estimated consolidated figure (no node
    can hold the gang anyway) is flagged and never below the measured multi-node one."""
    from estimators.throughput import TableKey

    t = GavelThroughputTable(
        {TableKey(R18, "t4", 8, False): 3.29, TableKey(R18, "v100", 1, True): 10.0}, source="t"
    )
    cluster = Cluster("c", (Node("a", {"t4": 4}), Node("b", {"t4": 4})))
    model = CompositeThroughput(t)
    cons, unc = model.cell_rates(job(R18, 8), cluster)
    assert np.all(unc == 3.29)
    assert np.all(cons >= 3.29)
    assert model.rate(job(R18, 8), {"a": {"t4": 4}, "b": {"t4": 4}}, cluster) == 3.29
    cells = model.estimated_cells([job(R18, 8)], cluster)
    assert [(c.gpu_type, c.num_gpus, c.placement) for c in cells] == [("t4", 8, "consolidated")]


def test_estimated_cells_name_placement_and_gang_size(
    table: GavelThroughputTable, aws: Cluster
) -> None:
    model = CompositeThroughput(table)
    cells = model.estimated_cells([job(R18), job("A3C", 2)], aws)
    described = [c.describe() for c in cells]
    assert f"{R18} x1 on t4 (consolidated)" in described
    assert (
        "A3C x2 on v100 (multi-node)" in described and "A3C x2 on v100 (consolidated)" in described
    )
    assert not any("x1" in d and "multi-node" in d for d in described)  # one GPU never spans nodes
    assert table.estimated_cells([job(R18)], aws) == []  # the plain table estimates nothing


def test_gpu_aliases_are_the_same_in_throughput_files_and_cluster_files() -> None:
    """``titan_rtx`` names the Titan RTX in a cluster file; a throughputs file accepts it too,
    with and without the ``_unconsolidated`` suffix."""
    from hadar.clusters import cluster_from_dict

    t = GavelThroughputTable.from_json(
        {
            "titan_rtx": {"('A', 2)": {"null": 4.0}},
            "titan_rtx_unconsolidated": {"('A', 2)": {"null": 3.0}},
        }
    )
    cluster = cluster_from_dict(
        {"name": "c", "nodes": [{"name": "n", "gpus": {"titan_rtx": 2}}]}, "c.yaml"
    )
    (gpu,) = cluster.gpu_types
    assert t.measured("A", gpu, 2, True) == 4.0 and t.measured("A", gpu, 2, False) == 3.0
