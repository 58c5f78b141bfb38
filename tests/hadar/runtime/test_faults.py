"""The pure decisions behind a run that cannot go on (hadar/runtime/faults.py): which jobs and
(job, nodes) pairs made no progress for N rounds, the likely cause, and resource errors as one
line. Inputs are round records in the journal's own format."""

from __future__ import annotations

import errno
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from hadar.runtime.faults import (
    likely_cause,
    node_resource_error,
    repeated_failures,
    resource_error,
    run_stalled,
    stalled_jobs,
)


def copy(
    job: int,
    node: str,
    kind: str = "ok",
    steps: int = 10,
    error: str | None = None,
    nodes: tuple[str, ...] | None = None,
) -> dict[str, Any]:
    placement = {n: {"cpu": 1} for n in (nodes or (node,))}
    return {
        "job": job,
        "copy": 1,
        "node": node,
        "placement": placement,
        "kind": kind,
        "steps": steps if kind == "ok" else 0,
        "error": error,
    }


def fail(
    job: int, node: str, kind: str = "worker-error", error: str = "boom", **kw: Any
) -> dict[str, Any]:
    return copy(job, node, kind, error=error, **kw)


# --- one copy failing the same way round after round ---------------------------------------


def test_a_copy_failing_the_same_way_n_rounds_in_a_row_is_reported_while_its_job_progresses():
    rounds = [[copy(0, "a"), fail(0, "b")] for _ in range(3)]
    assert stalled_jobs(rounds, 3) == {}  # the job progresses on node a
    got = repeated_failures(rounds, 3)
    assert list(got) == [(0, ("b",))]
    assert [c["kind"] for c in got[(0, ("b",))]] == ["worker-error"] * 3
    assert repeated_failures(rounds, 4) == {}  # only three rounds so far


def test_a_success_or_a_different_failure_resets_the_streak():
    ok_between = [[fail(0, "b")], [copy(0, "b")], [fail(0, "b")], [fail(0, "b")]]
    assert repeated_failures(ok_between, 3) == {}
    other_kind = [[fail(0, "b", "timeout")], [fail(0, "b")], [fail(0, "b")]]
    assert repeated_failures(other_kind, 3) == {}
    assert list(repeated_failures(other_kind, 2)) == [(0, ("b",))]


def test_rounds_without_the_pair_neither_count_nor_reset_and_gangs_are_keyed_by_all_their_nodes():
    rounds = [
        [fail(0, "a", nodes=("a", "b"))],
        [copy(1, "a")],
        [fail(0, "a", nodes=("a", "b"))],
        [fail(0, "a")],
        [fail(0, "a", nodes=("a", "b"))],
    ]
    got = repeated_failures(rounds, 3)
    assert list(got) == [(0, ("a", "b"))]  # job 0 alone on a failed once only


def test_withheld_copies_do_not_extend_or_reset_a_failure_streak():
    rounds = [[fail(0, "b")], [fail(0, "b")], [copy(0, "b", "withheld", error="held")]]
    assert list(repeated_failures(rounds, 2)) == [(0, ("b",))]
    assert repeated_failures(rounds, 3) == {}


def test_a_job_whose_copies_are_all_withheld_stalls_and_the_cause_says_so():
    rounds = [
        [copy(0, "b", "withheld", error="job 0 failed on b (worker-error) 2 rounds in a row: x")]
    ] * 2
    stuck = stalled_jobs(rounds, 2)
    assert list(stuck) == [0]
    cause = likely_cause(stuck[0], 5.0, True)
    assert cause.startswith("every placement the policy chose had failed the same way")
    assert run_stalled(rounds, 2) is not None


# --- jobs and runs without progress ------------------------------------------------------------


def test_stalled_jobs_ignores_rounds_without_the_job_and_needs_n_rounds():
    rounds = [[fail(1, "a")], [copy(0, "a")], [fail(1, "a")], [copy(0, "b")]]
    assert list(stalled_jobs(rounds, 2)) == [1]
    assert stalled_jobs(rounds, 3) == {}
    assert stalled_jobs([[copy(1, "a", steps=0)], [copy(1, "a", steps=0)]], 2)  # ok but 0 steps


