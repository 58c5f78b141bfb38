"""Every way ``hadar run`` ends is clean (issue 28, items 5 and 6): SIGTERM and SIGHUP stop it as
Ctrl-C does (the round in flight finished and saved, one line, exit 128 + the signal), no node
process outlives it on any exit (a stop, a stall: exit 4), and a coordinator killed right after
the tracker committed a round's close loses no metric. Real coordinators, real workers, real
signals."""

from __future__ import annotations

import csv
import os
import signal
import sqlite3
from pathlib import Path

import pytest

from tests.e2e.runlib import (
    closed_rounds,
    events,
    hadar,
    kill,
    run_argv,
    run_pids,
    run_to_end,
    start_run,
    steps_added,
    summary,
    tracker_progress,
    wait_for,
    wait_until_dispatched,
    write_jobs,
    write_unfinishable_job,
)
from tests.fixtures.processes import HANG_S
from tracker.crashpoints import ENV_VAR

pytestmark = pytest.mark.slow


def flat(text: str) -> str:
    """Output with the console's line wrapping undone."""
    return " ".join(text.split())


def no_process_left(rundir: Path) -> None:
    """Nothing runs in the run's node directories: no worker, no warm server, no child."""
    wait_for(lambda: not run_pids(rundir), 2.0, "the run's node processes to end")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_sigterm_and_sighup_finish_the_round_save_and_say_so(
    tmp_path: Path, sig: signal.Signals
) -> None:
    jobs = write_jobs(tmp_path / "jobs.yaml", {"MM": 1_000_000})  # outlasts any test
    out = tmp_path / "run"
    proc = start_run(out, jobs, round_s="4", policy="hadar")
    try:
        wait_until_dispatched(out, 0, proc)
        in_flight = max(e["round"] for e in events(out) if e["event"] == "dispatch")
        os.kill(proc.pid, sig)
        rc = proc.wait(timeout=HANG_S)
        output = proc.stdout.read() if proc.stdout else ""
        assert rc == 128 + sig, output
        assert (
            f"stopped cleanly ({sig.name}); state saved. Continue with: hadar run --resume {out}"
            in flat(output)
        ), output
        # the round in flight was finished, not dropped (round 0 unless a loaded machine kept
        # this test from sending the signal before the next round was dispatched)
        dispatched = {e["round"] for e in events(out) if e["event"] == "dispatch"}
        assert in_flight in dispatched and closed_rounds(out) == dispatched
        done = tracker_progress(out)[0]
        assert done == steps_added(out).get(0, 0)  # what the round trained is saved
        no_process_left(out)
    finally:
        if proc.poll() is None:
            kill(proc.pid)
        for pid in run_pids(out):
            kill(pid)


def test_a_stalled_run_exit_4_leaves_no_node_process(tmp_path: Path) -> None:
    """1 s rounds with no grace: each copy is killed at its deadline while the node's warm
    server still imports torch, so the run stalls (exit 4) with servers starting. (IC at paper
    size keeps 1.6 s for its checkpoint save, so no machine trains it in a 1 s round.)"""
    jobs = write_unfinishable_job(tmp_path / "jobs.yaml")
    out = tmp_path / "run"
    proc = run_to_end(out, jobs, "--round", "1", "--grace", "0", "--stall-rounds", "2", timeout=300)
    try:
        assert proc.returncode == 4, proc.stdout + proc.stderr
        assert any(e["event"] == "dispatch" for e in events(out))  # warm servers did start
        no_process_left(out)
    finally:
        for pid in run_pids(out):
            kill(pid)


def _completed_in(rundir: Path) -> dict[int, int]:
    """{job: the round whose close completed it}, from the tracker's consolidation rows."""
    conn = sqlite3.connect(f"file:{rundir / 'state.sqlite'}?mode=ro", uri=True)
    try:
        rows = conn.execute(
            "SELECT job_id, MIN(round) FROM consolidations WHERE completed = 1 GROUP BY job_id"
        ).fetchall()
    finally:
        conn.close()
    return dict(rows)


