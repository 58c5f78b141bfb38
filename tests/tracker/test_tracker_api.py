"""Job Tracker API on a real SQLite database and real checkpoint files."""

from __future__ import annotations

import pytest
import torch
from tracker_testlib import dump_db, file_sha, perturbed, tiny_net, write_ckpt

from tracker import JobTracker
from tracker.averaging import average_state_dicts
from tracker.errors import (
    CheckpointError,
    CopyDiscardedError,
    IdError,
    ParameterMismatchError,
    RegistrationError,
    RoundError,
    TrackerBusyError,
    TrackerConfigError,
    UnknownJobError,
)


def _report(t: JobTracker, env, r: int, cid: int, steps: int, base: dict, **kw) -> dict:
    sd = perturbed(base, seed=r * 1000 + cid, batches=steps)
    path = env.reports / f"r{r}-c{cid}.pt"
    sha = write_ckpt(path, sd, steps=steps, **kw)
    t.report(r, cid, f"node{cid % 10}", steps, 0.5 * steps, path, sha)
    return sd


def _load(path) -> dict:
    return torch.load(path, weights_only=True)


def test_round_sums_steps_and_writes_step_weighted_checkpoint(tracker: JobTracker, env) -> None:
    tracker.register_job(1, 20, model="IC", size="tiny")
    assert tracker.register_copies(1, 3) == [11, 12, 13]
    base = tiny_net(1).state_dict()
    tracker.open_round(0)
    sds = [_report(tracker, env, 0, cid, steps, base) for cid, steps in ((11, 4), (12, 2), (13, 0))]
    summary = tracker.close_round(0)
    res = summary.jobs[1]
    assert (res.copies, res.steps_reported, res.steps_added, res.steps_total, res.completed) == (
        (11, 12, 13),
        6,
        6,
        6,
        False,
    )
    assert res.checkpoint.round == 0 and file_sha(res.checkpoint.path) == res.checkpoint.sha256
    saved = _load(res.checkpoint.path)
    assert (saved["format"], saved["model"], saved["size"], saved["steps"]) == (
        "hadar-ckpt-1",
        "IC",
        "tiny",
        6,
    )
    expected = average_state_dicts([(sds[0], 4), (sds[1], 2), (sds[2], 0)], "steps")
    for key, value in expected.items():
        assert torch.equal(saved["state_dict"][key], value), key
    assert int(saved["state_dict"]["1.num_batches_tracked"]) == 6
    assert tracker.progress() == {1: 6}
    assert tracker.latest_checkpoint(1) == res.checkpoint
    assert [r.steps for r in tracker.reports(0)] == [4, 2, 0]

    # round 1 starts from the consolidated parameters: the counter keeps counting
    tracker.open_round(1)
    _report(tracker, env, 1, 11, 3, saved["state_dict"])
    res1 = tracker.close_round(1).jobs[1]
    assert int(_load(res1.checkpoint.path)["state_dict"]["1.num_batches_tracked"]) == 9
    assert res.checkpoint.path.exists(), "the default retention keeps the previous checkpoint"
    tracker.open_round(2)
    _report(tracker, env, 2, 11, 1, saved["state_dict"])
    res2 = tracker.close_round(2).jobs[1]
    assert not res.checkpoint.path.exists(), "a checkpoint two rounds old is pruned by default"
    assert sorted(p.name for p in (env.ckpt / "job-1").iterdir()) == sorted(
        [res1.checkpoint.path.name, res2.checkpoint.path.name]
    )


def test_step_cap_completion_and_discarded_copies(tracker: JobTracker, env) -> None:
    tracker.register_job(2, 10)
    cids = tracker.register_copies(2, 2)
    base = tiny_net(2).state_dict()
    tracker.open_round(0)
    _report(tracker, env, 0, cids[0], 6, base)
    _report(tracker, env, 0, cids[1], 7, base)
    res = tracker.close_round(0).jobs[2]
    assert (res.steps_reported, res.steps_added, res.steps_total, res.completed) == (
        13,
        10,
        10,
        True,
    )
    state = tracker.job_state(2)
    assert state.steps_done == state.target_steps == 10 and state.remaining_steps == 0
    assert tracker.is_complete(2) and tracker.active_copies(2) == []
    tracker.open_round(1)
    with pytest.raises(CopyDiscardedError, match="job 2 is complete"):
        _report(tracker, env, 1, cids[0], 1, base)
    with pytest.raises(RegistrationError, match="complete"):
        tracker.register_copies(2, 3)


