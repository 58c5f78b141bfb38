"""The coordinator SIGKILLed at seeded random moments of a HadarE run, resumed each time: every
training step is counted exactly once.

``HADAR_FAULT_KILLS`` (default 3, about 1.5 minutes on 2 cores) and ``HADAR_FAULT_SEED`` (default 0)
set the campaign; ``HADAR_FAULT_KILLS=20`` is the campaign of docs/results.md's crash table.
"""

from __future__ import annotations

import os

import pytest

from tests.e2e.runlib import summary
from tests.faults.campaign import (
    BASE_STEPS,
    REFERENCE_RATE,
    reported_by_attempt,
    run_campaign,
    scaled_steps,
)

KILLS = int(os.environ.get("HADAR_FAULT_KILLS", "3"))
SEED = int(os.environ.get("HADAR_FAULT_SEED", "0"))


@pytest.mark.slow
def test_sigkilled_coordinator_resumes_with_no_step_lost_or_counted_twice(tmp_path):
    figures = run_campaign(tmp_path, kills=KILLS, seed=SEED)
    (run,) = figures.runs
    out = tmp_path / "run-0" / "run"
    assert len(run.kills) == KILLS and run.lives == KILLS + 1
    assert run.completed and summary(out)["completed"] == len(run.targets)
    # the tracker, the final consolidated checkpoints (sha256-verified) and the workers' committed
    # reports agree exactly, round by round and in total
    assert run.tracker_steps == run.targets
    assert run.checkpoint_steps == run.targets
    assert run.reported_steps == run.targets
    assert run.steps_lost == 0 and run.steps_double_counted == 0 and run.round_mismatches == 0
    table = figures.table()
    assert (
        table["faults injected (coordinator SIGKILLs)"] == KILLS
        and table["runs completed"] == "1/1"
    )


def test_reports_belong_to_the_latest_attempt_of_their_round():
    log = [
        {"event": "dispatch", "round": 0, "attempt": 0, "job": 0},
        {"event": "result", "round": 0, "job": 0, "steps": 40},
        {"event": "aborted", "round": 0, "attempt": 0},
        {"event": "dispatch", "round": 0, "attempt": 1, "job": 0},
        {"event": "dispatch", "round": 0, "attempt": 1, "job": 1},
        {"event": "result", "round": 0, "job": 0, "steps": 30},
        {"event": "result", "round": 0, "job": 0, "steps": 5},
        {"event": "result", "round": 0, "job": 1, "steps": 7},
    ]
    assert reported_by_attempt(log) == {(0, 0): {0: 40}, (0, 1): {0: 35, 1: 7}}


def test_the_jobs_grow_with_the_kills_and_a_faster_machine_only():
    """Every kill must land before the run ends: a machine that trains twice as fast as the one
    the jobs were sized on gets jobs twice as long; a slower one keeps them."""
    assert scaled_steps(3, REFERENCE_RATE / 2) == scaled_steps(3) == BASE_STEPS
    assert scaled_steps(3, 2 * REFERENCE_RATE) == {n: 2 * s for n, s in BASE_STEPS.items()}
    assert scaled_steps(4) == {n: 2 * s for n, s in BASE_STEPS.items()}
    assert scaled_steps(4, 1.5 * REFERENCE_RATE) == {n: 3 * s for n, s in BASE_STEPS.items()}