def _csv(path: Path) -> list[dict[str, str]]:
    with path.open() as f:
        return list(csv.DictReader(f))


def test_a_kill_after_the_close_committed_loses_no_metric(tmp_path: Path) -> None:
    """Each life is SIGKILLed right after the tracker commits a round's close, until the killed
    close is one that completed jobs (round 0 may train nothing while workers start)."""
    jobs = write_jobs(tmp_path / "jobs.yaml", {"MM": 60, "LT": 40, "MM#2": 60})
    out = tmp_path / "run"
    args = run_argv(out, jobs, "--policy", "hadar", "--round", "5")
    try:
        for _ in range(6):
            life = hadar(*args, env={ENV_VAR: "close:committed"}, timeout=300)
            assert life.returncode == -signal.SIGKILL, life.stdout + life.stderr
            killed = max(_closed(out))
            if killed in _completed_in(out).values():
                break
            args = ["run", "--resume", str(out), "--no-live"]
        else:
            pytest.fail("no close completed a job in 6 rounds")
        # the events that follow the commit were never written for the killed round
        assert not [e for e in events(out) if e["event"] == "aggregation" and e["round"] == killed]
        resumed = hadar("run", "--resume", str(out), "--no-live", "--no-eval", timeout=300)
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    finally:
        for pid in run_pids(out):
            kill(pid)
    completed_in = _completed_in(out)
    assert sorted(completed_in) == [0, 1, 2]
    ends = {
        int(r["round"]): float(r["time"]) + float(r["duration"]) for r in _csv(out / "rounds.csv")
    }
    rows = {int(j["id"]): j for j in _csv(out / "jobs.csv")}
    jct = []
    for job, round_ in completed_in.items():
        row = rows[job]
        assert row["completed"] == "True"
        assert float(row["finish"]) == pytest.approx(ends[round_], abs=1e-3)
        assert float(row["jct"]) == pytest.approx(float(row["finish"]) - float(row["arrival"]))
        jct.append(float(row["jct"]))
    s = summary(out)
    assert s["completed"] == 3 and s["jobs"] == 3
    assert s["avg_jct_s"] == pytest.approx(sum(jct) / 3, abs=1e-3)
    assert s["ttd_s"] == pytest.approx(max(ends[r] for r in completed_in.values()), abs=1e-3)


def _closed(rundir: Path) -> list[int]:
    conn = sqlite3.connect(f"file:{rundir / 'state.sqlite'}?mode=ro", uri=True)
    try:
        return [r[0] for r in conn.execute("SELECT round FROM rounds WHERE state = 'closed'")]
    finally:
        conn.close()


def test_a_second_process_on_a_live_run_is_exit_6_and_report_reads_it(tmp_path: Path) -> None:
    jobs = write_jobs(tmp_path / "jobs.yaml", {"MM": 1_000_000})
    out = tmp_path / "run"
    proc = start_run(out, jobs, round_s="4", policy="hadar")
    try:
        wait_until_dispatched(out, 0, proc)
        wait_for(lambda: (out / "run.json").exists(), HANG_S, "run.json", proc)
        second = hadar("run", "--resume", str(out), "--no-live", timeout=HANG_S)
        assert second.returncode == 6, second.stdout + second.stderr
        (line,) = second.stderr.strip().splitlines()
        assert line.startswith(
            f"hadar: error: {(out / 'state.sqlite').resolve()}: the tracker database is open "
            "in another process"
        ), line
        report = hadar("report", str(out), timeout=HANG_S)  # reads the live run, takes no lock
        assert report.returncode == 0, report.stdout + report.stderr
        assert (out / "summary.json").exists() and proc.poll() is None
        os.kill(proc.pid, signal.SIGINT)
        assert proc.wait(timeout=HANG_S) == 130  # the run itself went on undisturbed
    finally:
        if proc.poll() is None:
            kill(proc.pid)
        for pid in run_pids(out):
            kill(pid)
