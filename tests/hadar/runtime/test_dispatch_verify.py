"""A checkpoint leaves the coordinator only if the bytes sent hash to the sha256 the Job Tracker
recorded: a file damaged after it was verified is refused as it is sent, the worker is never
started on it, and the copy's round is a ``corrupt-checkpoint`` failure. Real local node."""

from __future__ import annotations

import hashlib
from pathlib import Path

from hadar.clusters import load_cluster
from hadar.core.jobs import Job
from hadar.providers.base import make_provider
from hadar.runtime.dispatch import CopyTask, run_copy
from tests.nodes.helpers import spec


def _task(ckpt: Path, sha256: str) -> CopyTask:
    job = Job(0, "RS", 1, 10, model="RS", spec=spec("RS"))
    return CopyTask(
        round=3,
        attempt=0,
        job=job,
        copy=0,
        tracker_copy=1,
        placement={"v100": {"v100": 1}},
        steps=5,
        deadline_s=30.0,
        timeout_s=60.0,
        checkpoint_in=ckpt,
        checkpoint_sha256=sha256,
        data_stream=1,
        threads=1,
        gpus={},
        devices={},
        warm=False,
    )


def test_a_checkpoint_damaged_after_verification_is_never_sent_to_a_worker(tmp_path: Path) -> None:
    provider = make_provider(load_cluster("local-3node"), "run-1", base_dir=tmp_path / "nodes")
    ckpt = tmp_path / "round-000002.pt"
    ckpt.write_bytes(b"consolidated parameters" * 100)
    recorded = hashlib.sha256(ckpt.read_bytes()).hexdigest()
    with ckpt.open("r+b") as f:  # one byte flipped after the tracker verified it
        f.seek(10)
        f.write(b"X")
    out = run_copy(provider, _task(ckpt, recorded), tmp_path / "incoming")
    assert (
        out.kind == "corrupt-checkpoint"
        and str(ckpt) in (out.error or "")
        and "recorded" in (out.error or "")
    )
    node_dir = Path(provider.workdir("v100")) / "r0003-a0" / "j0-c0"
    assert not list(node_dir.glob("result-*.json"))  # the worker never ran
