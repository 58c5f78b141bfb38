"""The worker takes its place from torchrun's environment (RANK, LOCAL_RANK, WORLD_SIZE,
MASTER_ADDR, MASTER_PORT) and CUDA_VISIBLE_DEVICES, also through a warm server, records what it
saw, and trains in the spec's precision. Runs on any machine (gangs use gloo on the CPU)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
import torch

from nodes.checkpoint import load_checkpoint
from nodes.worker import main
from tests.fixtures.processes import HANG_S
from tests.nodes.helpers import (
    REPO,
    finish,
    round_args,
    run_worker,
    start_worker,
    stop_warm_server,
    write_spec,
)
from tests.nodes.test_gang import free_port


def test_a_gang_joins_from_torchrun_variables_and_records_them(tmp_path: Path) -> None:
    write_spec(tmp_path / "spec.json", model="RS")
    port = str(free_port())
    envs = {
        r: {
            "RANK": str(r),
            "LOCAL_RANK": str(r),
            "WORLD_SIZE": "2",
            "LOCAL_WORLD_SIZE": "2",
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": port,
            "CUDA_VISIBLE_DEVICES": "",
            "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
        }
        for r in (0, 1)
    }
    procs = {r: start_worker(*round_args(tmp_path, f"rank{r}", 5), env=envs[r]) for r in (0, 1)}
    runs = {r: finish(p, tmp_path / f"rank{r}.json") for r, p in procs.items()}
    for r, run in runs.items():
        assert run.returncode == 0, run.stderr[-2000:]
        res = run.result
        # CUDA_VISIBLE_DEVICES="" hides every GPU: gloo on the CPU, also on a GPU machine
        assert (res["rank"], res["world_size"], res["steps_done"], res["device"]) == (
            r,
            2,
            5,
            "cpu",
        )
        assert res["env"] == envs[r]
    a = load_checkpoint(tmp_path / "rank0.pt", "RS", "tiny")["state_dict"]
    b = load_checkpoint(tmp_path / "rank1.pt", "RS", "tiny")["state_dict"]
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_a_warm_server_hands_each_request_its_clients_environment(tmp_path: Path) -> None:
    write_spec(tmp_path / "spec.json", model="RS")
    node = tmp_path / "node"
    node.mkdir()
    servers = []
    try:
        for n, visible in enumerate(["3", "1,2"]):
            env = {
                "CUDA_VISIBLE_DEVICES": visible,
                "LOCAL_RANK": "0",
                "RANK": "0",
                "WORLD_SIZE": "1",
                "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
            }
            if torch.cuda.is_available():  # keep this test about the relay: train on the CPU
                env["CUDA_VISIBLE_DEVICES"] = ""
            run = finish(
                start_worker(
                    *round_args(tmp_path, f"w{n}", 2), cwd=node, env=env, module="nodes.warm run --"
                ),
                tmp_path / f"w{n}.json",
            )
            assert run.returncode == 0, run.stderr[-2000:]
            assert run.result["env"] == env
            servers.append(warm_servers(node))
        # the second request went to the server the first one started (which inherited the
        # first client's environment): its child still saw the second client's
        assert len(servers[0]) == 1 and servers[1] == servers[0]
    finally:
        stop_warm_server(node)
    end = time.monotonic() + HANG_S
    while warm_servers(node) and time.monotonic() < end:
        time.sleep(0.1)
    assert not warm_servers(node)  # stopped: nothing left running


def warm_servers(cwd: Path) -> set[int]:
    """Pids of the warm servers serving ``cwd``."""
    out = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            where = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue
        if b"nodes.warm" in cmd and b"serve" in cmd and where == str(cwd):
            out.add(int(pid))
    return out


def test_bf16_autocast_trains_on_the_cpu_and_fp16_falls_back_to_fp32(tmp_path: Path) -> None:
    for precision, expect in (("bf16", "bf16"), ("fp16", "fp32")):
        d = tmp_path / precision
        d.mkdir()
        write_spec(d / "spec.json", model="MM", precision=precision)
        run = run_worker(
            *round_args(d, "p", 6), result=d / "p.json", env={"CUDA_VISIBLE_DEVICES": ""}
        )
        assert run.returncode == 0, run.stderr[-2000:]
        assert run.result["precision"] == expect and run.result["steps_done"] == 6
        assert f"on cpu ({expect})" in run.stdout
        ck = load_checkpoint(d / "p.pt", "MM", "tiny")
        # the parameters stay float32 (autocast computes in low precision, stores in full)
        assert {t.dtype for t in ck["state_dict"].values() if t.is_floating_point()} == {
            torch.float32
        }
        assert ck["steps"] == 6


def test_bad_precision_and_placement_variables_exit_2_with_one_line(
    tmp_path: Path, capsys, monkeypatch
) -> None:
    spec = tmp_path / "spec.json"
    write_spec(spec, precision="fp8")
    base = [
        "--spec",
        str(spec),
        "--steps",
        "1",
        "--deadline-s",
        "30",
        "--checkpoint-out",
        str(tmp_path / "c.pt"),
        "--result",
        str(tmp_path / "r.json"),
    ]
    assert main(base) == 2
    err = capsys.readouterr().err.strip()
    assert (
        err
        == f"hadar-worker: error: {spec}: precision: Input should be 'fp32', 'bf16' or 'fp16' (got 'fp8')"
    )
    write_spec(spec)
    monkeypatch.setenv("RANK", "one")
    assert main(base) == 2
    assert capsys.readouterr().err.strip() == "hadar-worker: error: $RANK: not an integer: 'one'"
    monkeypatch.delenv("RANK")
    assert main([*base, "--local-rank", "-1"]) == 2
    assert (
        capsys.readouterr().err.strip() == "hadar-worker: error: --local-rank: must be >= 0, got -1"
    )
    assert json.loads((tmp_path / "r.json").read_text())["status"] == "error"


def test_the_worker_reads_no_placement_it_was_not_given(tmp_path: Path) -> None:
    """Without torchrun variables a worker is rank 0 of 1 on local rank 0 (and records no env)."""
    write_spec(tmp_path / "spec.json", model="RS")
    clean = {
        k: v
        for k, v in os.environ.items()
        if k
        not in (
            "RANK",
            "LOCAL_RANK",
            "WORLD_SIZE",
            "MASTER_ADDR",
            "MASTER_PORT",
            "CUDA_VISIBLE_DEVICES",
        )
    }
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-m", "nodes.worker", *map(str, round_args(tmp_path, "bare", 1))],
        env=dict(clean, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=HANG_S,
    )
    assert out.returncode == 0, out.stderr
    res = json.loads((tmp_path / "bare.json").read_text())
    assert (res["rank"], res["world_size"]) == (0, 1)
    assert set(res["env"]) <= {"CUDA_DEVICE_ORDER", "LOCAL_WORLD_SIZE"}


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_precision_is_part_of_the_spec(tmp_path: Path, precision: str) -> None:
    from nodes.spec import load_spec

    write_spec(tmp_path / "spec.json", precision=precision)
    assert load_spec(tmp_path / "spec.json").precision == precision
    write_spec(tmp_path / "spec.json")
    assert load_spec(tmp_path / "spec.json").precision == "fp32"  # off by default
