"""The Job Tracker over a state file shared with other tables (a run's ``state.sqlite``): its
changes are part of the owner's transaction, and the checkpoints a close makes obsolete are
deleted only once that transaction commits."""

from __future__ import annotations

from pathlib import Path

import pytest
from tracker_testlib import tiny_net, write_ckpt

from hadar.core.state_db import StateDb
from tracker import JobTracker
from tracker.errors import TrackerBusyError


def _report(t: JobTracker, env, r: int, seed: int) -> None:
    path = env.reports / f"r{r}.pt"
    sha = write_ckpt(path, tiny_net(seed).state_dict())
    t.report(r, 11, "n1", 5, 1.0, path, sha)


def _owned(env) -> list[str]:
    return sorted(p.name.split("-")[1] for p in (env.ckpt / "job-1").glob("round-*.pt"))


def test_a_close_rolled_back_with_its_owner_keeps_the_checkpoint_it_would_replace(
    env, tmp_path: Path
) -> None:
    db = StateDb(tmp_path / "state.sqlite")
    db.conn.execute("CREATE TABLE timings (round INTEGER)")  # another part's table
    t = JobTracker.open(db, env.ckpt, max_job_count=10, keep_checkpoints=1)
    t.register_job(1, 100, model="IC", size="tiny")
    t.register_copies(1, 1)
    with db.transaction() as c:  # round 0 commits with the other part's row
        t.open_round(0)
        _report(t, env, 0, 0)
        t.close_round(0)
        c.execute("INSERT INTO timings VALUES (0)")
    assert _owned(env) == ["000000"]
    with pytest.raises(RuntimeError), db.transaction():
        t.open_round(1)
        _report(t, env, 1, 1)
        assert t.close_round(1).jobs[1].steps_total == 10
        assert _owned(env) == ["000000", "000001"]  # round 0's is kept until the commit
        raise RuntimeError("the owner's part of the commit point fails")
    assert t.last_closed_round() == 0 and t.job_state(1).steps_done == 5
    assert t.verify_checkpoints() == []  # the job's checkpoint is still there
    with db.transaction() as c:  # the round played again commits, and only then prunes
        t.open_round(1)
        _report(t, env, 1, 1)
        summary = t.close_round(1)
        c.execute("INSERT INTO timings VALUES (1)")
        assert "000000" in _owned(env)
    assert _owned(env) == ["000001"]
    assert summary == t.round_summary(1)  # what the close returned is what was stored
    assert summary.jobs[1].copies == (11,) and summary.jobs[1].checkpoint is not None
    assert [r[0] for r in db.conn.execute("SELECT round FROM timings")] == [0, 1]
    with pytest.raises(TrackerBusyError):  # the run's lock is on the shared file
        JobTracker.open(tmp_path / "state.sqlite", env.ckpt)
    t.close()
    db.conn.execute("SELECT 1")  # closing the tracker leaves the owner's connection open
    db.close()
    reopened = JobTracker.open(tmp_path / "state.sqlite", env.ckpt)  # and standalone again
    try:
        assert reopened.last_closed_round() == 1 and reopened.progress() == {1: 10}
    finally:
        reopened.close()
