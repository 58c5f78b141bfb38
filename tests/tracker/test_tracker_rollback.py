"""Checkpoints verified at rest: damaged files are quarantined and the job rolled back to its
newest good checkpoint with its step count, in one transaction (real files, real SQLite)."""

from __future__ import annotations

import os
import signal

import pytest
import torch
from tracker_testlib import file_sha, perturbed, tiny_net, write_ckpt

from tracker import JobTracker
from tracker.crashpoints import ENV_VAR
from tracker.errors import RoundError


def _rounds(t: JobTracker, env, job: int, cid: int, steps: list[int], first: int = 0) -> list:
    """Run one report per round for ``job``; return the consolidated checkpoint refs."""
    refs = []
    for k, n in enumerate(steps):
        r = first + k
        t.open_round(r)
        ref = t.latest_checkpoint(job)
        start = (
            tiny_net(job).state_dict()
            if ref is None
            else torch.load(ref.path, weights_only=True)["state_dict"]
        )
        path = env.reports / f"r{r}-c{cid}.pt"
        t.report(r, cid, "n1", n, 1.0, path, write_ckpt(path, perturbed(start, r, n), steps=n))
        refs.append(t.close_round(r).jobs[job].checkpoint)
    return refs


def _flip(path, offset: int = -40) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    path.write_bytes(bytes(data))


def test_good_checkpoint_is_returned_unchanged(tracker: JobTracker, env) -> None:
    tracker.register_job(1, 100)
    cid = tracker.register_copies(1, 1)[0]
    refs = _rounds(tracker, env, 1, cid, [5, 6])
    assert tracker.verified_checkpoint(1) == (refs[-1], None)
    assert tracker.verified_checkpoint(2 - 1)[1] is None
    tracker.register_job(2, 10)
    assert tracker.verified_checkpoint(2) == (None, None)  # nothing trained yet


@pytest.mark.parametrize("damage", ["flip", "truncate", "delete"])
def test_damaged_latest_rolls_back_to_previous_with_its_steps(
    tracker: JobTracker, env, damage
) -> None:
    tracker.register_job(1, 100)
    cid = tracker.register_copies(1, 1)[0]
    refs = _rounds(tracker, env, 1, cid, [5, 6, 7])
    latest = refs[-1].path
    assert not refs[0].path.exists() and refs[1].path.exists()  # keep 2
    if damage == "flip":
        _flip(latest)
    elif damage == "truncate":
        latest.write_bytes(latest.read_bytes()[:100])
    else:
        latest.unlink()
    ref, rb = tracker.verified_checkpoint(1)
    assert ref == refs[1] and rb is not None
    assert (rb.job_id, rb.from_steps, rb.to_steps, rb.checkpoint, rb.reopened) == (
        1,
        18,
        11,
        refs[1],
        False,
    )
    (q,) = rb.quarantined
    assert q.path == latest and not latest.exists()
    if damage == "delete":
        assert q.moved_to is None and "does not exist" in q.reason
    else:
        assert (
            q.moved_to == env.ckpt / "quarantine" / "job-1" / latest.name and q.moved_to.is_file()
        )
        assert "sha256" in q.reason
    st = tracker.job_state(1)
    assert (st.steps_done, st.checkpoint) == (11, refs[1])
    # the next round trains from the rolled-back parameters and counts from 11
    more = _rounds(tracker, env, 1, cid, [4], first=3)
    assert (
        tracker.progress() == {1: 15} and torch.load(more[0].path, weights_only=True)["steps"] == 15
    )
    # the rolled-back checkpoint is the one kept before the new latest
    assert sorted(p.name for p in (env.ckpt / "job-1").iterdir()) == sorted(
        [refs[1].path.name, more[0].path.name]
    )


def test_every_checkpoint_damaged_restarts_from_initial_state_and_reopens(
    tracker: JobTracker, env
) -> None:
    tracker.register_job(1, 11)
    cid = tracker.register_copies(1, 1)[0]
    refs = _rounds(tracker, env, 1, cid, [5, 6])
    assert tracker.is_complete(1) and tracker.active_copies(1) == []
    for ref in refs:
        _flip(ref.path)
    ref, rb = tracker.verified_checkpoint(1)
    assert ref is None and rb.to_steps == 0 and rb.from_steps == 11 and rb.reopened
    assert len(rb.quarantined) == 2
    st = tracker.job_state(1)
    assert (st.steps_done, st.completed, st.checkpoint, st.active_copies) == (
        0,
        False,
        None,
        (cid,),
    )
    assert not list((env.ckpt / "job-1").iterdir())


