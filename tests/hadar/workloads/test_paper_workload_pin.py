"""Hadar's decisions on the paper workload are pinned: speed-ups of the round must leave them
unchanged (README: philly-480, seed 0, TTD 22.49 h, average JCT 2.42 h). A deliberate change of
decisions updates these figures, the README and docs/results.md together (last: issue 27's tail
guard at p99, type matching and endgame as defaults)."""

from __future__ import annotations

import pytest

from hadar import api


def test_hadar_on_philly_480_seed_0_makes_the_published_decisions():
    s = api.simulate("sim-60gpu", "philly-480", "hadar", seed=0).summary
    assert s["completed"] == 480 and s["rounds"] == 225
    assert s["ttd_s"] == pytest.approx(80971.38084868918, rel=1e-9)
    assert s["avg_jct_s"] == pytest.approx(8701.753925471949, rel=1e-9)
    assert s["median_jct_s"] == pytest.approx(4153.576268484933, rel=1e-9)
    assert s["restarts_per_job"] == pytest.approx(2.9625)  # 1,422 restarts
