"""``hadar run`` survives damage to what it has stored: checkpoints damaged while the coordinator
was down, rounds without progress, a full or read-only run directory, a kill during the final
evaluation. Real coordinator processes, real workers, SIGKILL, real files and filesystems."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sqlite3
import subprocess
import uuid
from pathlib import Path

import pytest
import yaml

from tests.e2e.runlib import (
    closed_rounds,
    events,
    hadar,
    kill,
    run_pids,
    run_to_end,
    start,
    start_run,
    steps_added,
    stop_cleanly,
    summary,
    tracker_progress,
    wait_for,
    write_jobs,
    write_unfinishable_job,
)
from tests.fixtures.filesystems import fill
from tests.fixtures.processes import HANG_S
from tracker.crashpoints import ENV_VAR

pytestmark = pytest.mark.slow

TARGETS = {0: 2400, 1: 200, 2: 1600}
"""Jobs of runs that are resumed to the end (a full 6 s round trains ~1,000 MM steps here): J0
outlasts round 0 with a margin, so round 1 is dispatched."""
ENDLESS = {0: 1_000_000, 1: 200, 2: 1_000_000}
"""J0 and J2 outlast any test on any machine, so a job with two checkpoints and work left always
exists; such runs are stopped, not finished."""


def _jobs(tmp_path: Path, targets: dict[int, int] = TARGETS) -> Path:
    return write_jobs(
        tmp_path / "jobs.yaml", {"MM": targets[0], "LT": targets[1], "MM#2": targets[2]}
    )


def _latest(rundir: Path) -> dict[int, tuple[str, int, int]]:
    """{job: (checkpoint path, steps_done, completed)} read straight from the tracker database."""
    conn = sqlite3.connect(f"file:{rundir / 'state.sqlite'}?mode=ro", uri=True)
    try:
        rows = conn.execute("SELECT job_id, ckpt_path, steps_done, completed FROM jobs").fetchall()
    finally:
        conn.close()
    return {r[0]: (r[1], r[2], r[3]) for r in rows}


def _kill_after_two_written_rounds(out: Path, jobs: Path, round_s: str = "6") -> int:
    """Run until some unfinished job has two consolidated checkpoints, SIGKILL the coordinator
    mid-round; return that job's id."""
    proc = start_run(out, jobs, round_s=round_s)
    try:

        def ready() -> bool:
            written: dict[int, int] = {}
            for e in events(out):
                if e["event"] == "aggregation" and e["steps_added"] > 0 and not e["completed"]:
                    written[e["job"]] = written.get(e["job"], 0) + 1
            return any(n >= 2 for n in written.values()) and any(
                e["event"] == "dispatch" and e["round"] > max(closed_rounds(out))
                for e in events(out)
            )

        wait_for(ready, 300, "a job with two checkpoints and the next round dispatched", proc)
        kill(proc.pid)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    state = _latest(out)
    return next(
        j
        for j, (path, _, done) in sorted(state.items())
        if path
        and not done
        and sum(
            1
            for e in events(out)
            if e["event"] == "aggregation" and e["job"] == j and e["steps_added"] > 0
        )
        >= 2
    )


@pytest.fixture(scope="module")
def killed_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    """One run SIGKILLed with a job of two checkpoints (see :func:`_kill_after_two_written_rounds`),
    shared by the damage variants, each of which resumes a copy of it; returns (run, job). What
    the kill left working in the run's node folders is ended first, so that no copy shares a live
    worker with another."""
    base = tmp_path_factory.mktemp("killed")
    out = base / "run"
    job = _kill_after_two_written_rounds(out, _jobs(base, ENDLESS), round_s="4")
    for pid in run_pids(out):
        with contextlib.suppress(ProcessLookupError):
            kill(pid)
    wait_for(lambda: not run_pids(out), HANG_S, "the killed run's workers to end")
    return out, job


def _sockets(folder: str, names: list[str]) -> list[str]:
    """The Unix sockets among ``names`` (the ended warm servers' ones: no copy can be made)."""
    return [n for n in names if (Path(folder) / n).is_socket()]