def test_all_zero_step_round_keeps_previous_checkpoint(tracker: JobTracker, env) -> None:
    tracker.register_job(1, 50)
    cids = tracker.register_copies(1, 2)
    base = tiny_net(1).state_dict()
    tracker.open_round(0)
    _report(tracker, env, 0, cids[0], 5, base)
    first = tracker.close_round(0).jobs[1].checkpoint
    tracker.open_round(1)
    _report(tracker, env, 1, cids[0], 0, base)
    _report(tracker, env, 1, cids[1], 0, base)
    res = tracker.close_round(1).jobs[1]
    assert (res.steps_added, res.steps_total, res.checkpoint) == (0, 5, first)
    assert sorted(p.name for p in (env.ckpt / "job-1").iterdir()) == [first.path.name]


def test_close_round_is_idempotent_and_rounds_are_ordered(tracker: JobTracker, env) -> None:
    tracker.register_job(1, 50)
    cid = tracker.register_copies(1, 1)[0]
    tracker.open_round(3)
    tracker.open_round(3)  # re-opening the open round is a no-op
    with pytest.raises(RoundError, match="round 3 is still open"):
        tracker.open_round(4)
    _report(tracker, env, 3, cid, 5, tiny_net(1).state_dict())
    first = tracker.close_round(3)
    before = dump_db(env.db)
    assert tracker.close_round(3) == first
    assert dump_db(env.db) == before
    assert tracker.current_round() is None and tracker.last_closed_round() == 3
    with pytest.raises(RoundError, match="not after the last round 3"):
        tracker.open_round(2)
    with pytest.raises(RoundError, match="never opened"):
        tracker.close_round(7)
    empty_next = 5
    tracker.open_round(empty_next)
    assert tracker.close_round(empty_next).jobs == {}


def test_registration_is_idempotent_and_validated(tracker: JobTracker) -> None:
    first = tracker.register_job(4, 100, model="IC")
    assert tracker.register_job(4, 100, model="IC") == first
    assert tracker.register_job(4, 100) == first  # unspecified fields are not a conflict
    with pytest.raises(RegistrationError, match="already registered"):
        tracker.register_job(4, 99)
    with pytest.raises(IdError, match="job_id: 10"):
        tracker.register_job(10, 5)
    with pytest.raises(RegistrationError, match="positive"):
        tracker.register_job(5, 0)
    assert tracker.register_copies(4, 2) == [41, 42]
    assert tracker.register_copies(4, 3) == [41, 42, 43]  # a node joined: one more copy
    assert tracker.register_copies(4, 3) == [41, 42, 43]
    with pytest.raises(RegistrationError, match=r"outside \[1, 10\)"):
        tracker.register_copies(4, 10)
    with pytest.raises(UnknownJobError, match="job 6"):
        tracker.register_copies(6, 1)
    with pytest.raises(UnknownJobError):
        tracker.job_state(6)


def test_initial_checkpoint_is_copied_and_fixes_signature_and_base(
    tracker: JobTracker, env
) -> None:
    init = tiny_net(3).state_dict()
    init["1.num_batches_tracked"] += 100
    src = env.root / "init.pt"
    sha = write_ckpt(src, init, model="IC", size="tiny")
    state = tracker.register_job(1, 30, initial_checkpoint=src, initial_sha256=sha)
    assert (state.model, state.size) == ("IC", "tiny")
    assert state.checkpoint.round is None and state.checkpoint.sha256 == sha
    assert (
        state.checkpoint.path.parent == env.ckpt / "job-1"
        and file_sha(state.checkpoint.path) == sha
    )
    cids = tracker.register_copies(1, 2)
    tracker.open_round(0)
    bad = dict(init)
    bad["3.weight"] = torch.zeros(3, 9)
    path = env.reports / "bad.pt"
    bad_sha = write_ckpt(path, bad)
    with pytest.raises(ParameterMismatchError, match=r"'3.weight' has shape \[3, 9\]"):
        tracker.report(0, cids[0], "n", 1, 1.0, path, bad_sha)
    _report(tracker, env, 0, cids[0], 2, init)
    _report(tracker, env, 0, cids[1], 3, init)
    res = tracker.close_round(0).jobs[1]
    assert int(_load(res.checkpoint.path)["state_dict"]["1.num_batches_tracked"]) == 105
    assert state.checkpoint.path.exists()  # the initial one is now the previous checkpoint (keep 2)


def test_first_report_fixes_model_size_and_signature(tracker: JobTracker, env) -> None:
    tracker.register_job(1, 30)
    cids = tracker.register_copies(1, 2)
    tracker.open_round(0)
    _report(tracker, env, 0, cids[0], 2, tiny_net(1).state_dict(), model="LM", size="small")
    assert (tracker.job_state(1).model, tracker.job_state(1).size) == ("LM", "small")
    with pytest.raises(ParameterMismatchError, match="model 'IC'"):
        _report(tracker, env, 0, cids[1], 2, tiny_net(1).state_dict(), model="IC", size="small")
    other = env.reports / "other.pt"
    sha = write_ckpt(other, {"w": torch.zeros(1)}, model="LM", size="small")
    with pytest.raises(ParameterMismatchError, match="missing key '0.weight'"):
        tracker.report(0, cids[1], "n", 1, 1.0, other, sha)


