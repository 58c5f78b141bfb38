"""One output schema for simulated and real runs (issue 12): a simulation writes the common
columns and summary keys of ``hadar.outputs_schema`` (the real-run side is checked in
``tests/hadar/runtime/test_coordinator_loop.py``), and its two utilisations mean what they say: GPU-
seconds (``gru``) and node-seconds (``cru``)."""

from __future__ import annotations

import json

import pytest

from hadar import api
from hadar.core.cluster import Cluster, Node
from hadar.core.jobs import Job
from hadar.outputs_schema import JOB_COLUMNS, ROUND_COLUMNS, SUMMARY_KEYS

TABLE = {"a100": {"('cifar10', 1)": {"null": 10.0}}}


def _run(tmp_path, nodes: tuple[Node, ...], jobs: list[Job]) -> api.Simulation:
    path = tmp_path / "t.json"
    path.write_text(json.dumps(TABLE))
    cluster = Cluster("c", nodes)
    return api.simulate(cluster, jobs, "hadar", throughputs=str(path), restart_penalty_s=0.0)


def test_a_simulation_writes_the_common_columns_and_summary_keys(tmp_path):
    run = _run(tmp_path, (Node("n", {"a100": 2}),), [Job(0, "cifar10", 1, 3600.0)])
    run.save(tmp_path / "out")
    for name, common in (("jobs", JOB_COLUMNS), ("rounds", ROUND_COLUMNS)):
        header = (tmp_path / "out" / f"{name}.csv").read_text().splitlines()[0].split(",")
        assert header[: len(common)] == common, name  # a driver may append its own columns
    assert set(SUMMARY_KEYS) <= set(run.summary)


def test_gru_counts_gpu_seconds_and_cru_node_seconds(tmp_path):
    # one 1-GPU job for 360 s on a node with 4 GPUs, next to an idle 1-GPU node
    nodes = (Node("big", {"a100": 4}), Node("small", {"a100": 1}))
    run = _run(tmp_path, nodes, [Job(0, "cifar10", 1, 3600.0)])
    s = run.summary
    assert s["ttd_s"] == pytest.approx(360.0)
    assert s["gru"] == pytest.approx(1 / 5)  # 1 of 5 GPUs busy
    assert s["cru"] == pytest.approx(1 / 2)  # 1 of 2 nodes busy
    r = run.rounds.iloc[0]
    assert (r["busy_nodes"], r["busy_node_seconds"]) == (1, pytest.approx(360.0))


def test_on_one_gpu_nodes_the_two_utilisations_agree(tmp_path):
    nodes = tuple(Node(f"n{i}", {"a100": 1}) for i in range(3))
    jobs = [Job(i, "cifar10", 1, 1800.0 * (i + 1)) for i in range(2)]
    s = _run(tmp_path, nodes, jobs).summary
    assert s["gru"] == pytest.approx(s["cru"]) and 0 < s["cru"] < 1
