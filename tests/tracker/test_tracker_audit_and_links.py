"""The tracker's audit trail balances after a rollback, and its clean-ups never delete through a
planted link (issue 28, items 2 and 5). Real tracker, real checkpoint files, real SQLite."""

from __future__ import annotations

import sqlite3

from test_tracker_rollback import _flip, _rounds

from tracker import JobTracker


def test_the_audit_trail_agrees_with_steps_done_after_a_rollback(tracker: JobTracker, env) -> None:
    tracker.register_job(1, 25)
    cid = tracker.register_copies(1, 1)[0]
    refs = _rounds(tracker, env, 1, cid, [9, 7])  # 16 steps, two checkpoints kept
    for ref in refs:
        _flip(ref.path)
    _, rb = tracker.verified_checkpoint(1)  # every checkpoint damaged: back to 0 steps
    assert rb is not None and (rb.from_steps, rb.to_steps) == (16, 0)
    _rounds(tracker, env, 1, cid, [20, 10], first=2)  # retrained to the target
    assert tracker.progress() == {1: 25}
    added, removed = tracker.steps_audit()[1]
    assert (added, removed) == (16 + 25, 16)
    assert added - removed == tracker.job_state(1).steps_done
    db = sqlite3.connect(env.db)
    try:
        rows = db.execute(
            "SELECT job_id, after_round, steps_before, steps_after FROM rollbacks"
        ).fetchall()
        reason = db.execute("SELECT reason FROM rollbacks").fetchone()[0]
    finally:
        db.close()
    assert rows == [(1, 1, 16, 0)] and "sha256" in reason


def test_reopening_never_deletes_through_a_planted_checkpoint_link(env) -> None:
    t = env.open()
    t.register_job(1, 100)
    t.close()
    elsewhere = env.root / "elsewhere"
    elsewhere.mkdir()
    owned_looking = elsewhere / f"round-3-{'a' * 64}.pt"
    owned_looking.write_bytes(b"someone's file")
    temp_looking = elsewhere / ".tmp-123.pt"
    temp_looking.write_bytes(b"x")
    (env.ckpt / "job-77").symlink_to(elsewhere)
    (env.ckpt / "job-1").mkdir(parents=True, exist_ok=True)
    (env.ckpt / "job-1" / f"round-9-{'b' * 64}.pt").symlink_to(owned_looking)
    t = env.open()  # the reopen removes orphans and temporary files
    try:
        t.register_copies(1, 1)
    finally:
        t.close()
    assert owned_looking.read_bytes() == b"someone's file" and temp_looking.exists()
