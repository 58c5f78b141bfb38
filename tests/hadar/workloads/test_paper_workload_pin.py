"""Hadar's decisions on the paper workload are pinned: speed-ups of the round must leave them
unchanged (README: philly-480, seed 0, TTD 22.51 h, average JCT 2.39 h). A deliberate change of
decisions updates these figures, the README and docs/results.md together."""

from __future__ import annotations

import pytest

from hadar import api


def test_hadar_on_philly_480_seed_0_makes_the_published_decisions():
    s = api.simulate("sim-60gpu", "philly-480", "hadar", seed=0).summary
    assert s["completed"] == 480 and s["rounds"] == 226
    assert s["ttd_s"] == pytest.approx(81031.42141441058, rel=1e-9)
    assert s["avg_jct_s"] == pytest.approx(8600.56160414768, rel=1e-9)
    assert s["median_jct_s"] == pytest.approx(3962.8072257091544, rel=1e-9)
    assert s["restarts_per_job"] == pytest.approx(1.96875)  # 945 restarts
