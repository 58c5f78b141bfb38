"""A copy that fails the same way round after round is not dispatched there again: a real
coordinator runs HadarE on three real local nodes, one of which cannot receive files (its
transfers fail, as a broken disk or mount would); after ``stall_rounds`` such rounds that
(job, node) is withheld and the job goes on on the other nodes, every step counted once."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import yaml

from hadar.providers.base import NodeTransferError
from hadar.runtime.config import RunConfig, RuntimeKnobs
from hadar.runtime.coordinator import Coordinator, StopRequested
from tests.e2e.runlib import tracker_progress, write_jobs
from tests.hadar.runtime.stopping_view import StopAfterRound

pytestmark = pytest.mark.slow

STEPS = 1_000_000
"""More than any machine trains in the test (3,000 let a fast one finish before the broken node
had failed ``stall_rounds`` times): the run is stopped once a round closed after the withholding."""
BAD = "k80"


def _coordinator(tmp: Path) -> Coordinator:
    cluster = tmp / "cluster.yaml"
    cluster.write_text(
        yaml.safe_dump(
            {
                "name": "three",
                "provider": "local",
                "nodes": [
                    {"name": "v100", "gpus": {"v100": 1}, "speed_factor": 1.0},
                    {"name": "t4", "gpus": {"t4": 1}, "speed_factor": 0.5},
                    {"name": BAD, "gpus": {"k80": 1}, "speed_factor": 0.25},
                ],
            }
        )
    )
    jobs = write_jobs(tmp / "jobs.yaml", {"MM": STEPS})
    cfg = RunConfig(
        run_id="withheld",
        cluster=str(cluster),
        workload=str(jobs),
        policy="hadare",
        round_s=4.0,
        grace_s=30.0,
        evaluate=False,
        stall_rounds=3,
        keep_node_dirs=True,
        started_at=time.time(),
    )
    # free restarts and averaging: HadarE forks the job onto every node, the broken one included
    return Coordinator(tmp / "run", cfg, knobs=RuntimeKnobs(0.0, 0.0))


def test_a_copy_failing_the_same_way_is_withheld_and_the_job_finishes_elsewhere(
    tmp_path, monkeypatch
):
    c = _coordinator(tmp_path)
    real_put = c.provider.put

    def put(node, local_path, remote):
        if str(getattr(node, "name", node)) == BAD:
            raise NodeTransferError(f"{BAD}: copy to {remote} failed: Input/output error")
        return real_put(node, local_path, remote)

    monkeypatch.setattr(c.provider, "put", put)

    def withheld_before(r: int) -> bool:  # a round closed after the withholding
        held = [e["round"] for e in c.events.read() if e["event"] == "copy-withheld"]
        return bool(held) and r > held[0]

    c.view = StopAfterRound(c, withheld_before)
    with pytest.raises(StopRequested):
        c.run()  # stall_rounds=3: the first round's warm-up (0 steps) does not give the job up
    ev = [json.loads(line) for line in (tmp_path / "run" / "events.jsonl").read_text().splitlines()]
    on_bad = sorted({e["round"] for e in ev if e["event"] == "dispatch" and e["node"] == BAD})
    failures = [e for e in ev if e["event"] == "failure"]
    assert {e["node"] for e in failures} == {BAD} and {e["kind"] for e in failures} == {"transfer"}
    withheld = [e for e in ev if e["event"] == "copy-withheld"]
    assert [(e["job"], e["nodes"], e["kind"], e["rounds"]) for e in withheld] == [
        (0, [BAD], "transfer", 3)
    ]
    # dispatched there exactly stall_rounds times, never after the event
    assert len(on_bad) == 3 and max(on_bad) <= withheld[0]["round"]
    # the job went on elsewhere, every step counted once; nothing was given up
    added = sum(e["steps_added"] for e in ev if e["event"] == "aggregation")
    assert tracker_progress(tmp_path / "run") == {0: added} and 0 < added < STEPS
    assert not [e for e in ev if e["event"] in ("job-failed", "stalled")] and c.failed == {}
    assert max(e["round"] for e in ev if e["event"] == "dispatch") > withheld[0]["round"]
    # keep_node_dirs: the nodes' work directories stay with each copy's files, less the
    # checkpoints (deleted once fetched)
    nodes = tmp_path / "run" / "nodes" / "withheld"
    assert {p.parent.parent.parent.name for p in nodes.rglob("result-0.json")} == {"v100", "t4"}
    assert not list(nodes.rglob("*.pt"))
