"""From cell rows to the experiment's tables: per-mix comparisons, means over mixes, targets and
the slot sweep (pure functions of the rows and the bounds)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from statistics import fmean
from typing import Any

from hadar.experiments.bounds import TtdBounds
from hadar.experiments.paper import (
    PAPER_COMPARISONS,
    PAPER_POLICIES,
    TARGET_HADARE_CRU_MIN,
    TARGET_HADARE_TTD_RATIO_MAX,
    TARGET_MIXES,
    TARGET_PAIR,
)
from hadar.policy import find_policy_info

Row = dict[str, Any]
Key = tuple[str, str, str, float]

COMPARISONS = PAPER_COMPARISONS
"""(policy, reference) pairs whose ratios are reported."""

RATIO_METRICS = (("ttd", "ttd_s", False), ("cru", "cru", True), ("jct", "avg_jct_s", False))
"""(prefix, row key, higher is better). Ratios are oriented so that > 1 favours the policy:
``ref / policy`` for TTD and JCT (a speed-up), ``policy / ref`` for CRU (a gain)."""

LB_KEYS = ("lb_fork_s", "lb_nofork_s", "lb_fastest_job_s")


def ratio_keys() -> list[str]:
    return [f"{m}_{p}_vs_{r}" for p, r in COMPARISONS for m, _, _ in RATIO_METRICS]


def index(rows: Iterable[Row]) -> dict[Key, Row]:
    return {(r["cluster"], r["mix"], r["policy"], float(r["round_s"])): r for r in rows}


def with_bounds(rows: Iterable[Row], bounds: Mapping[tuple[str, str], TtdBounds]) -> list[Row]:
    """Rows plus the (cluster, mix)'s bounds, the one that applies to the row's policy (``lb_s``:
    the fork bound for forking policies, else the no-fork bound) and ``ttd_over_lb``."""
    out = []
    for r in rows:
        b = bounds.get((r["cluster"], r["mix"]))
        row = dict(r)
        row["lb_fork_s"] = b.fork_s if b else None
        row["lb_nofork_s"] = b.nofork_s if b else None
        row["lb_fastest_job_s"] = b.fastest_job_s if b else None
        lb = b.for_policy(_forking(r["policy"])) if b else None
        row["lb_s"] = lb
        row["ttd_over_lb"] = (r["ttd_s"] / lb) if lb and r["completed"] == r["jobs"] else None
        out.append(row)
    return out


def _forking(policy: str) -> bool:
    """Whether ``policy`` runs copies of one job at once (its TTD bound is the fork bound)."""
    info = find_policy_info(policy)
    return info is not None and info.forking


def _ratio(value: float | None, ref: float | None, higher_better: bool) -> float | None:
    if value is None or ref is None or value <= 0 or ref <= 0:
        return None
    return value / ref if higher_better else ref / value


def mix_comparison(
    idx: Mapping[Key, Row], cluster: str, mix: str, round_s: float, bounds: TtdBounds | None
) -> Row:
    """One mix on one cluster at one slot: every ratio of :func:`ratio_keys`, HadarE's TTD as a
    fraction of Hadar's and its CRU (the issue's targets), and the TTD bounds; also
    ``lb_fork_over_hadar_ttd``, the smallest fraction of Hadar's TTD any schedule can reach, and its
    inverse ``ttd_bound_vs_hadar``, the largest TTD speed-up over Hadar any schedule can reach."""
    out: Row = {"cluster": cluster, "mix": mix, "round_s": round_s}
    get = {p: idx.get((cluster, mix, p, round_s)) for p in PAPER_POLICIES}
    for pol, ref in COMPARISONS:
        for prefix, key, higher in RATIO_METRICS:
            a, b = get[pol], get[ref]
            out[f"{prefix}_{pol}_vs_{ref}"] = _ratio(a[key], b[key], higher) if a and b else None
    hadare, hadar = (get[p] for p in TARGET_PAIR)
    out["hadare_ttd_over_hadar"] = (hadare["ttd_s"] / hadar["ttd_s"]) if hadar and hadare else None
    out["hadare_cru"] = hadare["cru"] if hadare else None
    for k in LB_KEYS:
        out[k] = getattr(bounds, k.removeprefix("lb_")) if bounds else None
    out["lb_fork_over_hadar_ttd"] = (
        (out["lb_fork_s"] / hadar["ttd_s"]) if hadar and out["lb_fork_s"] else None
    )
    out["ttd_bound_vs_hadar"] = (
        (hadar["ttd_s"] / out["lb_fork_s"]) if hadar and out["lb_fork_s"] else None
    )
    return out


def cluster_comparisons(
    rows: Iterable[Row],
    bounds: Mapping[tuple[str, str], TtdBounds],
    cluster: str,
    round_s: float,
    mixes: Sequence[str],
) -> list[Row]:
    idx = index(rows)
    return [mix_comparison(idx, cluster, m, round_s, bounds.get((cluster, m))) for m in mixes]


def mean_over_mixes(comparisons: Sequence[Row], keys: Iterable[str]) -> dict[str, float | None]:
    """Arithmetic mean over mixes of each per-mix value (the paper averages per-mix ratios)."""
    out: dict[str, float | None] = {}
    for k in keys:
        vals = [c[k] for c in comparisons if c.get(k) is not None]
        out[k] = fmean(vals) if vals else None
    return out


def targets(comparisons: Sequence[Row]) -> list[Row]:
    """The issue's two HadarE targets on each of M-5 ... M-12 present: value, met, and whether
    any schedule could meet it (TTD: only if the fork bound is <= 0.6 x Hadar's TTD)."""
    out = []
    for c in comparisons:
        if c["mix"] not in TARGET_MIXES:
            continue
        if c["hadare_cru"] is not None:
            out.append(
                {
                    "cluster": c["cluster"],
                    "mix": c["mix"],
                    "target": f"HadarE CRU >= {TARGET_HADARE_CRU_MIN}",
                    "value": c["hadare_cru"],
                    "met": c["hadare_cru"] >= TARGET_HADARE_CRU_MIN,
                    "achievable": True,
                }
            )
        r = c["hadare_ttd_over_hadar"]
        if r is not None:
            lb = c["lb_fork_over_hadar_ttd"]
            out.append(
                {
                    "cluster": c["cluster"],
                    "mix": c["mix"],
                    "target": f"HadarE TTD <= {TARGET_HADARE_TTD_RATIO_MAX} x Hadar",
                    "value": r,
                    "met": r <= TARGET_HADARE_TTD_RATIO_MAX,
                    "achievable": None if lb is None else lb <= TARGET_HADARE_TTD_RATIO_MAX,
                    "best_possible": lb,
                }
            )
    return out


def round_sweep(
    rows: Iterable[Row], cluster: str, policy: str, mixes: Sequence[str], rounds_s: Sequence[float]
) -> list[Row]:
    """Per mix: CRU and TTD at each slot time, and the slot with the highest CRU (Fig. 11/12)."""
    idx = index(rows)
    out = []
    for m in mixes:
        cells = {s: idx.get((cluster, m, policy, float(s))) for s in rounds_s}
        cru = {s: (r["cru"] if r else None) for s, r in cells.items()}
        ttd = {s: (r["ttd_s"] if r else None) for s, r in cells.items()}
        known = {s: c for s, c in cru.items() if c is not None}
        best = (
            max(known, key=lambda s: (round(known[s], 4), -s)) if known else None
        )  # ties: shortest slot
        out.append(
            {
                "cluster": cluster,
                "policy": policy,
                "mix": m,
                "cru": cru,
                "ttd_s": ttd,
                "best_round_s": best,
            }
        )
    return out
