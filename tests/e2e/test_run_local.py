"""``hadar run`` end to end on local nodes with real training of tiny models."""

from __future__ import annotations

import contextlib
import csv
import json

import pytest

from tests.e2e.runlib import (
    LOCAL_3,
    closed_rounds,
    events,
    hadar,
    kill,
    run_to_end,
    start_run,
    steps_added,
    stop_all_cleanly,
    stop_cleanly,
    summary,
    tracker_progress,
    wait_for,
    wait_until_dispatched,
    worker_pids,
    write_jobs,
)
from tests.fixtures.processes import HANG_S

pytestmark = pytest.mark.slow


def test_a_hadare_refill_trains_on_the_gpu_a_finished_copy_left_with_exact_steps(tmp_path):
    # M-4 on three local nodes: HadarE's first decision (throughput estimates, the same on any
    # machine) has the MM job follow job 0 on the T4 node once job 0's copy returns (a refill);
    # rounds of 60 s leave the refill time even on a loaded machine
    out = tmp_path / "run"
    proc = run_to_end(out, "M-4", "--size", "tiny", "--policy", "hadare", "--round", "60")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    log = events(out)
    refills = [e for e in log if e["event"] == "dispatch" and "after" in e]
    assert refills, "no refill planned"
    first = refills[0]
    followed = next(
        e
        for e in log
        if e["event"] == "dispatch"
        and e["round"] == first["round"]
        and [e["job"], e["copy"]] == first["after"]
    )
    assert followed["node"] == first["node"] and followed["gpus"] == first["gpus"]
    result = next(
        e
        for e in log
        if e["event"] == "result"
        and e["round"] == first["round"]
        and (e["job"], e["copy"]) == (first["job"], first["copy"])
    )
    assert result["steps"] > 0
    # every job ends at exactly its target: the refill's steps were summed like any copy's
    assert tracker_progress(out) == {0: 300, 1: 400, 2: 300, 3: 250}


