"""Nodes joining and leaving between rounds of ``hadar run`` (local provider, real training)."""

from __future__ import annotations

import pytest
import yaml

from tests.e2e.runlib import events, start_run, tracker_progress, wait_for, write_jobs

pytestmark = pytest.mark.slow


def _cluster(path, nodes):
    path.write_text(yaml.safe_dump({
        "name": "churn", "provider": "local",
        "nodes": [{"name": n, "gpus": {t: 1}, "speed_factor": f} for n, t, f in nodes],
    }))


def test_a_node_added_to_the_cluster_file_joins_and_a_removed_one_leaves(tmp_path):
    cluster = tmp_path / "cluster.yaml"
    _cluster(cluster, [("a", "v100", 1.0), ("b", "t4", 0.5)])
    jobs = write_jobs(tmp_path / "jobs.yaml", {"MM": 1500, "LT": 1500})
    out = tmp_path / "run"
    proc = start_run(out, jobs, cluster=str(cluster), slot="10")
    try:
        wait_for(lambda: any(e["event"] == "aggregation" and e["round"] == 0 for e in events(out)), 300,
                 "round 0 to close", proc)
        _cluster(cluster, [("a", "v100", 1.0), ("c", "k80", 0.5)])  # b leaves, c joins
        assert proc.wait(timeout=600) == 0, proc.stdout.read()
    finally:
        if proc.poll() is None:
            proc.kill()
    ev = events(out)
    changed = [e for e in ev if e["event"] == "cluster-changed"]
    assert changed and set(changed[0]["nodes"]) == {"a", "c"}
    after = changed[0]["round"]
    ran_after = {e["node"] for e in ev if e["event"] == "result" and e["round"] >= after}
    assert "c" in ran_after and "b" not in ran_after
    assert tracker_progress(out) == {0: 1500, 1: 1500}
