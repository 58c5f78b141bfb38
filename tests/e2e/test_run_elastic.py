"""Real runs of elastic jobs (``--workload elastic-N`` on ``local-elastic``: one local node
emulating four GPUs, each GPU of a gang one worker process): between rounds a job's GPU count
and batch size change by checkpoint-restart, and progress stays exact."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.e2e.runlib import REPO, events, run_to_end, steps_added, tracker_progress

pytestmark = pytest.mark.slow

ELASTIC = str(REPO / "cluster_configs" / "local-elastic.yaml")


def trained_rounds(out: Path) -> dict[int, list[dict[str, Any]]]:
    """Per job, its results that trained at least one step, in round order."""
    per: dict[int, list[dict[str, Any]]] = {}
    for e in events(out):
        if e["event"] == "result" and e["steps"] > 0:
            per.setdefault(e["job"], []).append(e)
    return {j: sorted(rs, key=lambda e: e["round"]) for j, rs in per.items()}


def assert_exact_progress(out: Path, targets: dict[int, int]) -> None:
    """Every job finished with exactly its steps: the tracker's count, the rounds' additions
    and the workers' results agree (nothing lost or counted twice across a rescale)."""
    assert tracker_progress(out) == targets
    assert steps_added(out) == targets
    results = trained_rounds(out)
    assert {j: sum(e["steps"] for e in rs) for j, rs in results.items()} == targets
    for rs in results.values():  # each round's steps start where the last one ended
        assert len({e["round"] for e in rs}) == len(rs)


def test_afs_shrinks_a_running_job_for_a_newcomer_and_grows_it_again(tmp_path):
    out = tmp_path / "run"
    proc = run_to_end(
        out, "elastic-2", "--policy", "afs", "--round", "4", cluster=ELASTIC, timeout=300
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    runs = trained_rounds(out)
    first = runs[0]
    # job 0 trained alone on all four GPUs before job 1 arrived
    alone = [e for e in first if e["round"] < runs[1][0]["round"]]
    assert alone and alone[0]["gpus"] == 4
    # when job 1 ran, job 0 ran on fewer GPUs in the same round
    shared = {e["round"] for e in runs[1]}
    shrunk = [e for e in first if e["round"] in shared]
    assert shrunk and all(e["gpus"] < 4 for e in shrunk)
    # after job 1 finished, job 0 grew again
    grown = [e for e in first if e["round"] > max(shared)]
    assert grown and grown[0]["gpus"] > shrunk[-1]["gpus"]
    # AFS keeps a job's total batch: per-rank batch = 16 / GPUs
    assert {e["batch_size"] for rs in runs.values() for e in rs} == {16}
    assert all(e["local_bsz"] * e["gpus"] == 16 for rs in runs.values() for e in rs)
    # the worker measured every elastic round: step time, sync time and gradient norms
    for e in first:
        assert 0 < e["sync_time"] < e["step_time"]
        assert len(e["replica_sqnorms"]) == e["gpus"] and e["mean_sqnorm"] > 0
    assert_exact_progress(out, {0: 240, 1: 60})
