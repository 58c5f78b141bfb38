"""Refills on real nodes (``Assignment.after``): the round executor starts a refill when the copy
it follows has returned, with what is left of the round as its deadline, on that copy's GPUs; a
refill whose followed copy does not run, or that is left with under ``REFILL_MIN_S``, does not
run. The copies here return after a chosen time (the executor's seam for nodes,
``RoundExecutor.run_copy``); what a worker does with its deadline is tested in
``tests/nodes/test_worker.py``."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from hadar.core.jobs import Job
from hadar.policy import REFILL_MIN_S, Assignment
from hadar.runtime.dispatch import CopyOutcome, CopyTask
from hadar.runtime.round_executor import (
    RoundExecutor,
    _followed_runs,
    _refill_gpus,
    _runnable_refills,
)

A = {"a": {"v100": 2}}
A1 = {"a": {"v100": 1}}


def _task(job: int, copy: int, after: tuple[int, int] | None = None) -> CopyTask:
    return CopyTask(
        round=0,
        attempt=0,
        job=Job(job, "RS", 1, 100),
        copy=copy,
        tracker_copy=copy,
        placement=A1,
        steps=10,
        deadline_s=4.0,
        timeout_s=5.0,
        checkpoint_in=None,
        checkpoint_sha256=None,
        data_stream=1,
        threads=1,
        gpus={},
        devices={},
        after=after,
    )


def _executor(tmp_path: Path, round_s: float, busy: dict[int, float]) -> tuple[RoundExecutor, list]:
    """A round executor with only what dispatch uses; job ``j``'s copies take ``busy[j]`` s."""
    started: list[tuple[int, float, float, float]] = []  # (job, start, end, deadline_s)
    lock = threading.Lock()
    t0 = time.monotonic()

    def run_copy(task: CopyTask, local: Path) -> CopyOutcome:
        start = time.monotonic() - t0
        time.sleep(busy[task.job.job_id])
        with lock:
            started.append((task.job.job_id, start, time.monotonic() - t0, task.deadline_s))
        return CopyOutcome(task, "ok", steps_done=1, train_seconds=0.1, wall_seconds=0.1)

    executor = RoundExecutor.__new__(RoundExecutor)
    executor.cfg = SimpleNamespace(round_s=round_s, grace_s=1.0)  # type: ignore[assignment]
    executor.rundir = tmp_path
    executor.run_copy = run_copy
    return executor, started


def test_a_refill_starts_when_the_copy_it_follows_returns_with_the_rest_of_the_round(tmp_path):
    executor, log = _executor(tmp_path, round_s=4.0, busy={0: 0.6, 1: 0.1, 2: 0.1})
    tasks = [_task(1, 2, after=(0, 0)), _task(0, 0), _task(2, 1)]  # the refill listed first
    outcomes = executor.dispatch(tasks, 0, 0)
    assert sorted(o.task.job.job_id for o in outcomes) == [0, 1, 2]
    runs = {job: (start, end, deadline) for job, start, end, deadline in log}
    assert runs[1][0] >= runs[0][1] - 0.01  # after the followed copy returned, not before
    assert runs[2][0] < runs[0][1]  # the others did not wait
    assert runs[1][2] == pytest.approx(4.0 - runs[1][0], abs=0.1)  # what was left of the round
    assert runs[0][2] == 4.0


def test_a_refill_left_with_too_little_of_the_round_does_not_run(tmp_path):
    executor, log = _executor(tmp_path, round_s=0.5 + REFILL_MIN_S / 2, busy={0: 0.5, 1: 0.0})
    outcomes = executor.dispatch([_task(0, 0), _task(1, 1, after=(0, 0))], 0, 0)
    assert [o.task.job.job_id for o in outcomes] == [0]
    assert [job for job, *_ in log] == [0]


def test_refills_take_the_followed_copys_gpus_and_need_it_to_run():
    before = Assignment(0, A)
    one, two = Assignment(1, A1, copy=1, after=0), Assignment(2, A1, copy=1, after=0)
    gpus = {(0, 0): {"a": {"v100": (3, 5)}}}
    assert _refill_gpus([before, one, two], _followed_runs([before, one, two]), gpus) == {
        (1, 1): {"a": {"v100": (3,)}},
        (2, 1): {"a": {"v100": (5,)}},
    }
    # the followed run was withheld: its refills do not run either
    alone = [one, Assignment(3, A1)]
    assert _runnable_refills(alone, _followed_runs(alone)) == [Assignment(3, A1)]
    assert _runnable_refills([before, one], _followed_runs([before, one])) == [before, one]
