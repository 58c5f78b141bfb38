"""Every worker and every gang rank on the GPUs it was placed on, end to end without a GPU: a
fake ``nvidia-smi`` reporting 4 V100s is put on the PATH of a local node (the coordinator's
environment) and of a real sshd node (its sessions' PATH); the workers record the environment
they saw (``result["env"]``), which must be exactly their binding, sticky across rounds and
across ``hadar run --resume``. Declared GPUs the node does not have fail before any round."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.runlib import REPO, events, wait_for
from tests.fixtures.fake_nvidia_smi import (
    V100_16GB,
    path_with,
    write_broken_nvidia_smi,
    write_fake_nvidia_smi,
)
from tests.fixtures.processes import HANG_S, run_group
from tests.fixtures.sshd import SshdFarm, require_sshd

pytestmark = pytest.mark.slow

SPEC = {"size": "tiny", "data": "synthetic", "batch_size": 16, "lr": 0.001}


def write_jobs(path: Path, jobs: list[tuple[str, int, int]]) -> Path:
    """Jobs (model, GPUs, steps) with ids 0, 1, ..."""
    path.write_text(
        yaml.safe_dump(
            {
                "jobs": [
                    {
                        "id": i,
                        "type": m,
                        "gpus": g,
                        "steps": n,
                        "spec": {"model": m, **SPEC, "seed": i},
                    }
                    for i, (m, g, n) in enumerate(jobs)
                ]
            }
        )
    )
    return path


def local_cluster(path: Path, gpus: dict[str, int], emulate: bool = False) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "name": "box4",
                "provider": "local",
                "nodes": [{"name": "box", "gpus": gpus, "emulate": emulate}],
            }
        )
    )
    return path


def run_args(cluster: Path, jobs: Path, out: Path, round_s: int) -> list[str]:
    """``hadar run`` of ``jobs`` under Hadar (no forking: a gang stays one copy), keeping the
    nodes' work directories after the run (the tests read the workers' results there)."""
    return [
        "run",
        "--keep-node-dirs",
        "--cluster",
        str(cluster),
        "--workload",
        str(jobs),
        "--policy",
        "hadar",
        "--round",
        str(round_s),
        "--no-live",
        "--out",
        str(out),
    ]


def hadar(*args: str, path: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return run_group(
        [sys.executable, "-m", "hadar", *args],
        cwd=REPO,
        timeout=timeout,
        env={**os.environ, "PATH": path, "COLUMNS": "200"},
    )


def start(*args: str, path: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "hadar", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=REPO,
        start_new_session=True,
        env={**os.environ, "PATH": path},
    )


def results(root: Path) -> dict[tuple[int, int, int], dict[str, Any]]:
    """Every worker result under a node directory: (round, job, rank) -> result."""
    out = {}
    for p in root.rglob("result-*.json"):
        rnd, job = p.parent.parent.name, p.parent.name  # r0001-a0 / j2-c0
        out[(int(rnd[1:5]), int(job[1:].split("-")[0]), int(p.stem.split("-")[1]))] = json.loads(
            p.read_text()
        )
    return out


def plans(rundir: Path) -> dict[int, dict[int, dict]]:
    """The journalled plan rows of every round: round -> job -> row."""
    import sqlite3

    conn = sqlite3.connect(rundir / "state.sqlite")
    try:
        rows = conn.execute("SELECT round, plan FROM run_rounds ORDER BY round").fetchall()
    finally:
        conn.close()
    return {r: {row["job"]: row for row in json.loads(plan)} for r, plan in rows}


def interrupt_after_dispatch(proc: subprocess.Popen, rundir: Path, round_: int) -> str:
    """Ctrl-C once round ``round_`` is dispatched: the round finishes, the run exits 130."""
    wait_for(
        lambda: any(e["event"] == "dispatch" and e["round"] == round_ for e in events(rundir)),
        300,
        f"round {round_} to be dispatched",
        proc,
    )
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 130, out
    return out


def _completed_in(rundir: Path, job: int) -> int | None:
    """The round whose close completed ``job`` (None: not yet)."""
    return next(
        (
            e["round"]
            for e in events(rundir)
            if e["event"] == "aggregation" and e["job"] == job and e["completed"]
        ),
        None,
    )


def stop_warm_servers(rundir: Path) -> None:
    for sock in rundir.rglob(
        ".hadar-warm.sock"
    ):  # a warm server exits once idle without its socket
        sock.unlink(missing_ok=True)


def assert_pinned(
    res: dict[str, Any], visible: str, rank: int, local_rank: int, world: int
) -> None:
    env = res["env"]
    assert env["CUDA_VISIBLE_DEVICES"] == visible and env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    assert (env["RANK"], env["LOCAL_RANK"], env["WORLD_SIZE"]) == (
        str(rank),
        str(local_rank),
        str(world),
    )
    assert (res["rank"], res["world_size"]) == (rank, world)
    if world > 1:
        assert env["MASTER_ADDR"] == "127.0.0.1" and int(env["MASTER_PORT"]) > 0
        assert env["LOCAL_WORLD_SIZE"] == str(world)
    else:
        assert "MASTER_ADDR" not in env


def test_local_workers_and_gang_ranks_are_pinned_sticky_and_resumed(tmp_path: Path) -> None:
    path = path_with(write_fake_nvidia_smi(tmp_path / "bin", [V100_16GB] * 4))
    cluster = local_cluster(tmp_path / "box.yaml", {"v100": 4})
    # job 0 finishes in round 0 on a quiet machine (later where load slows its start-up: `done`
    # is the round that completed it); jobs 1 (1 GPU) and 2 (a 2-GPU gang) keep running
    jobs = write_jobs(tmp_path / "jobs.yaml", [("RS", 1, 20), ("RS", 1, 10**6), ("RS", 2, 10**6)])
    out = tmp_path / "run"
    try:
        proc = start(*run_args(cluster, jobs, out, round_s=15), path=path)
        wait_for(lambda: _completed_in(out, 0) is not None, HANG_S, "job 0 to finish", proc)
        done = _completed_in(out, 0)
        interrupt_after_dispatch(proc, out, done + 1)
        first_life = max(plans(out))  # done + 1, unless load kept this test from stopping it there
        proc = start("run", "--resume", str(out), "--no-live", path=path)
        interrupt_after_dispatch(proc, out, first_life + 1)
    finally:
        if proc.poll() is None:
            proc.kill()
        stop_warm_servers(out)
    plan = plans(out)
    gpus = {r: {j: row["gpus"] for j, row in rows.items()} for r, rows in plan.items()}
    last = first_life + 1  # planned by the resumed coordinator
    assert done < first_life and sorted(gpus) == list(range(last + 1))
    # job 0's rounds: the lowest free ids in job order; later rounds: jobs 1 and 2 keep theirs
    # although job 0 left GPU 0 free (also in the last round, planned by the resumed coordinator)
    for r in range(done + 1):
        assert gpus[r] == {
            0: {"box": {"v100": [0]}},
            1: {"box": {"v100": [1]}},
            2: {"box": {"v100": [2, 3]}},
        }, r
    for r in range(done + 1, last + 1):
        assert gpus[r] == {1: {"box": {"v100": [1]}}, 2: {"box": {"v100": [2, 3]}}}, r
    seen = results(out / "nodes")
    assert set(seen) == {(r, 0, 0) for r in range(done + 1)} | {
        (r, j, k) for r in range(last + 1) for j, k in ((1, 0), (2, 0), (2, 1))
    }
    for (r, j, k), res in seen.items():
        assert res["status"] == "ok" and res["steps_done"] > 0, res
        if j == 2:  # the gang: both ranks on the node see the gang's two GPUs, each takes its own
            assert_pinned(res, "2,3", rank=k, local_rank=k, world=2)
        else:
            assert_pinned(res, str(gpus[r][j]["box"]["v100"][0]), rank=0, local_rank=0, world=1)
    # job 0's evaluation ran on the node's first GPU
    evaluation = json.loads(next((out / "nodes").rglob("eval/j0/result.json")).read_text())
    assert evaluation["env"]["CUDA_VISIBLE_DEVICES"] == "0" and "metric" in evaluation
    ev = events(out)
    numbered = [e for e in ev if e["event"] == "gpus"]
    assert len(numbered) == 2 and all(
        e["ids"] == {"v100": [0, 1, 2, 3]} for e in numbered
    )  # once per start


def test_declared_gpus_the_node_lacks_fail_before_any_round(tmp_path: Path) -> None:
    path = path_with(write_fake_nvidia_smi(tmp_path / "bin", [V100_16GB] * 4))
    jobs = write_jobs(tmp_path / "jobs.yaml", [("RS", 1, 20)])
    four = (
        "0: Tesla V100-SXM2-16GB 16 GiB, 1: Tesla V100-SXM2-16GB 16 GiB, 2: Tesla V100-SXM2-16GB 16 GiB, "
        "3: Tesla V100-SXM2-16GB 16 GiB"
    )
    broken = path_with(write_broken_nvidia_smi(tmp_path / "broken"))
    for name, gpus, smi, line in [
        (
            "five",
            {"v100": 5},
            path,
            f"node box: declares 5x v100 but nvidia-smi shows 4 usable ({four})",
        ),
        (
            "a100",
            {"v100": 1, "a100": 1},
            path,
            f"node box: declares 1x a100 but nvidia-smi shows none usable ({four})",
        ),
        (
            "nodriver",
            {"v100": 1},
            broken,
            "node box: declares 1x v100 but shows no NVIDIA GPU (nvidia-smi exited 9); "
            "set emulate: true on the node to train on its CPU",
        ),
    ]:
        cluster = local_cluster(tmp_path / f"{name}.yaml", gpus)
        out = tmp_path / f"run-{name}"
        res = hadar(
            "run",
            "--cluster",
            str(cluster),
            "--workload",
            str(jobs),
            "--out",
            str(out),
            "--no-live",
            path=smi,
        )
        assert res.returncode == 2, res.stdout + res.stderr
        assert res.stderr.strip() == f"hadar: error: {line}"
        assert not (out / "run.json").exists() and not [
            e for e in events(out) if e["event"] == "dispatch"
        ]
        check = hadar("nodes", "check", "--cluster", str(cluster), path=smi)
        lines = check.stdout.strip().splitlines()
        # the node's error below the table, then the closing line giving the reason
        assert check.returncode == 2 and line in lines, check.stdout
        assert lines[-1].endswith("GPUs do not match: box"), check.stdout
        assert "MISMATCH" in check.stdout
    # the same node emulating its GPUs is fine (what local clusters do by default)
    emulated = local_cluster(tmp_path / "emulated.yaml", {"v100": 5}, emulate=True)
    check = hadar("nodes", "check", "--cluster", str(emulated), "--json", path=path)
    assert check.returncode == 0, check.stdout + check.stderr
    row = json.loads(check.stdout)
    assert row["gpu_mismatch"] is None and row["emulate"] is True
    assert row["gpu_ids"]["devices"] == {
        "0": 0,
        "1": 1,
        "2": 2,
        "3": 3,
        "4": 0,
    }  # 5 emulated on 4 real
    good = hadar(
        "nodes",
        "check",
        "--cluster",
        str(local_cluster(tmp_path / "good.yaml", {"v100": 4})),
        "--json",
        path=path,
    )
    assert good.returncode == 0, good.stdout + good.stderr
    row = json.loads(good.stdout)
    assert row["declared"] == {"v100": 4} and row["gpu_ids"]["ids"] == {"v100": [0, 1, 2, 3]}
    assert [g["name"] for g in row["gpus_seen"]] == ["Tesla V100-SXM2-16GB"] * 4 and row[
        "gpu_mismatch"
    ] is None


@pytest.mark.ssh
def test_ssh_workers_and_gang_ranks_are_pinned(tmp_path: Path) -> None:
    require_sshd()
    bin_dir = write_fake_nvidia_smi(tmp_path / "bin", [V100_16GB] * 4)
    with SshdFarm.start(
        tmp_path / "farm",
        n=1,
        nodes=(("ssh-box", {"v100": 4}, 1.0),),
        env={"PATH": path_with(bin_dir)},
        emulate=False,
    ) as farm:
        cluster = farm.write_cluster(tmp_path / "ssh-box.yaml")
        check = hadar(
            "nodes", "check", "--cluster", str(cluster), "--json", path=os.environ["PATH"]
        )
        assert check.returncode == 0, check.stdout + check.stderr
        assert json.loads(check.stdout)["gpu_ids"]["ids"] == {"v100": [0, 1, 2, 3]}
        jobs = write_jobs(tmp_path / "jobs.yaml", [("RS", 1, 30), ("MM", 1, 30), ("RS", 2, 30)])
        out = tmp_path / "run"
        # the coordinator's own PATH has no nvidia-smi: what counts is the node's
        res = hadar(*run_args(cluster, jobs, out, round_s=30), path=os.environ["PATH"])
        assert res.returncode == 0, res.stdout + res.stderr
        seen = results(farm.servers[0].home)
    first = {(j, k): res for (r, j, k), res in seen.items() if r == 0}
    assert set(first) == {(0, 0), (1, 0), (2, 0), (2, 1)}
    assert_pinned(first[(0, 0)], "0", rank=0, local_rank=0, world=1)
    assert_pinned(first[(1, 0)], "1", rank=0, local_rank=0, world=1)
    for k in (0, 1):
        assert_pinned(first[(2, k)], "2,3", rank=k, local_rank=k, world=2)
    assert json.loads((out / "summary.json").read_text())["completed"] == 3
