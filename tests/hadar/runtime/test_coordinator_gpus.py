"""The coordinator's GPU hook on real local nodes with a fake nvidia-smi on the PATH: GPUs are
numbered at the first probe, a mismatch before the first round is bad input, a node that joins
later with a mismatch is left down, and a node declared anew is numbered anew."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import yaml

from hadar.runtime.config import RunConfig
from hadar.runtime.coordinator import Coordinator
from hadar.runtime.gpu_inventory import GpuMismatchError
from tests.fixtures.fake_nvidia_smi import T4, V100_16GB, path_with, write_fake_nvidia_smi


def write_cluster(path: Path, nodes: list[dict]) -> Path:
    path.write_text(yaml.safe_dump({"name": "box", "provider": "local", "nodes": nodes}))
    return path


def coordinator(tmp: Path, cluster: Path) -> Coordinator:
    tmp.mkdir(parents=True, exist_ok=True)
    jobs = tmp / "jobs.yaml"
    jobs.write_text(
        yaml.safe_dump(
            {
                "jobs": [
                    {
                        "id": 0,
                        "type": "RS",
                        "gpus": 1,
                        "steps": 10,
                        "spec": {
                            "model": "RS",
                            "size": "tiny",
                            "data": "synthetic",
                            "batch_size": 8,
                            "lr": 0.01,
                        },
                    }
                ]
            }
        )
    )
    cfg = RunConfig(
        run_id="gpus",
        cluster=str(cluster),
        workload=str(jobs),
        policy="hadar",
        started_at=time.time(),
    )
    return Coordinator(tmp / "run", cfg)


@pytest.fixture
def four_v100_and_a_t4(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Local nodes run with this process's environment: put the fake nvidia-smi first."""
    monkeypatch.setenv(
        "PATH", path_with(write_fake_nvidia_smi(tmp_path / "bin", [V100_16GB] * 4 + [T4]))
    )


@pytest.mark.usefixtures("four_v100_and_a_t4")
def test_preflight_numbers_the_gpus_or_refuses_the_cluster(tmp_path: Path) -> None:
    good = write_cluster(
        tmp_path / "good.yaml",
        [
            {"name": "a", "gpus": {"v100": 2, "t4": 1}, "emulate": False},
            {"name": "b", "gpus": {"v100": 2}, "emulate": False},
        ],
    )
    c = coordinator(tmp_path / "g", good)
    try:
        c.preflight()
        assert {n: dict(g.ids) for n, g in c._gpus.items()} == {
            "a": {"v100": (0, 1), "t4": (4,)},
            "b": {"v100": (2, 3)},
        }
        assert [e["node"] for e in c.events.read() if e["event"] == "gpus"] == ["a", "b"]
    finally:
        c.close()
    bad = write_cluster(tmp_path / "bad.yaml", [{"name": "a", "gpus": {"t4": 2}, "emulate": False}])
    c = coordinator(tmp_path / "b", bad)
    try:
        with pytest.raises(
            GpuMismatchError, match=r"^node a: declares 2x t4 but nvidia-smi shows 1 usable"
        ):
            c.preflight()
        assert c.journal.rounds() == []  # nothing planned, nothing dispatched
    finally:
        c.close()


@pytest.mark.usefixtures("four_v100_and_a_t4")
def test_a_node_joining_with_a_mismatch_is_left_down_and_a_redeclared_node_renumbered(
    tmp_path: Path,
) -> None:
    path = write_cluster(
        tmp_path / "c.yaml", [{"name": "a", "gpus": {"v100": 1}, "emulate": False}]
    )
    c = coordinator(tmp_path, path)
    try:
        c.preflight()
        assert c._gpus["a"].ids == {"v100": (0,)}
        time.sleep(0.01)
        write_cluster(
            path,
            [
                {"name": "a", "gpus": {"v100": 1}, "emulate": False, "gpu_indices": {"v100": [3]}},
                {"name": "late", "gpus": {"a100": 1}, "emulate": False},
            ],
        )
        up = c._available_cluster(1)
        assert up.node_names == ("a",)
        assert c._gpus["a"].ids == {"v100": (3,)}  # declared anew: numbered anew
        down = [e for e in c.events.read() if e["event"] == "node-down"]
        assert [(e["node"], e["error"].split(" but ")[0]) for e in down] == [
            ("late", "node late: declares 1x a100")
        ]
        assert c.journal.node_states()["late"][0] is False
    finally:
        c.close()
