"""``JobTracker.batch``: the reports of a round in one transaction (what the coordinator does each
round), with each report still all-or-nothing inside it."""

from __future__ import annotations

from pathlib import Path

import pytest
from tracker_testlib import tiny_net, write_ckpt

from tracker import JobTracker
from tracker.errors import DuplicateReportError


def _ckpt(env, name: str) -> tuple[Path, str]:
    path = env.reports / f"{name}.pt"
    return path, write_ckpt(path, tiny_net(0).state_dict())


def test_a_batch_commits_its_reports_together_and_a_rejected_one_changes_nothing(
    tracker: JobTracker, env
) -> None:
    tracker.register_job(1, 100, model="IC", size="tiny")
    tracker.register_copies(1, 2)
    tracker.open_round(0)
    a, b = _ckpt(env, "a"), _ckpt(env, "b")
    with tracker.batch():
        tracker.report(0, 11, "n1", 3, 1.0, *a)
        with pytest.raises(DuplicateReportError):
            tracker.report(0, 11, "n1", 3, 1.0, *a)  # rejected: the batch goes on
        tracker.report(0, 12, "n2", 2, 1.0, *b)
        reader = JobTracker.open_read_only(env.db, env.ckpt)  # `hadar report` beside the run
        try:
            assert reader.reports(0) == []  # nothing is committed before the batch ends
        finally:
            reader.close()
    assert [(r.copy_id, r.steps) for r in tracker.reports(0)] == [(11, 3), (12, 2)]
    assert tracker.close_round(0).jobs[1].steps_total == 5


def test_a_batch_that_fails_leaves_no_report_of_it(tracker: JobTracker, env) -> None:
    tracker.register_job(1, 100, model="IC", size="tiny")
    tracker.register_copies(1, 2)
    tracker.open_round(0)
    a = _ckpt(env, "a")
    with pytest.raises(RuntimeError, match="crash"), tracker.batch():
        tracker.report(0, 11, "n1", 3, 1.0, *a)
        raise RuntimeError("crash before the batch's commit")
    assert tracker.reports(0) == []
    tracker.report(0, 11, "n1", 3, 1.0, *a)  # the copy can still report
    tracker.close()
    reopened = env.open()  # what a restarted coordinator reads
    try:
        assert [r.copy_id for r in reopened.reports(0)] == [11]
    finally:
        reopened.close()
