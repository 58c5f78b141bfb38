"""``hadar run --node-stream``: a local node leaves mid-run (its worker SIGKILLed, its copy
preempted) and rejoins later; no step is lost or counted twice."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from tests.e2e.runlib import LOCAL_3, events, start_run, stop_cleanly, wait_for, write_jobs
from tests.faults.campaign import RunFigures, account
from tests.fixtures.processes import HANG_S

pytestmark = pytest.mark.slow

LEAVE_S, REJOIN_S = 8.0, 13.0
STEPS = 1_000_000
"""More steps than any machine trains before the test stops the run (a fast machine finished
4,000 before t4 rejoined): the run is stopped with Ctrl-C once t4 has worked after rejoining."""


def _round_starts(rundir: Path, started: float) -> dict[int, float]:
    """{round: its start in the stream's clock}: when the coordinator took the round's nodes,
    journalled with its plan (a dispatch event is written after the policy decided, which a
    loaded machine delays by seconds)."""
    conn = sqlite3.connect(f"file:{rundir / 'state.sqlite'}?mode=ro", uri=True)
    try:
        rows = conn.execute("SELECT round, started FROM run_rounds").fetchall()
    finally:
        conn.close()
    return {r: t - started for r, t in rows}


def test_a_node_that_leaves_is_killed_gets_no_work_while_down_and_rejoins(tmp_path):
    stream = tmp_path / "stream.csv"
    stream.write_text(
        "time,node,event\n0,v100,join\n0,t4,join\n0,k80,join\n"
        f"{LEAVE_S},t4,leave\n{REJOIN_S},t4,join\n"
    )
    steps = {"MM": STEPS, "MM#2": STEPS}
    jobs = write_jobs(tmp_path / "jobs.yaml", steps)
    out = tmp_path / "run"
    # a 0.1 s aggregation overhead in a 3 s round: a copy on t4 pays whenever it runs at more
    # than 0.1 / 2.9 = 3.4 % of the v100 (HadarE's forking rule), so t4 gets work on any machine
    proc = start_run(
        out,
        jobs,
        cluster=LOCAL_3,
        round_s="3",
        extra=("--node-stream", str(stream), "--aggregation-overhead", "0.1"),
    )
    try:

        def t4_worked_after_rejoining_and_both_jobs_trained() -> bool:
            # (a loaded machine's first rounds may train nothing while the warm servers start,
            # and t4's first result after rejoining may be one of its restarted server's)
            ev = events(out)
            rounds = {e["round"] for e in ev if e["event"] == "result" and e["node"] == "t4"}
            trained = {e["job"] for e in ev if e["event"] == "aggregation" and e["steps_added"]}
            return (
                bool(rounds)
                and any(r in rounds for r in _rounds_after(out, REJOIN_S))
                and trained == {0, 1}
            )

        wait_for(
            t4_worked_after_rejoining_and_both_jobs_trained,
            HANG_S,
            "a result of t4 after it rejoined and a trained round of each job",
            proc,
        )
        stop_cleanly(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
    started = json.loads((out / "run.json").read_text())["started_at"]
    starts = _round_starts(out, started)
    ev = events(out)
    # the stream's leave killed the node's processes (its warm server at least)
    leaves = [e for e in ev if e["event"] == "node-leave"]
    assert [(e["node"], e["at_s"]) for e in leaves] == [("t4", LEAVE_S)]
    assert leaves[0]["killed"] >= 1
    assert leaves[0]["t"] - started >= LEAVE_S
    # no copy on t4 that was still running when the leave killed its processes reported a result
    # (it ran at least its reported wall time from its dispatch; the result event itself is
    # written when the coordinator collects the round, which under load can be after the leave
    # for a copy that had ended before it), and none was dispatched well inside the down time
    dispatched = {
        (e["round"], e["job"], e["node"]): e["t"] - started for e in ev if e["event"] == "dispatch"
    }
    killed_at = leaves[0]["t"] - started
    for e in ev:
        if e["event"] == "result" and e["node"] == "t4":
            t0 = dispatched[(e["round"], e["job"], "t4")]
            assert not (t0 < REJOIN_S and t0 + e["wall_s"] > killed_at), e
    assert not [r for (r, _, n) in dispatched if n == "t4" and LEAVE_S + 1 < starts[r] < REJOIN_S]
    # a copy caught by the leave was preempted, never reported
    preempted = [e for e in ev if e["event"] == "failure" and e["kind"] == "preempted"]
    assert all(e["node"] == "t4" for e in preempted)
    # t4 was given work before it left, and worked again after it rejoined
    assert any(starts[r] < LEAVE_S for (r, _, n) in dispatched if n == "t4")
    t4_results = [e["t"] - started for e in ev if e["event"] == "result" and e["node"] == "t4"]
    assert any(t > REJOIN_S for t in t4_results)
    # the audit: both jobs trained and go on, tracker == checkpoints == committed reports
    figures = RunFigures(targets=dict(enumerate(steps.values())))
    account(out, figures)
    assert all(0 < figures.tracker_steps[j] < STEPS for j in (0, 1)), figures.tracker_steps
    assert figures.checkpoint_steps == figures.tracker_steps
    assert figures.steps_lost == 0 and figures.steps_double_counted == 0
    assert figures.round_mismatches == 0


def _rounds_after(rundir: Path, t: float) -> list[int]:
    """The rounds (journalled so far) that started after stream time ``t``."""
    if not (rundir / "run.json").exists() or not (rundir / "state.sqlite").exists():
        return []
    started = json.loads((rundir / "run.json").read_text())["started_at"]
    return [r for r, s in _round_starts(rundir, started).items() if s > t]
