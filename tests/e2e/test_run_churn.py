"""Nodes joining and leaving between rounds of ``hadar run`` (local provider, real training)."""

from __future__ import annotations

import pytest
import yaml

from tests.e2e.runlib import (
    closed_rounds,
    events,
    run_pids,
    start_run,
    steps_added,
    stop_cleanly,
    tracker_progress,
    wait_for,
    write_jobs,
)
from tests.fixtures.processes import HANG_S

pytestmark = pytest.mark.slow


def _cluster(path, nodes):
    path.write_text(
        yaml.safe_dump(
            {
                "name": "churn",
                "provider": "local",
                "nodes": [{"name": n, "gpus": {t: 1}, "speed_factor": f} for n, t, f in nodes],
            }
        )
    )


def test_a_node_added_to_the_cluster_file_joins_and_a_removed_one_leaves(tmp_path):
    # Jobs far longer than the test runs, so that both jobs still need work after the change on
    # any machine; the run is stopped cleanly (Ctrl-C) once a round has run on the new cluster.
    cluster = tmp_path / "cluster.yaml"
    _cluster(cluster, [("a", "v100", 1.0), ("b", "t4", 0.5)])
    jobs = write_jobs(tmp_path / "jobs.yaml", {"MM": 1_000_000, "LT": 1_000_000})
    out = tmp_path / "run"
    proc = start_run(out, jobs, cluster=str(cluster), round_s="6")
    try:
        wait_for(lambda: 0 in closed_rounds(out), HANG_S, "round 0 to close", proc)
        wait_for(lambda: run_pids(out, "b"), HANG_S, "node b's warm server", proc)
        _cluster(cluster, [("a", "v100", 1.0), ("c", "k80", 0.5)])  # b leaves, c joins

        def both_nodes_ran_on_the_new_cluster() -> bool:
            ev = events(out)
            changed = [e["round"] for e in ev if e["event"] == "cluster-changed"]
            closed = closed_rounds(out)
            return bool(changed) and {
                e["node"]
                for e in ev
                if e["event"] == "result" and e["round"] >= changed[0] and e["round"] in closed
            } >= {"a", "c"}

        # a and c each reported a round on the new cluster (c's first copy may be one that a
        # loaded machine lets start only after the round's deadline: then a later round's)
        wait_for(both_nodes_ran_on_the_new_cluster, HANG_S, "a round on a and c", proc)
        # the removed node's warm server (and any copy it ran) is stopped while the run goes on
        wait_for(lambda: not run_pids(out, "b"), HANG_S, "node b's processes to end", proc)
        stop_cleanly(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
    ev = events(out)
    changed = [e for e in ev if e["event"] == "cluster-changed"]
    assert changed and set(changed[0]["nodes"]) == {"a", "c"}
    after = changed[0]["round"]
    ran_after = {e["node"] for e in ev if e["event"] == "result" and e["round"] >= after}
    assert ran_after == {"a", "c"}
    assert [e["node"] for e in ev if e["event"] == "node-removed"] == ["b"]
    # no step lost or counted twice across the change: the tracker holds what the rounds added
    assert tracker_progress(out) == steps_added(out)
