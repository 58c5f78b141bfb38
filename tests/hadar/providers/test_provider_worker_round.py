"""One round of a tiny IC job on an SSH node through the real worker (`python -m nodes.worker`),
returning a checkpoint verified against the sha256 in the worker's result; then the next round
resumes from that checkpoint on another node (what HadarE's copies do between rounds)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from hadar.providers.base import make_provider
from tests.fixtures.sshd import SshdFarm

pytestmark = pytest.mark.ssh

SPEC = {"model": "IC", "size": "tiny", "data": "synthetic", "batch_size": 8, "lr": 0.05, "seed": 0}


def worker_argv(provider, node: str, rnd: str, steps: int, resume: bool) -> list[str]:
    argv = [
        *provider.python(node),
        "-m",
        "nodes.worker",
        "--spec",
        f"{rnd}/spec.json",
        "--steps",
        str(steps),
        "--deadline-s",
        "90",
        "--checkpoint-out",
        f"{rnd}/ckpt.pt",
        "--result",
        f"{rnd}/result.json",
        "--speed-factor",
        str(provider.speed_factor(node)),
        "--threads",
        "1",
    ]
    if resume:
        argv += ["--checkpoint-in", f"{rnd}/in.pt"]
    return argv


def test_tiny_ic_round_on_ssh_nodes_returns_a_verified_checkpoint(
    sshd_farm: SshdFarm, tmp_path: Path
) -> None:
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps(SPEC))
    with make_provider(sshd_farm.cluster(), "ic-round") as p:
        # round 0 on the T4-speed node
        p.put("ssh-t4", spec, "r0/spec.json")
        res = p.run("ssh-t4", worker_argv(p, "ssh-t4", "r0", 4, resume=False), timeout_s=120)
        assert res.ok, res.stderr[-2000:]
        p.get("ssh-t4", "r0/result.json", tmp_path / "r0.json")
        r0 = json.loads((tmp_path / "r0.json").read_text())
        assert r0["status"] == "ok" and r0["steps_done"] == 4 and r0["speed_factor"] == 0.5
        ckpt = tmp_path / "r0.pt"
        got = p.get("ssh-t4", "r0/ckpt.pt", ckpt, expected_sha256=r0["sha256"])
        assert got == r0["sha256"] == hashlib.sha256(ckpt.read_bytes()).hexdigest()

        # round 1 on the V100-speed node, resuming from the verified checkpoint
        p.put("ssh-v100", spec, "r1/spec.json")
        assert p.put("ssh-v100", ckpt, "r1/in.pt") == r0["sha256"]
        res = p.run("ssh-v100", worker_argv(p, "ssh-v100", "r1", 2, resume=True), timeout_s=120)
        assert res.ok, res.stderr[-2000:]
        p.get("ssh-v100", "r1/result.json", tmp_path / "r1.json")
        r1 = json.loads((tmp_path / "r1.json").read_text())
        assert (r1["start_steps"], r1["end_steps"]) == (4, 6)
        p.get("ssh-v100", "r1/ckpt.pt", tmp_path / "r1.pt", expected_sha256=r1["sha256"])
        assert r1["sha256"] != r0["sha256"]
