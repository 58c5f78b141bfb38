"""Summary metrics on hand-checked records: finish-time fairness (Themis's rho), work efficiency."""

from __future__ import annotations

import pytest

from hadar.simulator.metrics import finish_time_fairness, summarize
from hadar.simulator.records import JobRecord, RoundRecord, SimulationResult


def _job(i, w, arrival, finish, steps, share_rate, best_rate=None):
    return JobRecord(
        i,
        "t",
        w,
        arrival,
        arrival,
        finish,
        0,
        total_steps=steps,
        best_rate=best_rate,
        equal_share_rate=share_rate,
    )


JOBS = (
    # active jobs: [0,100) A,B; [100,200) B,C; [200,300) B
    _job(
        0, 1, 0.0, 100.0, 100.0, 2.0, best_rate=2.0
    ),  # n = 2, 1/2 of 4 GPUs >= W: 50 s fair -> rho 2
    _job(1, 4, 0.0, 300.0, 600.0, 4.0, best_rate=4.0),  # n = 5/3, share 0.6: 250 s fair -> rho 1.2
    _job(2, 2, 100.0, 200.0, 200.0, 1.0, best_rate=2.0),  # n = 2, 2 GPUs = W: 200 s fair -> rho 0.5
)


def test_rho_by_hand():
    assert finish_time_fairness(JOBS, 4) == pytest.approx([2.0, 1.2, 0.5])


def test_summary_reports_rho_statistics_and_work_efficiency():
    rounds = (RoundRecord(0, 0.0, 300.0, 4, 1500.0, 300.0, 2, 450.0, 2, 0, 0.0),)
    result = SimulationResult("p", "c", 4, 2, JOBS, rounds, (), {})
    s = summarize(result)
    assert s["cru"] == pytest.approx(450.0 / (2 * 300.0))  # node-seconds over 2 nodes
    assert s["rho_mean"] == pytest.approx((2.0 + 1.2 + 0.5) / 3)
    assert s["rho_median"] == pytest.approx(1.2)
    assert s["rho_max"] == pytest.approx(2.0)
    assert s["rho_above_1"] == pytest.approx(2 / 3)
    # needed at best rates: 1*100/2 + 4*600/4 + 2*200/2 = 850 GPU-s, used 1500
    assert s["work_efficiency"] == pytest.approx(850 / 1500)
    assert s["avg_queueing_s"] == 0.0


def test_unfinished_jobs_are_left_out_of_rho():
    jobs = (*JOBS, JobRecord(9, "t", 1, 0.0, None, None, 0, total_steps=10.0, equal_share_rate=1.0))
    assert finish_time_fairness(jobs, 4) == pytest.approx([2.0, 1.2, 0.5])


def test_rounds_whose_decision_hit_a_time_limit_are_counted():
    rounds = tuple(
        RoundRecord(i, 300.0 * i, 300.0, 4, 1200.0, 300.0, 2, 600.0, 2, 0, 0.0, info)
        for i, info in enumerate(({"time_limit_hit": True}, {}, {"time_limit_hit": True}))
    )
    s = summarize(SimulationResult("p", "c", 4, 2, JOBS, rounds, (), {}))
    assert s["time_limited_rounds"] == 2
    calm = tuple(RoundRecord(0, 0.0, 300.0, 4, 1500.0, 300.0, 2, 450.0, 2, 0, 0.0) for _ in "x")
    assert (
        summarize(SimulationResult("p", "c", 4, 2, JOBS, calm, (), {}))["time_limited_rounds"] == 0
    )
