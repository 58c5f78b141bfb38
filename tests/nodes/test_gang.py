"""A 2-worker gang on localhost: two real worker processes joined by torch.distributed (gloo,
on the CPU also on a machine with a GPU: one GPU cannot hold two NCCL ranks; the NCCL gang is
``test_gpu_devices.py::test_a_two_rank_nccl_gang_gets_one_device_per_rank``) train one job with
DistributedDataParallel, each rank on its own data shard and at its own emulated speed, and end
with identical parameters."""

from __future__ import annotations

import socket
from pathlib import Path

import torch

from nodes.checkpoint import load_checkpoint, sha256_file
from nodes.models import build_model
from tests.nodes.helpers import BUDGET_DEADLINE_S, finish, start_worker, write_spec


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


STEPS = 40
"""Enough steps that the edges of the timing window (the slow rank's sleep after its last step,
one stall of either process) are a few per cent of it, not a quarter."""


def test_two_rank_gang_trains_with_ddp_and_ends_identical(tmp_path: Path) -> None:
    write_spec(tmp_path / "spec.json", model="IC")
    port = str(free_port())
    speeds = {0: "1.0", 1: "0.5"}
    procs = {
        r: start_worker(
            "--spec",
            tmp_path / "spec.json",
            "--steps",
            str(STEPS),
            "--deadline-s",
            f"{BUDGET_DEADLINE_S:g}",
            "--checkpoint-out",
            tmp_path / f"rank{r}.pt",
            "--result",
            tmp_path / f"rank{r}.json",
            "--rank",
            str(r),
            "--world-size",
            "2",
            "--master-addr",
            "127.0.0.1",
            "--master-port",
            port,
            "--speed-factor",
            speeds[r],
            "--device",
            "cpu",
        )
        for r in (0, 1)
    }
    runs = {r: finish(p, tmp_path / f"rank{r}.json") for r, p in procs.items()}
    for r, run in runs.items():
        assert run.returncode == 0, (r, run.stderr[-3000:])
        res = run.result
        assert (res["rank"], res["world_size"], res["steps_done"], res["end_steps"]) == (
            r,
            2,
            STEPS,
            STEPS,
        )
        assert res["sha256"] == sha256_file(tmp_path / f"rank{r}.pt")
    r0, r1 = runs[0].result, runs[1].result
    # each rank trained on its own shard: their losses differ...
    assert r0["first_loss"] != r1["first_loss"]
    # ...yet DDP kept the replicas in lock-step: identical parameters (and averaged BN statistics)
    a = load_checkpoint(tmp_path / "rank0.pt", "IC", "tiny")["state_dict"]
    b = load_checkpoint(tmp_path / "rank1.pt", "IC", "tiny")["state_dict"]
    for key in a:
        assert torch.equal(a[key], b[key]), key
    torch.manual_seed(0)
    init = build_model("IC", "tiny").state_dict()
    assert not torch.equal(a["conv1.weight"], init["conv1.weight"])  # and they did train
    # the gang runs at its slowest member's pace: the full-speed rank is held back to about
    # the half-speed rank's step rate (alone it would run about twice as fast)
    assert r0["steps_per_second"] < 1.5 * r1["steps_per_second"], (
        r0["steps_per_second"],
        r1["steps_per_second"],
    )
