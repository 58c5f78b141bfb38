"""Crash safety by killing real processes.

A child process drives the tracker (crash_child.py) and is SIGKILLed at named stages inside
register/report/close_round (``HADAR_TRACKER_CRASH_AT``) and after random delays; after each kill
it is restarted on the same files. The final database (jobs, copies, rounds, reports,
consolidations) and checkpoints must equal those of an unbroken run: step totals equal the
targets exactly, every round is counted once, every checkpoint's sha256 verifies, no orphan files.
Children are forked from the test process (torch already imported, so each restart is cheap) or,
in one test, started as fresh interpreters.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import crash_child
import pytest
import torch
from tracker_testlib import file_sha

from tracker.crashpoints import ENV_VAR, STAGES

CHILD = Path(__file__).with_name("crash_child.py")
REPO = Path(__file__).resolve().parents[2]

CHAIN = [
    "register:in_tx",
    "register:tmp_written",
    "register:renamed",
    "report:in_tx:4",
    "close:averaged",
    "close:tmp_written:2",
    "close:renamed:3",
    "close:in_tx",
    "close:committed",
    "report:in_tx:7",
    "close:pruned",
    "close:in_tx:2",
    "close:renamed:5",
]
"""Kill points in the order a resumed run reaches them (each child must die at its stage)."""


def _fork(root: Path, stage: str | None) -> int:
    """Fork a child running crash_child.run(root); return its pid."""
    pid = os.fork()
    if pid == 0:  # child: never return into pytest
        code = 1
        try:
            os.environ.pop(ENV_VAR, None)
            if stage:
                os.environ[ENV_VAR] = stage
            torch.set_num_threads(1)
            crash_child.run(root)
            code = 0
        except BaseException as exc:  # report and exit non-zero
            print(f"child failed: {exc!r}", file=sys.stderr)
        finally:
            os._exit(code)
    return pid


def _wait(pid: int) -> int:
    """Exit code of a child (negative signal number if killed)."""
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def _rows(db: Path, sql: str, args: tuple = ()) -> list[tuple]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return conn.execute(sql, args).fetchall()
    finally:
        conn.close()


def _final_state(root: Path) -> dict[str, list[tuple]]:
    """Everything the run decided (report paths excluded: they embed the root directory)."""
    db, _ = crash_child.paths(root)
    return {
        "jobs": _rows(db, "SELECT * FROM jobs ORDER BY job_id"),
        "copies": _rows(db, "SELECT * FROM copies ORDER BY copy_id"),
        "rounds": _rows(db, "SELECT * FROM rounds ORDER BY round"),
        "reports": _rows(
            db,
            "SELECT round, copy_id, node, steps, seconds, ckpt_sha256 FROM reports ORDER BY round, copy_id",
        ),
        "consolidations": _rows(db, "SELECT * FROM consolidations ORDER BY round, job_id"),
        "meta": _rows(db, "SELECT * FROM meta ORDER BY key"),
    }


def _check_invariants(root: Path) -> None:
    """What must hold right after any kill, read without opening (or repairing) the tracker."""
    db, ckpt = crash_child.paths(root)
    if not db.exists() or not _rows(db, "SELECT name FROM sqlite_master WHERE name = 'jobs'"):
        return
    assert len(_rows(db, "SELECT round FROM rounds WHERE state = 'open'")) <= 1
    assert not _rows(
        db,
        "SELECT c.round FROM consolidations c JOIN rounds r USING (round) WHERE r.state != 'closed'",
    )
    jobs = _rows(db, "SELECT job_id, target_steps, steps_done, ckpt_path, ckpt_sha256 FROM jobs")
    for job_id, target, done, rel, sha in jobs:
        added = _rows(
            db,
            "SELECT COALESCE(SUM(steps_added), 0) FROM consolidations WHERE job_id = ?",
            (job_id,),
        )[0][0]
        assert done == added <= target
        if rel is not None:
            assert file_sha(ckpt / rel) == sha, f"job {job_id}: committed checkpoint damaged"


def _check_final(root: Path, reference: dict) -> None:
    _, ckpt = crash_child.paths(root)
    state = _final_state(root)
    assert state["consolidations"] == reference["consolidations"], (
        "a round was lost or counted twice"
    )
    assert state == {k: v for k, v in reference.items() if k != "_seconds"}
    totals = {row[0]: row[5] for row in state["jobs"]}  # job_id, ..., steps_done
    assert totals == crash_child.TARGETS
    # retention (default 2): each job's latest checkpoint and the one before it, nothing else
    kept: dict[str, str] = {}
    for row in state["jobs"]:
        written = [
            (c[7], c[8])
            for c in reversed(state["consolidations"])
            if c[1] == row[0] and c[9] == c[0]
        ]
        if row[10] is not None:  # initial checkpoint, older than every round's
            written.append((row[10], row[11]))
        assert written[0] == (row[7], row[8]), f"job {row[0]}: latest is not the newest written"
        kept |= dict(written[:2])
    assert {str(p.relative_to(ckpt)) for p in ckpt.rglob("*") if p.is_file()} == set(kept)
    for rel, sha in kept.items():
        assert file_sha(ckpt / rel) == sha


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict:
    """The unbroken run, in a forked child with the same thread settings as the others.
    Its wall time (``"_seconds"``) scales the random kill delays to this machine's speed."""
    root = tmp_path_factory.mktemp("reference")
    start = time.perf_counter()
    assert _wait(_fork(root, None)) == 0
    return {**_final_state(root), "_seconds": time.perf_counter() - start}


