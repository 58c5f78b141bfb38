"""Every rejected report raises a one-line HadarError and leaves the SQLite rows and every file
(checkpoints, reports, database) exactly as they were, with no commit in between."""

from __future__ import annotations

import hashlib
import io
import math
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from tracker_testlib import dump_db, perturbed, snapshot_files, tiny_net, write_ckpt

from hadar.core.errors import HadarError
from tracker import JobTracker
from tracker.errors import (
    CheckpointError,
    CopyDiscardedError,
    DuplicateReportError,
    InvalidReportError,
    ParameterMismatchError,
    ReportRejected,
    StaleRoundError,
    UnknownCopyError,
)

JOB, DONE, FRESH = 1, 2, 3  # an active job, a completed job, a job registered with an initial ckpt


def _setup(env) -> tuple[JobTracker, dict[str, Path | str]]:
    """Round 0 closed (job 2 completed in it), round 1 open, copy 11 already reported in round 1."""
    t = env.open()
    base = tiny_net(1).state_dict()
    init = env.root / "init.pt"
    t.register_job(JOB, 100, model="IC", size="tiny")
    t.register_job(DONE, 5, model="IC", size="tiny")
    t.register_job(
        FRESH,
        100,
        initial_checkpoint=init,
        initial_sha256=write_ckpt(init, tiny_net(7).state_dict()),
    )
    for j in (JOB, DONE, FRESH):
        t.register_copies(j, 2)
    t.open_round(0)
    for cid, steps in ((11, 3), (21, 5)):
        p = env.reports / f"r0-{cid}.pt"
        t.report(0, cid, "a", steps, 1.0, p, write_ckpt(p, perturbed(base, cid, steps)))
    t.close_round(0)
    t.open_round(1)
    good = env.reports / "good.pt"
    sha = write_ckpt(good, perturbed(base, 5, 2))
    t.report(1, 11, "a", 2, 1.0, good, sha)
    return t, {"good": good, "sha": sha, "base": base}


def _bad_file(env, name: str, make: Callable[[dict], object]) -> Callable[[dict], tuple[Path, str]]:
    """A builder of a caller-owned checkpoint file (raw bytes or a hadar-ckpt-1 payload)."""

    def build(ctx: dict) -> tuple[Path, str]:
        path = env.reports / name
        obj = make(ctx)
        if isinstance(obj, bytes):
            path.write_bytes(obj)
            return path, hashlib.sha256(obj).hexdigest()
        return path, write_ckpt(path, **obj)

    return build


Args = Callable[[dict], dict]