def test_m3_with_hadare_on_local_nodes_completes_and_reports_cru(tmp_path):
    out = tmp_path / "run"
    proc = run_to_end(
        out, "M-3", "--size", "tiny", "--policy", "hadare", "--round", "20", evaluate=True
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    s = summary(out)
    assert s["completed"] == s["jobs"] == 3
    assert 0 < s["cru"] <= 1.0 and s["ttd_s"] > 0
    assert tracker_progress(out) == {0: 300, 1: 250, 2: 250}
    # every finished model was scored on held-out data
    assert all(q["metric"] and q["value"] is not None for q in s["quality"].values())
    for f in (
        "events.jsonl",
        "rounds.csv",
        "jobs.csv",
        "summary.json",
        "nodes_by_round.png",
        "cru_by_round.png",
    ):
        assert (out / f).is_file(), f
    kinds = {e["event"] for e in events(out)}
    assert {"dispatch", "result", "aggregation", "evaluation"} <= kinds
    # disk after the run: the live checkpoint and K-1 = 1 older one per job (--keep-checkpoints 2),
    # no other checkpoint anywhere in the run directory, no node dirs, no fetched copies
    kept = []
    for job in (0, 1, 2):
        written = list(
            dict.fromkeys(
                e["checkpoint"]
                for e in events(out)
                if e["event"] == "aggregation" and e["job"] == job and e["checkpoint"]
            )
        )
        assert written
        assert sorted(str(p) for p in (out / "checkpoints" / f"job-{job}").iterdir()) == sorted(
            written[-2:]
        )
        kept += written[-2:]
    assert sorted(str(p) for p in out.rglob("*.pt")) == sorted(kept)
    assert not (out / "nodes").exists() and not (out / "incoming").exists()
    # hadar report redraws from the saved state and agrees
    (out / "summary.json").unlink()
    rep = hadar("report", str(out))
    assert rep.returncode == 0, rep.stderr
    assert summary(out)["cru"] == pytest.approx(s["cru"])


def test_hadare_utilises_the_cluster_more_than_hadar(tmp_path):
    # One long job and two short ones on three nodes. Once the short ones are done, Hadar has a
    # single job for three nodes while HadarE forks it onto every node. The long job outlasts the
    # test on any machine; each run is stopped cleanly once three rounds without the short jobs closed.
    # A second copy pays only if its rate exceeds overhead / (slot - overhead) of the first's
    # (hadare/policy.py `_worth_forking`). With the default 2 s overhead and a 10 s slot that is
    # 25 %, and the emulated T4 measures 23-37 % of the V100 on this machine, depending on load
    # (below 25 % HadarE rightly keeps the job on one node, as CI once saw). 0.1 s in the 6 s slot
    # here puts the bar at 2 %, far below the K80's ~12 % (which a loaded machine measures lower: a
    # starved copy trains fewer steps), so every node pays on any machine. The two runs go side by side
    # (their emulated workers mostly wait: both together use about a tenth of a core).
    jobs = write_jobs(tmp_path / "jobs.yaml", {"MM": 1_000_000, "LT": 20, "MM#2": 20})
    cru = {}
    policies = ("hadar", "hadare")
    procs = {
        policy: start_run(
            tmp_path / policy,
            jobs,
            round_s="6",
            policy=policy,
            extra=("--aggregation-overhead", "0.1"),
        )
        for policy in policies
    }
    try:
        for policy, proc in procs.items():
            wait_for(
                lambda out=tmp_path / policy: len(_rounds_of_the_long_job_alone(out)) >= 3,
                300,
                "three rounds with only the long job to close",
                proc,
            )
        stop_all_cleanly(list(procs.values()))
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
    for policy in policies:
        out = tmp_path / policy
        progress = tracker_progress(out)
        assert progress[1] == progress[2] == 20
        ev = events(out)
        alone = _rounds_of_the_long_job_alone(out)
        rounds = [
            r for r in csv.DictReader((out / "rounds.csv").open()) if int(r["round"]) in alone
        ]
        assert len(rounds) >= 3, (policy, alone)
        if policy == "hadare":  # every node trains a copy of the long job in every such round
            # but the first: it is decided on round 0's measurements, and under the whole suite's
            # load round 0's copies of the long job on the T4 and the K80 (refills after the short
            # jobs) can miss their slot; CI once saw the first such round decided on the long
            # job's estimated rates there, with the V100 alone, and every node from the next on
            first, *later = sorted(rounds, key=lambda r: int(r["round"]))
            assert "v100" in {
                e["node"]
                for e in ev
                if e["event"] == "result" and e["round"] == int(first["round"])
            }
            for r in later:
                nodes = {
                    e["node"]
                    for e in ev
                    if e["event"] == "result" and e["round"] == int(r["round"])
                }
                assert nodes == {"v100", "t4", "k80"}, (r["round"], nodes)
        busy = sum(float(r["busy_node_seconds"]) for r in rounds)
        cru[policy] = busy / sum(int(r["nodes_up"]) * float(r["duration"]) for r in rounds)
    assert cru["hadare"] > cru["hadar"] + 0.2, cru


def _rounds_of_the_long_job_alone(out) -> set[int]:
    """Closed rounds in which neither short job (1, 2) was dispatched."""
    ev = events(out)
    short = {e["round"] for e in ev if e["event"] == "dispatch" and e["job"] in (1, 2)}
    return closed_rounds(out) - short


def test_a_worker_killed_mid_round_loses_only_that_copys_round(tmp_path):
    # Job 0 outlasts the test on any machine, so a copy trains on the v100 in every round and the
    # run is stopped cleanly (Ctrl-C) once a kill has landed. A kill lands when the copy is still
    # training: one seen at the very end of its round (a loaded machine can delay the test that
    # long) may end by itself first, and then the next round's copy is killed.
    jobs = write_jobs(tmp_path / "jobs.yaml", {"MM": 1_000_000, "LT": 600, "MM#2": 1500})
    out = tmp_path / "run"
    proc = start_run(out, jobs, round_s="6")
    try:
        wait_until_dispatched(out, 1, proc)
        for _ in range(5):
            wait_for(lambda: worker_pids(out, "v100"), HANG_S, "a v100 worker to start", proc)
            round_ = max(e["round"] for e in events(out) if e["event"] == "dispatch")
            for pid in worker_pids(out, "v100"):
                with contextlib.suppress(ProcessLookupError):
                    kill(pid)
            wait_for(lambda r=round_: r in closed_rounds(out), HANG_S, "the round to close", proc)
            if _v100_failures(out):
                break
            wait_until_dispatched(out, round_ + 1, proc)
        else:
            pytest.fail("no kill of a v100 worker landed in 5 rounds")
        stop_cleanly(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
    ev = events(out)
    failures = _v100_failures(out)
    assert failures and all(e["kind"] == "worker-error" for e in failures), failures
    # a killed copy reported nothing that round, and no step was counted twice
    for killed_round in {e["round"] for e in failures}:
        assert not any(
            e["event"] == "result" and e["round"] == killed_round and e["node"] == "v100"
            for e in ev
        )
    assert tracker_progress(out) == steps_added(out)
    assert summary(out)["failures"] >= 1


def _v100_failures(out) -> list[dict]:
    return [e for e in events(out) if e["event"] == "failure" and e["node"] == "v100"]


def test_coordinator_killed_with_sigkill_resumes_with_exact_step_counts(tmp_path):
    # 4 s rounds, the first of which starts the workers: job 0's 2,000 steps outlast it on any
    # machine (here round 0 trains none; a V100 round trains ~400), so the run is still going when
    # round 1 is dispatched (12 s rounds let a fast machine finish in round 0 what the kill was to
    # interrupt). Jobs 1 and 2 are short: once they are done HadarE forks job 0 onto every node.
    targets = {0: 2000, 1: 150, 2: 400}
    jobs = write_jobs(tmp_path / "jobs.yaml", {"MM": 2000, "LT": 150, "MM#2": 400})
    out = tmp_path / "run"
    proc = start_run(out, jobs, round_s="4")
    try:
        wait_until_dispatched(out, 1, proc)
        kill(proc.pid)  # mid-round: workers are running, the round is not closed
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    before = tracker_progress(out)
    assert sum(before.values()) < sum(targets.values())  # killed before the end
    resumed = hadar("run", "--resume", str(out), "--no-live")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert tracker_progress(out) == targets
    assert steps_added(out) == targets
    ev = events(out)
    assert any(e["event"] in ("aborted", "recovered") for e in ev)
    assert sum(1 for e in ev if e["event"] == "start") == 2
    assert json.loads((out / "summary.json").read_text())["completed"] == 3


def test_bad_input_is_one_line_and_leaves_no_run(tmp_path):
    out = tmp_path / "run"
    bad = hadar("run", "--cluster", LOCAL_3, "--workload", "M-99", "--out", str(out), "--no-live")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1 and "M-99" in bad.stderr
    assert not (out / "run.json").exists()
    missing = hadar("run", "--resume", str(tmp_path / "nowhere"))
    assert missing.returncode == 2 and "not a run directory" in missing.stderr
