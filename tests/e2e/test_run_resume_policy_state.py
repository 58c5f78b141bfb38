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
    kill,
    start,
    steps_added,
    stop_cleanly,
    tracker_progress,
    wait_for,
    write_jobs,
)
from tests.fixtures.processes import HANG_S

pytestmark = pytest.mark.slow

STEPS = {"MM": 30, "LT": 150, "MM#2": 1_000_000}
"""Job 2 outlasts the test on any machine (450 steps let a fast machine finish every job before
the kill), so each run is stopped (Ctrl-C) once jobs 0 and 1 are done and a later round ran."""
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
        wait_for(
            lambda: _done_and_a_later_round_dispatched(out, {0}),
            HANG_S,
            "job 0 to finish and a later round to start",
            proc,
        )
        kill(proc.pid)
        proc.wait(timeout=HANG_S)
        wait_for(
            lambda: _done_and_a_later_round_dispatched(whole, {0, 1}),
            HANG_S,
            "jobs 0 and 1 of the uninterrupted run to finish",
            uninterrupted,
        )
        stop_cleanly(uninterrupted)
    finally:
        for p in (proc, uninterrupted):
            if p.poll() is None:
                p.kill()
    expected = _placements(whole)
    assert {job for job, _ in expected} == {0, 1, 2} and len(
        expected
    ) == 3  # one node per job, always
    resumed = start("run", "--resume", str(out), "--no-live")
    try:
        # the resumed session's own start first: the killed one may have finished jobs 0 and 1
        # and dispatched a later round already (a Ctrl-C before the resumed run is up kills it)
        wait_for(
            lambda: (
                _starts(events(out)) == 2
                and _done_and_a_later_round_dispatched(out, {0, 1}, after=_last_start(events(out)))
            ),
            HANG_S,
            "jobs 0 and 1 to finish and a round to start after the resume",
            resumed,
        )
        stop_cleanly(resumed)
    finally:
        if resumed.poll() is None:
            resumed.kill()
    ev = events(out)
    assert _starts(ev) == 2
    first_after = min(
        e["round"] for e in ev if e["event"] == "dispatch" and e["t"] > _last_start(ev)
    )
    assert any(
        e["round"] >= first_after for e in ev if e["event"] == "aggregation"
    )  # rounds ran after resume
    assert _placements(out) == expected
    added = steps_added(out)
    assert (added[0], added[1]) == (STEPS["MM"], STEPS["LT"]) and 0 < added[2] < STEPS["MM#2"]
    assert tracker_progress(out) == added


def _done_and_a_later_round_dispatched(out, jobs: set[int], after: float = 0.0) -> bool:
    """Whether ``jobs`` have finished and a round after the last of them was dispatched (and,
    with ``after``, one dispatched after that time)."""
    ev = events(out)
    done_at = {
        e["job"]: e["round"]
        for e in ev
        if e["event"] == "aggregation" and e["job"] in jobs and e["completed"]
    }
    return done_at.keys() == jobs and any(
        e["event"] == "dispatch" and e["round"] > max(done_at.values()) and e["t"] > after
        for e in ev
    )


def _starts(ev: list[dict]) -> int:
    return sum(1 for e in ev if e["event"] == "start")


def _last_start(ev: list[dict]) -> float:
    return max(e["t"] for e in ev if e["event"] == "start")