@pytest.mark.parametrize("damage", ["flip", "truncate"])
def test_checkpoint_damaged_while_down_is_quarantined_and_rolled_back(tmp_path, killed_run, damage):
    out = tmp_path / "run"
    shutil.copytree(killed_run[0], out, symlinks=True, ignore=_sockets)
    job = killed_run[1]
    rel, steps_before, _ = _latest(out)[job]
    ckpt = out / "checkpoints" / rel
    data = bytearray(ckpt.read_bytes())
    if damage == "flip":
        for i in range(len(data) // 2, len(data) // 2 + 16):
            data[i] ^= 0xFF
        ckpt.write_bytes(bytes(data))
    else:
        ckpt.write_bytes(bytes(data[: len(data) // 3]))

    resumed = start("run", "--resume", str(out), "--no-live")
    try:

        def trained_after_the_rollback() -> bool:
            ev = events(out)
            at = next((i for i, e in enumerate(ev) if e["event"] == "rollback"), None)
            return at is not None and any(
                e["event"] == "aggregation" and e["job"] == job and e["steps_added"] > 0
                for e in ev[at:]
            )

        wait_for(trained_after_the_rollback, 300, "the rolled-back job to train again", resumed)
        stop_cleanly(resumed)
    finally:
        if resumed.poll() is None:
            resumed.kill()
    ev = events(out)
    (q,) = [e for e in ev if e["event"] == "quarantine"]
    assert q["job"] == job and q["path"] == str(ckpt.resolve()) and "sha256" in q["reason"]
    assert Path(q["moved_to"]).is_file() and not ckpt.exists()
    (rb,) = [e for e in ev if e["event"] == "rollback"]
    assert (
        rb["job"] == job and rb["from_steps"] == steps_before and 0 < rb["to_steps"] < steps_before
    )
    # exact: the tracker holds every step the rounds added, less those the rollback removed
    added = steps_added(out)
    progress = tracker_progress(out)
    assert progress[job] == added[job] - rb["steps_removed"] > rb["to_steps"]
    assert {j: n for j, n in progress.items() if j != job} == {
        j: n for j, n in added.items() if j != job
    }
    assert all(progress[j] <= ENDLESS[j] for j in progress)
    # the damaged file was never sent: the resumed run quarantined it before its first dispatch,
    # and no copy failed on a checkpoint (a loaded machine may time other copies out)
    resumed_at = [i for i, e in enumerate(ev) if e["event"] == "start"][1]
    first_dispatch = next(i for i, e in enumerate(ev[resumed_at:]) if e["event"] == "dispatch")
    assert ev.index(q) < resumed_at + first_dispatch
    failures = [e for e in ev if e["event"] == "failure"]
    assert all(e["kind"] == "timeout" for e in failures), failures


def test_run_without_progress_stops_with_one_line_and_the_cause(tmp_path):
    # 1 s slots that no copy can train in, on any machine: a worker keeps time for its checkpoint
    # save before the deadline (nodes/trainer.py `save_reserve_seconds`: 0.25 s + 3 x the state at
    # 100 MB/s), and IC at paper size (11.2 M parameters) needs ~1.6 s of it. A cold worker's
    # start-up (2-3 s here) alone is not enough: a machine that starts Python and torch in under
    # 0.75 s would train.
    out = tmp_path / "run"
    jobs = write_unfinishable_job(tmp_path / "jobs.yaml")
    proc = run_to_end(
        out,
        jobs,
        *("--round", "1", "--grace", "30", "--cold-workers", "--stall-rounds", "2"),
        timeout=300,
    )
    assert proc.returncode == 4, proc.stdout + proc.stderr
    err = proc.stderr.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert (
        "no job made progress in 2 rounds" in err[0]
        and "slot shorter than worker start-up and the checkpoint save" in err[0]
    )
    assert "--cold-workers" in err[0] and f"--resume {out}" in err[0]
    assert sorted(closed_rounds(out)) == [0, 1]
    assert [e["event"] for e in events(out)].count("stalled") == 1


def test_a_job_failing_every_round_is_given_up_and_the_others_finish(tmp_path):
    jobs_file = tmp_path / "jobs.yaml"
    write_jobs(jobs_file, {"MM": 300, "LT": 100})
    doc = yaml.safe_load(jobs_file.read_text())
    # fails on the node: a relative path (the node's working directory) is left to the worker;
    # a missing absolute one on local nodes is refused before any round
    doc["jobs"][1]["spec"]["data"] = "no-such-dataset"
    jobs_file.write_text(yaml.safe_dump(doc))
    out = tmp_path / "run"
    proc = run_to_end(out, jobs_file, "--round", "6", "--stall-rounds", "2", timeout=600)
    assert proc.returncode == 4, proc.stdout + proc.stderr
    err = proc.stderr.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "job 1: failing job spec or worker" in err[0] and "no-such-dataset" in err[0]
    assert tracker_progress(out) == {0: 300, 1: 0}
    failed = [e for e in events(out) if e["event"] == "job-failed"]
    assert [e["job"] for e in failed] == [1]
    # job 1 was dispatched exactly stall-rounds times, then never again
    assert len({e["round"] for e in events(out) if e["event"] == "dispatch" and e["job"] == 1}) == 2
    assert summary(out)["completed"] == 1


@pytest.mark.parametrize(
    ("stage", "scored_before"),
    [("evaluate:computed", 0), ("evaluate:scored", 1)],
)
def test_kill_during_evaluation_redoes_only_the_unrecorded_score(tmp_path, stage, scored_before):
    # The coordinator SIGKILLs itself at a named point of the first evaluation (the crash hook of
    # tracker/crashpoints.py), so where the kill lands does not depend on the machine's speed:
    # after the first finished job was scored but before its event was written (that score is
    # lost and must be redone), or right after its event (it must not be redone). Whether the
    # other job has finished by then depends on the machine; the resumed run finishes it.
    out = tmp_path / "run"
    jobs = write_jobs(tmp_path / "jobs.yaml", {"MM": 40, "LT": 30})
    killed = run_to_end(out, jobs, "--round", "8", timeout=300, env={ENV_VAR: stage}, evaluate=True)
    assert killed.returncode == -signal.SIGKILL, killed.stdout + killed.stderr
    before = [e["job"] for e in events(out) if e["event"] == "evaluation"]
    assert len(before) == scored_before, before
    resumed = hadar("run", "--resume", str(out), "--no-live", timeout=300)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert tracker_progress(out) == {0: 40, 1: 30}
    quality = summary(out)["quality"]
    assert all(q["metric"] and q["value"] is not None for q in quality.values()), quality
    again = [e["job"] for e in events(out) if e["event"] == "evaluation"]
    assert sorted(again) == [0, 1], "each job scored once: a recorded score is not redone"
    assert again[:scored_before] == before


# -- a full or read-only run directory (real filesystems mounted by the test) -------------------


def _mount(*args: str) -> None:
    """Run mount(8); skip the test where this machine does not allow it (not root, container)."""
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("needs root and mount(8) to make a size-limited or read-only filesystem")
    res = subprocess.run(["mount", *args], capture_output=True, text=True)
    if res.returncode != 0:
        pytest.skip(f"this machine does not allow mount {' '.join(args)}: {res.stderr.strip()}")


def _bind_read_only(directory: Path, stage: Path) -> None:
    """Make `directory` read-only for every later open, race-free while a run writes to it.

    Remounting a bind mount read-only fails with EBUSY if anything has a file open for writing
    through that mount, and the run opens files all the time. So the read-only mount is made
    on `stage` (which nobody writes through) and then bound over `directory` in one step: a
    bind mount inherits the read-only flag of its source.
    """
    subprocess.run(["mount", "--bind", str(directory), str(stage)], check=True)
    subprocess.run(["mount", "-o", "remount,bind,ro", str(stage)], check=True)
    subprocess.run(["mount", "--bind", str(stage), str(directory)], check=True)
    subprocess.run(["umount", str(stage)], check=True)


@pytest.mark.parametrize("fault", ["full", "read-only"])
def test_full_or_read_only_run_directory_stops_with_one_line_and_resumes(tmp_path, fault):
    mnt = tmp_path / "fs"
    mnt.mkdir()
    out = mnt / "run"
    if fault == "full":  # a 48 MB tmpfs that the test fills once the run is under way
        _mount("-t", "tmpfs", "-o", "size=48m", f"hadar-test-{uuid.uuid4().hex[:6]}", str(mnt))
    else:  # the run directory read-only from now on: a read-only bind mount over it
        out.mkdir()
        stage = tmp_path / "read-only-stage"
        stage.mkdir()
        _mount("--bind", str(out), str(stage))
        _mount("-o", "remount,bind,ro", str(stage))
        subprocess.run(["umount", str(stage)], check=True)
    try:
        proc = start_run(out, _jobs(tmp_path), round_s="6")
        try:
            wait_for(
                lambda: (
                    0 in closed_rounds(out)
                    and any(e["event"] == "dispatch" and e["round"] == 1 for e in events(out))
                ),
                300,
                "round 1 dispatched",
                proc,
            )
            if fault == "full":
                filler = fill(mnt)
            else:
                _bind_read_only(out, stage)
            rc = proc.wait(timeout=300)
            output = proc.stdout.read()
        finally:
            if proc.poll() is None:
                proc.kill()
        assert rc == 5, output
        assert "Traceback" not in output
        lines = [ln for ln in output.splitlines() if ln.startswith("hadar: error:")]
        assert len(lines) == 1, output
        what = "no space left on device" if fault == "full" else "read-only file system"
        assert what in lines[0] and str(out) in lines[0] and f"--resume {out}" in lines[0], lines[0]
        if fault == "full":
            filler.unlink()
        else:
            subprocess.run(["umount", str(out)], check=True)
        resumed = hadar("run", "--resume", str(out), "--no-live", timeout=600)
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        assert tracker_progress(out) == TARGETS
        assert steps_added(out) == TARGETS
    finally:
        for mounted in [mnt] if fault == "full" else [tmp_path / "read-only-stage", out]:
            subprocess.run(["umount", "-R", "-l", str(mounted)], capture_output=True)