def test_chain_covers_every_crash_point() -> None:
    names = {s.rsplit(":", 1)[0] if s.rsplit(":", 1)[1].isdigit() else s for s in CHAIN}
    # the rollback stage needs a damaged checkpoint: test_tracker_rollback.py kills there
    assert names | {"rollback:in_tx"} == set(STAGES)


def test_sigkill_at_every_stage_then_resume(tmp_path: Path, reference: dict) -> None:
    for stage in CHAIN:
        assert _wait(_fork(tmp_path, stage)) == -signal.SIGKILL, (
            f"{stage}: child was not killed there"
        )
        _check_invariants(tmp_path)
    assert _wait(_fork(tmp_path, None)) == 0
    _check_final(tmp_path, reference)


def _progress(root: Path) -> tuple[int, int]:
    """What the tracker under ``root`` has committed: (closed rounds, reports); (0, 0) before
    its tables exist."""
    db, _ = crash_child.paths(root)
    if not db.exists() or not _rows(db, "SELECT name FROM sqlite_master WHERE name = 'reports'"):
        return 0, 0
    closed = _rows(db, "SELECT COUNT(*) FROM rounds WHERE state = 'closed'")[0][0]
    return int(closed), int(_rows(db, "SELECT COUNT(*) FROM reports")[0][0])


MIN_KILLS = 3
"""Random kills that must land in one run before it finishes."""


def test_sigkill_after_random_delays_then_resume(tmp_path: Path, reference: dict) -> None:
    """Children killed after random delays until one finishes; the run must then equal the
    unbroken one. The delays follow this machine's speed as it is now, not as it was when the
    reference ran: a run that finished before ``MIN_KILLS`` kills landed is checked, then
    started again in a fresh folder with delays half as long; ten kills in a row that committed
    nothing double them (a loaded machine needs longer to reach a commit)."""
    rng = random.Random(20240611)
    longest = reference["_seconds"] / 6  # each child gets at most ~1/6 of an unbroken run
    root, attempt, kills, stalled = tmp_path / "a0", 0, 0, 0
    for _ in range(400):
        before = _progress(root)
        pid = _fork(root, None)
        time.sleep(rng.uniform(0.0, longest))
        with contextlib.suppress(ProcessLookupError):  # it may have finished already
            os.kill(pid, signal.SIGKILL)
        code = _wait(pid)
        if code == 0:
            _check_final(root, reference)
            if kills >= MIN_KILLS:
                break
            attempt, kills, stalled, longest = attempt + 1, 0, 0, longest / 2
            root = tmp_path / f"a{attempt}"
            continue
        assert code == -signal.SIGKILL
        kills += 1
        _check_invariants(root)
        stalled = 0 if _progress(root) != before else stalled + 1
        if stalled >= 10:
            stalled, longest = 0, longest * 2
    else:
        pytest.fail("the run never finished between kills")
    print(f"random-delay kills before the run finished: {kills} (attempt {attempt})")
    assert kills >= MIN_KILLS, f"only {kills} kills landed before the run finished"


def test_sigkill_fresh_interpreter_mid_commit_then_resume(tmp_path: Path, reference: dict) -> None:
    """Same protocol with children started as new Python processes (no fork)."""
    env = {k: v for k, v in os.environ.items() if k != ENV_VAR}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    for stage in ("report:in_tx:5", "close:renamed:2", "close:in_tx", None):
        run_env = dict(env, **({ENV_VAR: stage} if stage else {}))
        proc = subprocess.run(
            [sys.executable, str(CHILD), str(tmp_path)],
            env=run_env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == (0 if stage is None else -signal.SIGKILL), proc.stderr[-2000:]
        _check_invariants(tmp_path)
    _check_final(tmp_path, reference)
