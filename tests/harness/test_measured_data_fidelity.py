"""The harness uses measured data as given (issue 16): idle gaps between arrivals, results that
do not depend on what the GPU types are called, one GPU-name parser for every file."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from estimators.throughput import GavelThroughputTable
from hadar.cli import main
from hadar.core.cluster import Cluster, Node
from hadar.core.jobs import Job
from hadar.policy import POLICY_REGISTRY, make_policy
from hadar.simulator import SimConfig, simulate
from hadar.workloads.philly import PhillyOptions, generate

BUNDLED = Path(__file__).resolve().parents[2] / "estimators" / "data" / "gavel_throughputs.json"


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_compare_runs_end_to_end_when_the_cluster_goes_idle_between_arrivals(tmp_path):
    """The reproducer of issue 16: job 1 arrives long after job 0 finished."""
    cluster = _write(tmp_path / "c.yaml", "name: one\nnodes:\n  - {name: n, gpus: {a100: 8}}\n")
    table = _write(tmp_path / "t.json", json.dumps({"a100": {"('cifar10', 1)": {"null": 17.0}}}))
    jobs = _write(
        tmp_path / "j.csv",
        "id,type,gpus,steps,arrival\n0,cifar10,1,1000,0\n1,cifar10,1,1000,1000\n",
    )
    out = tmp_path / "out"
    assert (
        main(
            [
                "compare",
                "--cluster",
                str(cluster),
                "--throughputs",
                str(table),
                "--workload",
                str(jobs),
                "--policies",
                "hadar,gavel",
                "--out",
                str(out),
                "--decision-sizes",
                "32",
            ]
        )
        == 0
    )
    for policy in ("hadar", "gavel"):
        with (out / policy / "rounds.csv").open() as fh:
            rounds = list(csv.DictReader(fh))
        assert [int(r["round"]) for r in rounds] == list(
            range(len(rounds))
        )  # no index consumed by the gap
        times = [float(r["time"]) for r in rounds]
        assert times[0] == 0.0 and times[-1] == 1000.0  # the gap is visible in time, not in indices
    assert (out / "occupancy_hadar.png").stat().st_size > 0


def test_idle_gaps_do_not_count_against_max_rounds():
    table = GavelThroughputTable.from_json({"v100": {"('A', 1)": {"null": 1.0}}})
    cluster = Cluster("c", (Node("n", {"v100": 1}),))
    jobs = [Job(i, "A", 1, 100.0, arrival=10_000.0 * i) for i in range(5)]  # each fits in one round
    result = simulate(cluster, jobs, make_policy("hadar"), table, SimConfig(max_rounds=5))
    assert [r.index for r in result.rounds] == [0, 1, 2, 3, 4]
    assert all(j.finish is not None for j in result.jobs)


RELABEL = {"v100": "rtx3090", "p100": "t4", "k80": "a100"}
"""Gavel's measured figures under other names: an "rtx3090" that is really a V100, an "a100"
that is really a K80 (a datasheet ranking would put it first)."""


def _relabelled(tmp_path: Path) -> tuple[GavelThroughputTable, Cluster]:
    raw = json.loads(BUNDLED.read_text())
    renamed = {}
    for key, entries in raw.items():
        base, multi, _ = key.partition("_unconsolidated")
        renamed[RELABEL[base] + ("_unconsolidated" if multi else "")] = entries
    table = GavelThroughputTable.from_file(_write(tmp_path / "renamed.json", json.dumps(renamed)))
    nodes = [
        Node(f"{gpu}-{i}", {RELABEL[gpu]: 4}) for gpu in ("v100", "p100", "k80") for i in range(3)
    ]
    return table, Cluster("renamed", tuple(nodes))


@pytest.mark.parametrize("policy", sorted(POLICY_REGISTRY))
def test_every_policy_gives_identical_results_when_gpu_types_are_relabelled(policy, tmp_path):
    original = GavelThroughputTable.bundled()
    jobs = generate(original, PhillyOptions(num_jobs=40, seed=3))
    cluster = Cluster(
        "orig",
        tuple(Node(f"{gpu}-{i}", {gpu: 4}) for gpu in ("v100", "p100", "k80") for i in range(3)),
    )
    renamed_table, renamed_cluster = _relabelled(tmp_path)
    a = simulate(cluster, jobs, make_policy(policy), original, SimConfig())
    b = simulate(renamed_cluster, jobs, make_policy(policy), renamed_table, SimConfig())
    assert [(j.job_id, j.start, j.finish, j.restarts) for j in a.jobs] == [
        (j.job_id, j.start, j.finish, j.restarts) for j in b.jobs
    ]
    back = {v: k for k, v in RELABEL.items()}
    assert [
        (p.round_index, p.job_id, p.copy, p.node, p.gpu_type, p.count) for p in a.placements
    ] == [
        (p.round_index, p.job_id, p.copy, p.node, back[p.gpu_type], p.count) for p in b.placements
    ]


def test_every_simulation_says_which_throughputs_were_estimated(tmp_path, capsys):
    """A T4 node is not in Gavel's table: the run prints the estimated cells and records them."""
    cluster = _write(
        tmp_path / "c.yaml",
        "name: mixed\nnodes:\n  - {name: a, gpus: {v100: 1}}\n  - {name: b, gpus: {t4: 1}}\n",
    )
    jobs = _write(tmp_path / "j.csv", "id,type,gpus,steps\n0,ResNet-18 (batch size 64),1,5000\n")
    out = tmp_path / "out"
    assert (
        main(
            [
                "simulate",
                "--cluster",
                str(cluster),
                "--workload",
                str(jobs),
                "--out",
                str(out),
                "--no-progress",
            ]
        )
        == 0
    )
    err = capsys.readouterr().err
    assert (
        "1 throughput figure(s)" in err
        and "ResNet-18 (batch size 64) x1 on t4 (consolidated)" in err
    )
    summary = json.loads((out / "summary.json").read_text())
    assert summary["estimated_cells"] == [
        {
            "job_type": "ResNet-18 (batch size 64)",
            "gpu_type": "t4",
            "num_gpus": 1,
            "placement": "consolidated",
        }
    ]
    measured = tmp_path / "measured"
    assert (
        main(
            [
                "simulate",
                "--cluster",
                "sim-60gpu",
                "--workload",
                "philly-8",
                "--out",
                str(measured),
                "--no-progress",
            ]
        )
        == 0
    )
    assert "estimated" not in capsys.readouterr().err
    assert json.loads((measured / "summary.json").read_text())["estimated_cells"] == []
