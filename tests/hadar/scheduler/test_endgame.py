"""Hadar's endgame (hadar/scheduler/endgame.py): once every job fits at once and the TTD bound is
within a few rounds, every job runs on the GPU type of the best round-by-round schedule, restarts
and mid-round finishes counted."""

from __future__ import annotations

import numpy as np
import pytest

from hadar.api import simulate
from hadar.scheduler.endgame import MAX_JOBS, MAX_ROUNDS, plan_rounds

# two GPU types, "fast" (type 0) twice as fast as "slow" (type 1) for both jobs; 10 s rounds,
# 1 s restart
RATES = np.array([[2.0, 1.0], [2.0, 1.0]])


def test_the_shorter_job_takes_the_one_fast_gpu_when_that_saves_a_restart():
    # A: 30 steps (15 s fast), B: 22 steps (11 s fast); neither finishes within a round.
    # Longest first (A fast, B slow): A 10 steps left, B 12; then B fast (1 + 6 s, done at 17)
    # while A on slow does 9 of its 10 and comes back to the fast GPU: 20 + 1 + 0.5 = 21.5.
    # B fast first: B 2 steps left, A 20; then A fast for the round (1 + 9 s: 18 steps, 2 left,
    # B done on slow at 10 + 1 + 2 = 13) and stays there: 20 + 1 = 21, one restart fewer.
    types, ttd, total = plan_rounds(
        RATES, [1, 1], [1, 1], [30.0, 22.0], [-1, -1], [False, False], 10.0, 1.0
    )
    assert types == [1, 0]
    assert ttd == pytest.approx(21.0)
    assert total == pytest.approx(13.0 + 21.0)


def test_a_job_stays_where_a_restart_would_finish_it_later():
    # 15 steps on the slow GPU it holds: 15 s there, 10 s restart + 7.5 s on the fast one
    types, ttd, _ = plan_rounds(RATES[:1], [1], [1, 1], [15.0], [1], [True], 10.0, 10.0)
    assert types == [1] and ttd == pytest.approx(15.0)


def test_the_search_gives_up_beyond_its_budget():
    args = (RATES, [1, 1], [1, 1], [30.0, 22.0], [-1, -1], [False, False], 10.0, 1.0)
    assert plan_rounds(*args, max_leaves=1) is None


def test_a_schedule_far_longer_than_the_endgame_gives_up_instead_of_recursing_without_end():
    # measured rates a thousandth of the estimate (a real run's 3 s rounds): 3,000 rounds to go,
    # which once ran out of Python's stack inside a coordinator
    slow = RATES / 1000.0
    args = (slow, [1, 1], [1, 1], [30.0, 22.0], [-1, -1], [False, False], 10.0, 1.0)
    assert plan_rounds(*args) is None
    # the same jobs within MAX_ROUNDS rounds are still planned
    within = plan_rounds(RATES / 8.0, *args[1:])
    assert within is not None and within[1] <= MAX_ROUNDS * 10.0


def test_more_jobs_than_the_search_takes_on_leave_the_guard_in_charge():
    def plan(n: int):  # n one-GPU jobs of 5 steps on n GPUs of one type: one round
        return plan_rounds(np.ones((n, 1)), [1] * n, [n], [5.0] * n, [-1] * n, [False] * n, 10, 1)

    assert plan(MAX_JOBS + 1) is None
    assert plan(MAX_JOBS) == ([0] * MAX_JOBS, 5.0, 5.0 * MAX_JOBS)


@pytest.mark.parametrize("mix", ["M-2", "M-7"])
def test_hadar_finishes_lab_m2_and_m7_no_later_than_gavel(mix):
    """The two mixes Hadar lost by 0.6 % and 0.3 % with the guard's longest-first rule."""
    hadar = simulate("lab-5node", mix, "hadar", round_s=360).summary["ttd_s"]
    gavel = simulate("lab-5node", mix, "gavel", round_s=360).summary["ttd_s"]
    assert hadar <= gavel + 1e-6


def test_a_remembered_plan_is_the_same_and_a_caller_cannot_change_it():
    args = (RATES, [1, 1], [1, 1], [30.0, 22.0], [-1, -1], [False, False], 10.0, 1.0)
    first = plan_rounds(*args)
    assert first is not None
    first[0][0] = 99  # the caller's list, not the remembered one
    assert plan_rounds(*args) == ([1, 0], first[1], first[2])
    # one GPU type fewer for job 1 is another search: the first plan is not reused
    other = plan_rounds(np.array([[2.0, 1.0], [0.0, 1.0]]), *args[1:])
    assert other is not None and other[0][1] == 1


def test_a_simulation_starts_with_no_search_remembered_from_an_earlier_one():
    # what one simulation measures (its decision times) owes nothing to an earlier one
    from hadar.scheduler.endgame import _plan_rounds

    simulate("lab-5node", "M-5", "hadar", round_s=180.0)
    assert _plan_rounds.cache_info().currsize > 0  # Hadar's endgame searched and remembered
    simulate("lab-5node", "M-1", "gavel")  # Gavel has no endgame: nothing is searched
    assert _plan_rounds.cache_info().currsize == 0