def test_run_stalled_only_counts_rounds_that_dispatched_something():
    idle: list[list[dict[str, Any]]] = [[]]
    rounds = [[copy(0, "a")], [fail(0, "a")], *idle, [fail(0, "a")]]
    assert run_stalled(rounds, 2) is not None
    assert run_stalled(rounds, 3) is None


@pytest.mark.parametrize(
    ("copies", "expected"),
    [
        ([copy(0, "a", steps=0)] * 2, "slot shorter than worker start-up and the checkpoint save"),
        (
            [fail(0, "a", "corrupt-checkpoint", "not a readable checkpoint")],
            "unreadable or mismatched checkpoint",
        ),
        ([fail(0, "a", "worker-error", "unknown model 'ZZ'")], "failing job spec or worker"),
        ([fail(0, "a", "timeout", "no result in 30 s")], "copies hung past the slot"),
        ([fail(0, "a", "unreachable", "refused")], "nodes unreachable or transfers failing"),
    ],
)
def test_likely_cause_names_the_reason(copies, expected):
    assert likely_cause(copies, 1.0, warm=False).startswith(expected)


def test_a_long_last_error_keeps_its_start_and_its_end():
    # a worker's error naming a long path: the file it is about is at the end
    path = "/" + "/".join(["deeper-temporary-folder"] * 12) + "/no-such-dataset"
    error = f"node v100: worker exited 2: hadar-worker: error: data: path does not exist: {path}"
    cause = likely_cause([fail(1, "a", "worker-error", error)], 1.0, warm=True)
    last = cause.partition(" (last error: ")[2].removesuffix(")")
    assert len(error) > 200 and len(last) == 200, last
    assert last.startswith("node v100: worker exited 2: hadar-worker: error: data: path does")
    assert last.endswith("/deeper-temporary-folder/no-such-dataset") and "..." in last
    short = "node v100: worker exited 2: unknown model 'ZZ'"
    assert likely_cause([fail(1, "a", "worker-error", short)], 1.0, True).endswith(
        f"(last error: {short})"
    )


def test_the_cold_worker_hint_is_given_only_with_cold_workers():
    copies = [copy(0, "a", steps=0)]
    assert "--cold-workers" in likely_cause(copies, 1.0, warm=False)
    assert "--cold-workers" not in likely_cause(copies, 1.0, warm=True)


# --- resource errors ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "words"),
    [
        (errno.ENOSPC, "no space left on device"),
        (errno.EROFS, "read-only file system"),
        (errno.EACCES, "permission denied"),
    ],
)
def test_resource_errors_are_one_line_naming_the_path_and_the_fix(tmp_path: Path, code, words):
    err = resource_error(OSError(code, "x", str(tmp_path / "checkpoints" / "a.pt")), tmp_path)
    assert err is not None and err.exit_code == 5
    line = str(err)
    assert "\n" not in line and line.startswith(f"{tmp_path / 'checkpoints' / 'a.pt'}: {words}")
    assert f"hadar run --resume {tmp_path}" in line


def test_sqlite_full_names_the_database_and_other_errors_are_not_resource_errors(tmp_path: Path):
    db = tmp_path / "tracker.sqlite"
    err = resource_error(sqlite3.OperationalError("database or disk is full"), tmp_path, [db])
    assert err is not None and str(err).startswith(f"{db}: no space left on device")
    assert resource_error(sqlite3.OperationalError("no such table: x"), tmp_path, [db]) is None
    assert resource_error(OSError(errno.ENOENT, "gone"), tmp_path) is None


def test_a_node_reporting_a_full_work_directory_is_a_resource_error(tmp_path: Path):
    copies = [
        copy(0, "a"),
        fail(1, "b", error="OSError: [Errno 28] No space left on device: 'out.pt'"),
    ]
    err = node_resource_error(copies, lambda n: f"/work/{n}", tmp_path)
    assert err is not None and str(err).startswith("node b: /work/b: no space left on device")
    assert node_resource_error([fail(1, "b", error="boom")], lambda n: n, tmp_path) is None