def test_optimizer_state_is_consolidated(tracker: JobTracker, env) -> None:
    tracker.register_job(1, 30)
    cids = tracker.register_copies(1, 2)
    tracker.open_round(0)
    opts = []
    for k, cid in enumerate(cids):
        net = tiny_net(1)
        opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
        net(torch.randn(5, 4, generator=torch.Generator().manual_seed(k))).sum().backward()
        opt.step()
        opts.append(opt.state_dict())
        path = env.reports / f"o{cid}.pt"
        tracker.report(
            0, cid, "n", 1 + 2 * k, 1.0, path, write_ckpt(path, net.state_dict(), opt.state_dict())
        )
    saved = _load(tracker.close_round(0).jobs[1].checkpoint.path)["optimizer"]
    m = [o["state"][0]["momentum_buffer"] for o in opts]
    assert torch.allclose(saved["state"][0]["momentum_buffer"], m[0] * 0.25 + m[1] * 0.75)


def test_keep_history_keeps_every_consolidated_checkpoint(env) -> None:
    t = env.open(keep_history=True, averaging="uniform")
    t.register_job(1, 30)
    cid = t.register_copies(1, 1)[0]
    refs = []
    for r in range(3):
        t.open_round(r)
        _report(t, env, r, cid, 2, tiny_net(1).state_dict())
        refs.append(t.close_round(r).jobs[1].checkpoint)
    assert all(file_sha(ref.path) == ref.sha256 for ref in refs)
    t.close()
    t = env.open()
    assert (t.keep_history, t.averaging) == (True, "uniform")
    assert all(ref.path.exists() for ref in refs)
    t.close()


def test_reopen_checks_settings_and_lock(env) -> None:
    t = env.open(max_job_count=10, averaging="steps")
    with pytest.raises(TrackerBusyError, match="open in another process"):
        env.open()
    t.close()
    with pytest.raises(TrackerConfigError, match="max_job_count is 10 in the database, not 20"):
        env.open(max_job_count=20)
    with pytest.raises(TrackerConfigError, match="averaging"):
        env.open(averaging="uniform")
    with pytest.raises(TrackerConfigError, match="not one of"):
        env.open(averaging="mean")
    with env.open() as t2:
        assert t2.max_job_count == 10


def test_open_removes_orphans_but_not_foreign_files(tracker: JobTracker, env) -> None:
    tracker.register_job(1, 30)
    cid = tracker.register_copies(1, 1)[0]
    tracker.open_round(0)
    _report(tracker, env, 0, cid, 2, tiny_net(1).state_dict())
    kept = tracker.close_round(0).jobs[1].checkpoint.path
    tracker.close()
    job_dir = env.ckpt / "job-1"
    orphan_tmp = job_dir / ".tmp-0123.pt"
    orphan = job_dir / f"round-000001-{'a' * 64}.pt"
    foreign = job_dir / "notes.txt"
    for f in (orphan_tmp, orphan, foreign):
        f.write_bytes(b"x")
    t = env.open()
    assert not orphan_tmp.exists() and not orphan.exists()
    assert foreign.exists() and kept.exists() and t.verify_checkpoints() == []
    t.close()


def test_close_round_rejects_a_report_file_changed_after_acceptance(
    tracker: JobTracker, env
) -> None:
    tracker.register_job(1, 50)
    cids = tracker.register_copies(1, 2)
    base = tiny_net(1).state_dict()
    tracker.open_round(0)
    _report(tracker, env, 0, cids[0], 3, base)
    kept = _report(tracker, env, 0, cids[1], 2, base)
    (env.reports / f"r0-c{cids[0]}.pt").write_bytes(b"overwritten")
    before = dump_db(env.db)
    with pytest.raises(CheckpointError, match=f"round 0 copy {cids[0]}: checkpoint .* has sha256"):
        tracker.close_round(0)
    assert dump_db(env.db) == before and tracker.current_round() == 0
    assert not (env.ckpt / "job-1").exists() or not any((env.ckpt / "job-1").iterdir())
    tracker.withdraw_report(0, cids[0])
    res = tracker.close_round(0).jobs[1]
    assert (res.copies, res.steps_added) == ((cids[1],), 2)
    saved = _load(res.checkpoint.path)["state_dict"]
    assert all(torch.equal(saved[k], kept[k]) for k in kept)
    with pytest.raises(RoundError, match="not the open round"):
        tracker.withdraw_report(0, cids[1])