def _cases(env) -> list[tuple[str, type[ReportRejected], str, Args]]:
    """(name, error, message, builder of report() kwargs; it creates any bad file it needs)."""

    def rep(round_=1, cid=12, steps=1, seconds=1.0, node="b", file=None, sha=None) -> Args:
        def args(ctx: dict) -> dict:
            path, digest = (ctx["good"], ctx["sha"]) if file is None else file(ctx)
            return {
                "round_": round_,
                "copy_id": cid,
                "node": node,
                "steps_done": steps,
                "seconds": seconds,
                "checkpoint_path": path,
                "sha256": sha or digest,
            }

        return args

    def with_sd(name: str, change: Callable[[dict], None], **extra):
        def make(ctx: dict) -> dict:
            sd = dict(ctx["base"])
            change(sd)
            return {"state_dict": sd, **extra}

        return _bad_file(env, name, make)

    return [
        ("unknown copy", UnknownCopyError, "copy 13 is not registered", rep(cid=13)),
        ("not a copy id", UnknownCopyError, "copy 10 is not registered", rep(cid=10)),
        ("completed job", CopyDiscardedError, "job 2 is complete", rep(cid=21)),
        ("closed round", StaleRoundError, "round 0 is closed; round 1 is open", rep(round_=0)),
        ("future round", StaleRoundError, "round 2 is not opened", rep(round_=2)),
        ("duplicate", DuplicateReportError, "already reported for round 1", rep(cid=11)),
        ("negative steps", InvalidReportError, "steps_done is negative", rep(steps=-1)),
        ("bool steps", InvalidReportError, "expected an integer", rep(steps=True)),
        ("float steps", InvalidReportError, "expected an integer", rep(steps=2.5)),
        (
            "negative seconds",
            InvalidReportError,
            "seconds must be finite and >= 0",
            rep(seconds=-0.1),
        ),
        ("nan seconds", InvalidReportError, "seconds must be finite", rep(seconds=math.nan)),
        ("empty node", InvalidReportError, "node must be a non-empty string", rep(node=" ")),
        ("bad sha", InvalidReportError, "not a sha256 hex digest", rep(sha="abc")),
        (
            "missing file",
            CheckpointError,
            "does not exist",
            rep(file=lambda ctx: (env.reports / "nope.pt", "0" * 64)),
        ),
        ("sha mismatch", CheckpointError, "has sha256", rep(sha="f" * 64)),
        (
            "corrupt file",
            CheckpointError,
            "cannot load checkpoint",
            rep(file=_bad_file(env, "junk.pt", lambda c: b"junk")),
        ),
        (
            "not hadar format",
            CheckpointError,
            "not in hadar-ckpt-1 format",
            rep(file=_bad_file(env, "raw.pt", lambda c: _torch_bytes(c["base"]))),
        ),
        (
            "missing key",
            ParameterMismatchError,
            "missing key '3.bias'",
            rep(file=with_sd("mk.pt", lambda sd: sd.pop("3.bias"))),
        ),
        (
            "extra key",
            ParameterMismatchError,
            "unexpected key 'x'",
            rep(file=with_sd("ek.pt", lambda sd: sd.update(x=torch.zeros(1)))),
        ),
        (
            "shape",
            ParameterMismatchError,
            r"'0.weight' has shape \[8, 5\], expected \[8, 4\]",
            rep(file=with_sd("sh.pt", lambda sd: sd.update({"0.weight": torch.zeros(8, 5)}))),
        ),
        (
            "dtype",
            ParameterMismatchError,
            "'0.bias' has dtype float64",
            rep(
                file=with_sd(
                    "dt.pt", lambda sd: sd.update({"0.bias": torch.zeros(8, dtype=torch.float64)})
                )
            ),
        ),
        (
            "model",
            ParameterMismatchError,
            "checkpoint is model 'LM', job 1 is 'IC'",
            rep(file=with_sd("md.pt", lambda sd: None, model="LM")),
        ),
        (
            "initial signature",
            ParameterMismatchError,
            r"job 3's model",
            rep(
                cid=31, file=with_sd("in.pt", lambda sd: sd.update({"3.weight": torch.zeros(2, 8)}))
            ),
        ),
    ]


def _torch_bytes(obj: object) -> bytes:
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


CASE_IDS = [c[0] for c in _cases(None)]


@pytest.mark.parametrize("case", CASE_IDS)
def test_rejection_leaves_state_and_files_unchanged(env, case: str) -> None:
    t, ctx = _setup(env)
    _, error, message, build = next(c for c in _cases(env) if c[0] == case)
    kwargs = build(ctx)  # the caller's (bad) file exists before the snapshot
    observer = sqlite3.connect(env.db)
    try:
        version = observer.execute("PRAGMA data_version").fetchone()[0]
        rows, files = dump_db(env.db), snapshot_files(env.root)
        state = (t.progress(), t.reports(1), [t.job_state(j) for j in (JOB, DONE, FRESH)])
        with pytest.raises(error, match=message) as err:
            t.report(**kwargs)
        assert isinstance(err.value, HadarError) and "\n" not in str(err.value)
        assert observer.execute("PRAGMA data_version").fetchone()[0] == version, (
            "something committed"
        )
        assert dump_db(env.db) == rows
        assert snapshot_files(env.root) == files
        assert (t.progress(), t.reports(1), [t.job_state(j) for j in (JOB, DONE, FRESH)]) == state
        # the tracker still works after the rejection, and the observer does see commits
        t.report(1, 12, "b", 1, 1.0, ctx["good"], ctx["sha"])
        assert observer.execute("PRAGMA data_version").fetchone()[0] != version
    finally:
        observer.close()
    assert t.close_round(1).jobs[JOB].steps_total == 3 + 2 + 1
    t.close()
