"""On a real CUDA GPU (tests marked ``gpu``; skipped without one): a worker trains on exactly the
GPU ``CUDA_VISIBLE_DEVICES`` gives it, also through a warm server; a local rank without a
device of its own is refused; an NCCL gang gets one device per rank (needs 2 GPUs); mixed
precision trains; and copies trained on a GPU and on the CPU are averaged by the Job Tracker
and resumed on either."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import torch

from nodes.checkpoint import load_checkpoint, save_checkpoint, sha256_file
from nodes.models import build_model
from tests.nodes.helpers import (
    finish,
    round_args,
    run_worker,
    start_worker,
    stop_warm_server,
    write_spec,
)
from tests.nodes.test_gang import free_port
from tracker import JobTracker

pytestmark = pytest.mark.gpu


def smi_uuids() -> dict[int, str]:
    out = subprocess.run(
        ["nvidia-smi", "--query-gpu=index,uuid", "--format=csv,noheader"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return {int(i): u.strip() for i, u in (line.split(",") for line in out.strip().splitlines())}


def pin(index: int | str, rank: int = 0, local_rank: int = 0, world: int = 1) -> dict[str, str]:
    return {
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
        "CUDA_VISIBLE_DEVICES": str(index),
        "RANK": str(rank),
        "LOCAL_RANK": str(local_rank),
        "WORLD_SIZE": str(world),
    }


def test_a_worker_trains_on_exactly_the_gpu_it_is_pinned_to(tmp_path: Path) -> None:
    write_spec(tmp_path / "spec.json", model="IC")
    uuids = smi_uuids()
    last = max(uuids)  # on a one-GPU machine: index 0
    run = run_worker(*round_args(tmp_path, "g", 5), result=tmp_path / "g.json", env=pin(last))
    assert run.returncode == 0, run.stderr[-2000:]
    res = run.result
    assert res["device"] == "cuda:0" and res["steps_done"] == 5
    assert res["gpu"]["uuid"] == uuids[last] and res["gpu"]["visible"] == 1
    assert "on cuda:0 (fp32)" in run.stdout


def test_a_warm_server_child_uses_the_gpu_of_its_request(tmp_path: Path) -> None:
    write_spec(tmp_path / "spec.json", model="RS")
    node = tmp_path / "node"
    node.mkdir()
    uuids = smi_uuids()
    try:
        for n in range(2):  # the first request starts the server, the second is forked by it
            run = finish(
                start_worker(
                    *round_args(tmp_path, f"w{n}", 3),
                    cwd=node,
                    env=pin(max(uuids)),
                    module="nodes.warm run --",
                ),
                tmp_path / f"w{n}.json",
            )
            assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
            assert (
                run.result["device"] == "cuda:0" and run.result["gpu"]["uuid"] == uuids[max(uuids)]
            )
    finally:
        stop_warm_server(node)


def test_a_local_rank_without_a_device_of_its_own_is_refused(tmp_path: Path) -> None:
    """Two ranks on one GPU (the failure NCCL reports as ncclInvalidUsage) never start: the rank
    whose local rank has no visible device exits 2 with one line before joining the gang."""
    write_spec(tmp_path / "spec.json", model="RS")
    env = dict(
        pin(0, rank=1, local_rank=1, world=2), MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port())
    )
    run = run_worker(*round_args(tmp_path, "r1", 3), result=tmp_path / "r1.json", env=env)
    assert run.returncode == 2
    assert run.stderr.strip() == (
        "hadar-worker: error: --local-rank: 1 needs 2 visible CUDA devices, this "
        "process sees 1 (CUDA_VISIBLE_DEVICES=0)"
    )


@pytest.mark.gpu(count=2)
def test_a_two_rank_nccl_gang_gets_one_device_per_rank(tmp_path: Path) -> None:
    write_spec(tmp_path / "spec.json", model="IC")
    uuids = smi_uuids()
    port = str(free_port())
    envs = {
        r: dict(
            pin("0,1", rank=r, local_rank=r, world=2), MASTER_ADDR="127.0.0.1", MASTER_PORT=port
        )
        for r in (0, 1)
    }
    procs = {r: start_worker(*round_args(tmp_path, f"rank{r}", 6), env=envs[r]) for r in (0, 1)}
    runs = {r: finish(p, tmp_path / f"rank{r}.json") for r, p in procs.items()}
    for r, run in runs.items():
        assert run.returncode == 0, run.stderr[-3000:]
        assert run.result["device"] == f"cuda:{r}" and run.result["gpu"]["uuid"] == uuids[r]
    a = load_checkpoint(tmp_path / "rank0.pt", "IC", "tiny")["state_dict"]
    b = load_checkpoint(tmp_path / "rank1.pt", "IC", "tiny")["state_dict"]
    for key in a:
        assert torch.allclose(a[key].double(), b[key].double(), rtol=0, atol=1e-6), key


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_mixed_precision_trains_on_the_gpu(tmp_path: Path, precision: str) -> None:
    write_spec(tmp_path / "spec.json", model="LT", precision=precision, lr=2e-3)
    run = run_worker(*round_args(tmp_path, "mp", 30), result=tmp_path / "mp.json", env=pin(0))
    assert run.returncode == 0, run.stderr[-2000:]
    res = run.result
    assert res["precision"] == precision and res["device"] == "cuda:0" and res["steps_done"] == 30
    assert res["final_loss"] < res["first_loss"]  # it learns
    ck = load_checkpoint(tmp_path / "mp.pt", "LT", "tiny")
    assert {t.dtype for t in ck["state_dict"].values() if t.is_floating_point()} == {torch.float32}


def test_gpu_and_cpu_copies_are_averaged_and_resume_anywhere(tmp_path: Path) -> None:
    write_spec(tmp_path / "spec.json", model="IC")
    torch.manual_seed(0)
    init = build_model("IC", "tiny")
    # a checkpoint written with its tensors on the GPU (not through save_checkpoint) is read too
    torch.save(
        {
            "format": "hadar-ckpt-1",
            "model": "IC",
            "size": "tiny",
            "state_dict": {k: v.cuda() for k, v in init.state_dict().items()},
            "optimizer": None,
            "steps": 0,
        },
        tmp_path / "init.pt",
    )
    gpu = run_worker(
        *round_args(
            tmp_path, "gpu", 6, "--checkpoint-in", tmp_path / "init.pt", "--data-stream", "1"
        ),
        result=tmp_path / "gpu.json",
        env=pin(0),
    )
    cpu = run_worker(
        *round_args(
            tmp_path, "cpu", 3, "--checkpoint-in", tmp_path / "init.pt", "--data-stream", "2"
        ),
        result=tmp_path / "cpu.json",
        env={"CUDA_VISIBLE_DEVICES": ""},
    )
    assert gpu.returncode == 0 and cpu.returncode == 0, gpu.stderr[-2000:] + cpu.stderr[-2000:]
    assert (gpu.result["device"], cpu.result["device"]) == ("cuda:0", "cpu")

    with JobTracker.open(
        tmp_path / "t.sqlite", tmp_path / "ckpt", max_job_count=10, averaging="steps"
    ) as t:
        t.register_job(1, 100, model="IC", size="tiny")
        c1, c2 = t.register_copies(1, 2)
        t.open_round(0)
        t.report(0, c1, "gpu-node", 6, 1.0, tmp_path / "gpu.pt", gpu.result["sha256"])
        t.report(0, c2, "cpu-node", 3, 1.0, tmp_path / "cpu.pt", cpu.result["sha256"])
        res = t.close_round(0).jobs[1]
        avg = res.checkpoint
        assert res.steps_added == 9 and sha256_file(avg.path) == avg.sha256
    g = load_checkpoint(tmp_path / "gpu.pt", "IC", "tiny")["state_dict"]
    c = load_checkpoint(tmp_path / "cpu.pt", "IC", "tiny")["state_dict"]
    a = load_checkpoint(avg.path, "IC", "tiny")["state_dict"]
    w = "conv1.weight"
    assert torch.allclose(a[w], (6 * g[w] + 3 * c[w]) / 9, atol=1e-6)
    for name, env in (("on-gpu", pin(0)), ("on-cpu", {"CUDA_VISIBLE_DEVICES": ""})):
        run = run_worker(
            *round_args(tmp_path, name, 2, "--checkpoint-in", avg.path),
            result=tmp_path / f"{name}.json",
            env=env,
        )
        assert run.returncode == 0, run.stderr[-2000:]
        assert run.result["start_steps"] == 9 and run.result["end_steps"] == 11
    save_checkpoint(
        tmp_path / "again.pt",
        model="IC",
        size="tiny",
        state_dict=init.cuda().state_dict(),
        optimizer=None,
        steps=0,
    )
    assert all(
        t.device.type == "cpu"
        for t in torch.load(tmp_path / "again.pt", weights_only=True)["state_dict"].values()
    )