def test_rollback_falls_back_to_the_initial_checkpoint(tracker: JobTracker, env) -> None:
    init = env.root / "init.pt"
    sha = write_ckpt(init, tiny_net(1).state_dict())
    tracker.register_job(1, 100, initial_checkpoint=init, initial_sha256=sha)
    cid = tracker.register_copies(1, 1)[0]
    (ref0,) = _rounds(tracker, env, 1, cid, [5])
    _flip(ref0.path)
    ref, rb = tracker.verified_checkpoint(1)
    assert ref is not None and ref.round is None and ref.sha256 == sha and rb.to_steps == 0


def test_no_rollback_under_a_round_with_reports(tracker: JobTracker, env) -> None:
    tracker.register_job(1, 100)
    cid = tracker.register_copies(1, 1)[0]
    (ref0,) = _rounds(tracker, env, 1, cid, [5])
    tracker.open_round(1)
    path = env.reports / "x.pt"
    tracker.report(1, cid, "n", 1, 1.0, path, write_ckpt(path, tiny_net(1).state_dict(), steps=1))
    _flip(ref0.path)
    with pytest.raises(RoundError, match="reports in open round 1"):
        tracker.verified_checkpoint(1)
    assert tracker.progress() == {1: 5}


def test_base_damaged_during_a_round_is_quarantined_and_the_round_still_counts(
    tracker: JobTracker, env
) -> None:
    tracker.register_job(1, 100)
    cid = tracker.register_copies(1, 1)[0]
    (ref0,) = _rounds(tracker, env, 1, cid, [5])
    tracker.open_round(1)
    path = env.reports / "x.pt"
    sd = perturbed(torch.load(ref0.path, weights_only=True)["state_dict"], 1, 3)
    tracker.report(1, cid, "n", 3, 1.0, path, write_ckpt(path, sd, steps=3))
    _flip(ref0.path)
    summary = tracker.close_round(1)
    assert (
        summary.jobs[1].steps_total == 8
        and file_sha(summary.jobs[1].checkpoint.path) == summary.jobs[1].checkpoint.sha256
    )
    (q,) = summary.quarantined
    assert q.path == ref0.path and q.moved_to.is_file()


def test_keep_checkpoints_is_a_stored_setting(env) -> None:
    t = env.open(keep_checkpoints=3)
    t.register_job(1, 100)
    cid = t.register_copies(1, 1)[0]
    refs = _rounds(t, env, 1, cid, [1, 1, 1, 1])
    assert [r.path.exists() for r in refs] == [False, True, True, True]
    t.close()
    t = env.open()  # reopened without the setting: the stored one holds, nothing more is pruned
    assert t.keep_checkpoints == 3 and all(r.path.exists() for r in refs[1:])
    t.close()
    with pytest.raises(Exception, match="keep_checkpoints is 3 in the database, not 1"):
        env.open(keep_checkpoints=1)
    with pytest.raises(Exception, match="keep_checkpoints: must be an integer >= 1"):
        JobTracker.open(env.root / "other.sqlite", env.ckpt, keep_checkpoints=0)


def test_sigkill_inside_the_rollback_transaction_then_retry(env) -> None:
    t = env.open()
    t.register_job(1, 100)
    cid = t.register_copies(1, 1)[0]
    refs = _rounds(t, env, 1, cid, [5, 6])
    t.close()
    _flip(refs[-1].path)
    pid = os.fork()
    if pid == 0:  # child: dies inside the transaction
        try:
            os.environ[ENV_VAR] = "rollback:in_tx"
            child = env.open()
            child.verified_checkpoint(1)
        finally:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == -signal.SIGKILL
    with env.open() as t2:
        assert t2.progress() == {1: 11}  # the transaction did not commit
        ref, rb = t2.verified_checkpoint(1)  # the file was already moved aside: roll back now
        assert ref == refs[0] and rb.to_steps == 5 and t2.progress() == {1: 5}
        assert (env.ckpt / "quarantine" / "job-1" / refs[-1].path.name).is_file()
