"""Comparisons, means, targets and the slot sweep from hand-made rows (ratio orientation, edge cases)."""

from __future__ import annotations

import pytest

from hadar.experiments.bounds import TtdBounds
from hadar.experiments.tables import (
    cluster_comparisons,
    mean_over_mixes,
    round_sweep,
    targets,
    with_bounds,
)


def _row(mix, policy, ttd, cru, jct, round_s=360.0, cluster="c"):
    return {
        "cluster": cluster,
        "mix": mix,
        "policy": policy,
        "round_s": round_s,
        "jobs": 2,
        "completed": 2,
        "ttd_s": ttd,
        "avg_jct_s": jct,
        "cru": cru,
    }


ROWS = [
    _row("M-5", "gavel", 1200.0, 0.6, 900.0),
    _row("M-5", "hadar", 1000.0, 0.75, 600.0),
    _row("M-5", "hadare", 500.0, 0.95, 400.0),
    _row("M-8", "gavel", 2000.0, 0.8, 1500.0),
    _row("M-8", "hadar", 2000.0, 0.8, 1000.0),
    _row("M-8", "hadare", 1500.0, 0.85, 1000.0),
]
BOUNDS = {
    ("c", "M-5"): TtdBounds(450.0, 800.0, 700.0),
    ("c", "M-8"): TtdBounds(1400.0, 1600.0, 900.0),
}


def test_ratios_favour_the_first_policy_when_above_one():
    comps = cluster_comparisons(ROWS, BOUNDS, "c", 360.0, ["M-5", "M-8"])
    m5 = comps[0]
    assert m5["ttd_hadar_vs_gavel"] == pytest.approx(1.2)  # Gavel / Hadar
    assert m5["cru_hadar_vs_gavel"] == pytest.approx(0.75 / 0.6)  # Hadar / Gavel
    assert m5["jct_hadar_vs_gavel"] == pytest.approx(1.5)
    assert m5["ttd_hadare_vs_hadar"] == pytest.approx(2.0)
    assert m5["ttd_hadare_vs_gavel"] == pytest.approx(2.4)
    assert m5["hadare_ttd_over_hadar"] == pytest.approx(0.5)
    assert m5["lb_fork_over_hadar_ttd"] == pytest.approx(0.45)
    assert m5["ttd_bound_vs_hadar"] == pytest.approx(1000 / 450)
    means = mean_over_mixes(comps, ["ttd_hadare_vs_hadar", "missing"])
    assert means["ttd_hadare_vs_hadar"] == pytest.approx((2.0 + 2000 / 1500) / 2)
    assert means["missing"] is None


def test_missing_policy_gives_no_ratio():
    comps = cluster_comparisons(
        [r for r in ROWS if r["policy"] != "gavel"], BOUNDS, "c", 360.0, ["M-5"]
    )
    assert comps[0]["ttd_hadar_vs_gavel"] is None and comps[0][
        "ttd_hadare_vs_hadar"
    ] == pytest.approx(2.0)


def test_targets_met_missed_and_achievable():
    comps = cluster_comparisons(ROWS, BOUNDS, "c", 360.0, ["M-5", "M-8"])
    got = {(t["mix"], t["target"].split()[1]): t for t in targets(comps)}
    assert got[("M-5", "CRU")]["met"] and not got[("M-8", "CRU")]["met"]
    assert got[("M-5", "TTD")]["met"] and got[("M-5", "TTD")]["achievable"]
    # M-8: HadarE 0.75 x Hadar; even the fork bound is 0.7 x Hadar, so 0.6 is out of reach
    assert not got[("M-8", "TTD")]["met"] and got[("M-8", "TTD")]["achievable"] is False
    assert got[("M-8", "TTD")]["best_possible"] == pytest.approx(0.7)


def test_bound_per_policy_and_ttd_over_bound():
    rows = {r["policy"]: r for r in with_bounds(ROWS, BOUNDS) if r["mix"] == "M-5"}
    assert (
        rows["hadare"]["lb_s"] == 450.0 and rows["hadar"]["lb_s"] == rows["gavel"]["lb_s"] == 800.0
    )
    assert rows["hadar"]["ttd_over_lb"] == pytest.approx(1.25)
    assert rows["hadare"]["lb_fastest_job_s"] == 700.0


def test_round_sweep_best_round_ties_go_to_the_shortest():
    rows = [_row("M-1", "hadar", 1.0, 0.2, 1.0, round_s=s) for s in (90.0, 180.0)]
    rows += [_row("M-1", "hadar", 1.0, 0.2 + 1e-9, 1.0, round_s=360.0)]
    rows += [
        _row("M-3", "hadar", 1.0, c, 1.0, round_s=s)
        for s, c in ((90.0, 0.5), (180.0, 0.7), (360.0, 0.6))
    ]
    sweep = round_sweep(rows, "c", "hadar", ["M-1", "M-3"], [90.0, 180.0, 360.0])
    assert sweep[0]["best_round_s"] == 90.0
    assert sweep[1]["best_round_s"] == 180.0 and sweep[1]["cru"][360.0] == 0.6
