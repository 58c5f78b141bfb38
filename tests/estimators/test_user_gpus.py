"""GPU types the catalogue lacks, declared in a cluster file (inline or in a file it names),
used by the nodes, a measured throughputs table and the PMI/PCIe estimate."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from estimators.pmi import PmiEstimator
from hadar.clusters import load_cluster
from hadar.core.errors import InputError
from hadar.core.gpu_catalogue import canonical_gpu, catalogue, forget_user_gpus
from tests.fixtures.processes import run_group

ROOT = Path(__file__).resolve().parents[2]
JOB = "ResNet-18 (batch size 32)"
MY_GPUS = {
    "rtx-2080-ti": {
        "name": "GeForce RTX 2080 Ti",
        "fp32_tflops": 13.4,
        "tensor_tflops": 53.8,
        "memory_gb": 11,
        "pcie_gen": 3,
        "aliases": ["2080ti"],
    },
    "l4": {"fp32_tflops": 30.3, "memory_gb": 24, "pcie_gen": 4},
}


@pytest.fixture(autouse=True)
def _forget() -> Iterator[None]:
    forget_user_gpus()
    yield
    forget_user_gpus()


def simulate(*args: str) -> subprocess.CompletedProcess:
    return run_group(
        [sys.executable, "-m", "hadar", "simulate", "--no-progress", *args],
        cwd=ROOT,
        timeout=300,
    )


def write_cluster(path: Path, gpu_types, nodes=None) -> Path:
    data = {
        "name": "lab",
        "gpu_types": gpu_types,
        "nodes": nodes
        or [
            {"name": "turing", "count": 2, "gpus": {"RTX 2080 Ti": 2}},
            {"name": "ada", "gpus": {"l4": 2}, "pcie_gen": 4},
            {"name": "volta", "gpus": {"v100": 1}},
        ],
    }
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_declared_gpus_are_usable_in_nodes_and_a_measured_table(tmp_path: Path) -> None:
    (tmp_path / "my-gpus.yaml").write_text(yaml.safe_dump({"gpus": MY_GPUS}))
    cluster_file = write_cluster(tmp_path / "lab.yaml", "my-gpus.yaml")
    # a measured table naming the lab's GPUs (and Gavel's v100 figures)
    gavel = json.loads((ROOT / "estimators/data/gavel_throughputs.json").read_text())
    table = {"v100": gavel["v100"], "v100_unconsolidated": gavel["v100_unconsolidated"]}
    for gpu, rate in (("rtx_2080_ti", 6.0), ("l4", 9.0)):
        table[gpu] = {f"('{JOB}', {k})": {"null": rate * k * 0.9} for k in (1, 2)}
        table[f"{gpu}_unconsolidated"] = {
            f"('{JOB}', {k})": {"null": rate * k * 0.8} for k in (1, 2)
        }
    (tmp_path / "measured.json").write_text(json.dumps(table))
    (tmp_path / "jobs.csv").write_text(
        "id,type,gpus,steps\n"
        + "".join(f"{i},{JOB},{1 + i % 2},{2000 + 500 * i}\n" for i in range(6))
    )
    out = tmp_path / "out"
    res = simulate(
        "--cluster",
        str(cluster_file),
        "--workload",
        str(tmp_path / "jobs.csv"),
        "--throughputs",
        str(tmp_path / "measured.json"),
        "--out",
        str(out),
        "--round",
        "60",
    )
    assert res.returncode == 0, res.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["completed"] == summary["jobs"] == 6
    placed = (out / "placements.csv").read_text()
    assert "rtx-2080-ti" in placed and "l4" in placed  # the declared GPUs did work

    cluster = load_cluster(cluster_file)
    assert cluster.node("turing-1").gpus == {"rtx-2080-ti": 2}
    assert set(cluster.gpu_types) == {"rtx-2080-ti", "l4", "v100"}
    assert canonical_gpu("2080TI") == "rtx-2080-ti"
    assert catalogue()["l4"].name == "l4" and catalogue()["l4"].tensor_tflops == 0


def test_the_estimate_uses_the_declared_figures(tmp_path: Path) -> None:
    slow = {"fp32_tflops": 5.0, "memory_gb": 8, "pcie_gen": 3}
    write_cluster(
        tmp_path / "c.yaml",
        {"slow-gpu": slow, "fast-gpu": {**slow, "fp32_tflops": 40.0}},
        nodes=[{"name": "a", "gpus": {"slow-gpu": 1, "fast-gpu": 1}}],
    )
    load_cluster(tmp_path / "c.yaml")
    est = PmiEstimator.bundled()
    assert est.pmi("fast-gpu") > est.pmi("slow-gpu") > 0
    fast = est.estimate(JOB, "fast-gpu", num_gpus=1)
    slow_e = est.estimate(JOB, "slow-gpu", num_gpus=1)
    assert fast.value > slow_e.value > 0


@pytest.mark.parametrize(
    ("gpu_types", "message"),
    [
        (
            {"rtx-2080-ti": {"memory_gb": 11, "pcie_gen": 3}},
            "lab.yaml: gpu_types.rtx-2080-ti.fp32_tflops: missing required field",
        ),
        (
            {"l4": {"fp32_tflops": 30, "memory_gb": 24}},
            "lab.yaml: gpu_types.l4.pcie_gen: missing required field",
        ),
        (
            {"l4": {"fp32_tflops": 30, "memory_gb": 24, "pcie_gen": 9}},
            "lab.yaml: gpu_types.l4.pcie_gen: ",
        ),
        (
            {"l4": {"fp32_tflop": 30, "memory_gb": 24, "pcie_gen": 4}},
            "lab.yaml: gpu_types.l4.fp32_tflop: unknown field",
        ),
        (
            {"l4": {"fp32_tflops": -1, "memory_gb": 24, "pcie_gen": 4}},
            "lab.yaml: gpu_types.l4.fp32_tflops: ",
        ),
        (
            {"Tesla V100": {"fp32_tflops": 1, "memory_gb": 1, "pcie_gen": 3}},
            "is already the catalogue's 'v100'",
        ),
        (
            {"l4": {"fp32_tflops": 30, "memory_gb": 24, "pcie_gen": 4, "aliases": ["t4"]}},
            "lab.yaml: gpu_types.l4: 't4' is already the catalogue's 't4'",
        ),
        ("nope.yaml", "nope.yaml: GPU catalogue file not found"),
        ([1, 2], "lab.yaml: gpu_types: "),
    ],
)
def test_incomplete_declarations_are_one_line_errors(
    tmp_path: Path, gpu_types, message: str
) -> None:
    path = write_cluster(
        tmp_path / "lab.yaml", gpu_types, nodes=[{"name": "a", "gpus": {"v100": 1}}]
    )
    res = simulate("--cluster", str(path), "--workload", "philly-8", "--out", str(tmp_path / "o"))
    assert res.returncode == 2
    err = res.stderr.strip()
    assert err.startswith("hadar: error: ") and message in err and "\n" not in err, err


def test_a_catalogue_file_error_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "gpus.yaml").write_text(
        yaml.safe_dump({"gpus": {"l4": {"fp32_tflops": 30, "pcie_gen": 4}}})
    )
    with pytest.raises(InputError, match=r"gpus.yaml: gpus.l4.memory_gb: missing required field"):
        load_cluster(
            write_cluster(
                tmp_path / "lab.yaml", "gpus.yaml", nodes=[{"name": "a", "gpus": {"l4": 1}}]
            )
        )
    (tmp_path / "gpus.yaml").write_text(yaml.safe_dump({"l4": {}}))
    with pytest.raises(InputError, match=r"gpus.yaml: expected one top-level key `gpus:`"):
        load_cluster(tmp_path / "lab.yaml")


def test_a_table_naming_an_undeclared_gpu_says_how_to_declare_it(tmp_path: Path) -> None:
    from estimators.throughput import GavelThroughputTable

    with pytest.raises(
        InputError,
        match=r"unknown GPU type 'l40s' .*declare your own under the cluster file's gpu_types",
    ):
        GavelThroughputTable.from_json({"l40s": {f"('{JOB}', 1)": {"null": 3.0}}}, "t.json")


def test_conflicting_declarations_of_one_name_are_refused(tmp_path: Path) -> None:
    load_cluster(
        write_cluster(
            tmp_path / "a.yaml", {"l4": MY_GPUS["l4"]}, nodes=[{"name": "a", "gpus": {"l4": 1}}]
        )
    )
    load_cluster(tmp_path / "a.yaml")  # the same figures again: fine
    other = write_cluster(
        tmp_path / "b.yaml",
        {"l4": {**MY_GPUS["l4"], "memory_gb": 48}},
        nodes=[{"name": "a", "gpus": {"l4": 1}}],
    )
    with pytest.raises(
        InputError,
        match=r"b.yaml: gpu_types.l4: GPU type 'l4' already declared with other figures in .*a.yaml",
    ):
        load_cluster(other)


def test_aws_ssh_file_carries_the_declarations(tmp_path: Path) -> None:
    import datetime as dt

    from hadar.clusters import cluster_from_dict
    from hadar.providers.aws.provider import AwsCluster, Instance

    (tmp_path / "my-gpus.yaml").write_text(yaml.safe_dump({"gpus": MY_GPUS}))
    data = {
        "name": "cloud",
        "provider": "aws",
        "gpu_types": "my-gpus.yaml",
        "nodes": [{"name": "g6", "gpus": {"l4": 1}, "instance_type": "g6.xlarge"}],
        "aws": {"ami": "ami-12345678", "region": "us-east-1"},
    }
    (tmp_path / "cloud.yaml").write_text(yaml.safe_dump(data))
    aws = AwsCluster(load_cluster(tmp_path / "cloud.yaml"))
    now = dt.datetime.now(dt.timezone.utc)
    ssh = aws.ssh_cluster_dict(
        [Instance("i-1", "g6", "g6.xlarge", "running", "1.2.3.4", "10.0.0.1", now)]
    )
    assert ssh["gpu_types"]["l4"] == MY_GPUS["l4"]
    forget_user_gpus()  # a fresh process reading only the SSH file
    assert cluster_from_dict(ssh, source="cloud-ssh.yaml").node("g6").gpus == {"l4": 1}


def test_nodes_check_recognises_declared_gpus_by_their_nvidia_smi_name(tmp_path: Path) -> None:
    from hadar.core.gpu_catalogue import gpu_for_smi_name

    gpus = {
        **MY_GPUS,
        "mi-gpu": {
            "fp32_tflops": 1,
            "memory_gb": 1,
            "pcie_gen": 4,
            "smi_pattern": r"Instinct MI250X?",
        },
    }
    load_cluster(write_cluster(tmp_path / "lab.yaml", gpus))
    assert gpu_for_smi_name("NVIDIA GeForce RTX 2080 Ti") == "rtx-2080-ti"
    assert gpu_for_smi_name("NVIDIA L4") == "l4"
    assert gpu_for_smi_name("NVIDIA L40S") is None
    assert gpu_for_smi_name("AMD Instinct MI250X") == "mi-gpu"
    assert gpu_for_smi_name("Tesla V100-SXM2-16GB") == "v100"  # the catalogue's still win
    forget_user_gpus()
    bad = {"l4": {**MY_GPUS["l4"], "smi_pattern": "L4("}}
    with pytest.raises(
        InputError, match=r"lab2.yaml: gpu_types.l4.smi_pattern: not a regular expression"
    ):
        load_cluster(write_cluster(tmp_path / "lab2.yaml", bad))
