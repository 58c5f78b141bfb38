"""A resumed run is the same run: ``hadar run --policy gavel-fifo`` killed with SIGKILL and
resumed makes the decisions of an uninterrupted run, because the policy's state (Gavel's
allocation, computed once: ``reallocation_interval`` is longer than the run) is journalled with
every round and restored on ``--resume``. Without it the rebuilt policy would compute a new
allocation for the jobs left and move the one still running after the resume (job 2, on the
K80) onto the V100 that job 0 freed."""

from __future__ import annotations

import pytest

from tests.e2e.runlib import (
    LOCAL_3,
    events,
    hadar,
    kill,
    start,
    steps_added,
    wait_for,
    write_jobs,
)
from tests.fixtures.processes import HANG_S

pytestmark = pytest.mark.slow

STEPS = {"MM": 30, "LT": 150, "MM#2": 450}
STEPS_BY_JOB = dict(enumerate(STEPS.values()))
ARGS = (
    "--cluster",
    LOCAL_3,
    "--policy",
    "gavel-fifo",
    "--policy-opt",
    "reallocation_interval=1e9",
    "--round",
    "3",
    "--no-live",
    "--no-eval",
)


def _placements(out) -> set[tuple[int, str]]:
    """(job, node) of every copy the coordinator dispatched."""
    return {(e["job"], e["node"]) for e in events(out) if e["event"] == "dispatch"}


def test_sigkill_and_resume_make_the_decisions_of_an_uninterrupted_run(tmp_path):
    """The uninterrupted run and the one killed go side by side (their emulated workers mostly
    wait on the rounds' wall clock)."""
    jobs = write_jobs(tmp_path / "jobs.yaml", STEPS)
    whole = tmp_path / "whole"
    out = tmp_path / "killed"
    uninterrupted = start("run", "--workload", str(jobs), "--out", str(whole), *ARGS)
    proc = start("run", "--workload", str(jobs), "--out", str(out), *ARGS)
    try:
        # kill mid-round, after job 0 finished and freed its node (the moment a lost state shows)
        def job0_done_and_next_round_dispatched() -> bool:
            ev = events(out)
            done_at = [
                e["round"]
                for e in ev
                if e["event"] == "aggregation" and e["job"] == 0 and e["completed"]
            ]
            return bool(done_at) and any(
                e["event"] == "dispatch" and e["round"] > done_at[0] for e in ev
            )

        wait_for(
            job0_done_and_next_round_dispatched,
            300,
            "job 0 to finish and a later round to start",
            proc,
        )
        kill(proc.pid)
        proc.wait(timeout=30)
        output = uninterrupted.communicate(timeout=HANG_S)[0]
        assert uninterrupted.returncode == 0, output
    finally:
        for p in (proc, uninterrupted):
            if p.poll() is None:
                p.kill()
    expected = _placements(whole)
    assert {job for job, _ in expected} == {0, 1, 2} and len(
        expected
    ) == 3  # one node per job, always
    resumed = hadar("run", "--resume", str(out), "--no-live")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    ev = events(out)
    assert sum(1 for e in ev if e["event"] == "start") == 2
    first_after = min(
        e["round"] for e in ev if e["event"] == "dispatch" and e["t"] > _last_start(ev)
    )
    assert any(
        e["round"] >= first_after for e in ev if e["event"] == "aggregation"
    )  # rounds ran after resume
    assert _placements(out) == expected
    assert steps_added(out) == STEPS_BY_JOB


def _last_start(ev: list[dict]) -> float:
    return max(e["t"] for e in ev if e["event"] == "start")
