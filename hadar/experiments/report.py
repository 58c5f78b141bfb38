"""Printing (rich tables) and writing (CSV/JSON) the physical experiment's results."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from hadar.core import io
from hadar.experiments.grid import ROW_KEYS, GridSpec
from hadar.experiments.paper import (
    PAPER_AVERAGES,
    PAPER_CLUSTERS,
    PAPER_ROUND_FIGURES,
    TARGET_HADARE_CRU_MIN,
    TARGET_HADARE_TTD_RATIO_MAX,
    TARGET_MIXES,
    paper_best_round,
    paper_value,
)
from hadar.experiments.tables import COMPARISONS, RATIO_METRICS, Row
from hadar.policy import policy_title

CSV_KEYS = (
    *ROW_KEYS,
    "lb_fork_s",
    "lb_nofork_s",
    "lb_fastest_job_s",
    "lb_s",
    "ttd_over_lb",
    "estimated",
)
MEAN_KEYS = (
    *[f"{m}_{p}_vs_{r}" for p, r in COMPARISONS for m, _, _ in RATIO_METRICS],
    "hadare_ttd_over_hadar",
    "lb_fork_over_hadar_ttd",
    "ttd_bound_vs_hadar",
    "hadare_cru",
)


def estimated_text(pairs: Sequence[tuple[str, str]]) -> str:
    """``MM on k80, t4, v100; IC on t4`` (workload -> GPU types whose figure is estimated)."""
    by_model: dict[str, list[str]] = {}
    for model, gpu in pairs:
        by_model.setdefault(model, []).append(gpu)
    return "; ".join(f"{m} on {', '.join(sorted(g))}" for m, g in sorted(by_model.items()))


def _s(v: float | None) -> str:
    return "-" if v is None else f"{v:,.0f}"


def _x(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}x"


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}"


# -- printing ----------------------------------------------------------------------------------
def print_cluster(
    console: Console,
    cluster: str,
    round_s: float,
    rows: Sequence[Row],
    comparisons: Sequence[Row],
    means: Mapping[str, float | None],
    targets: Sequence[Row],
    estimated: Sequence[tuple[str, str]],
) -> None:
    """The per-cluster block at the main round: per mix and policy, ratios per mix with means and the
    paper's figures, the targets, and which throughputs were estimated."""
    mine = [r for r in rows if r["cluster"] == cluster and float(r["round_s"]) == round_s]
    t = Table(
        title=f"{cluster}, round {round_s:g} s: per mix and policy (bound = lower bound on TTD for the policy)"
    )
    for col in (
        "mix",
        "policy",
        "CRU",
        "TTD (s)",
        "TTD bound (s)",
        "TTD / bound",
        "avg JCT (s)",
        "min-max JCT (s)",
        "p99 JCT (s)",
        "max rho",
        "restarts/job",
    ):
        t.add_column(col, justify="left" if col in ("mix", "policy") else "right")
    mixes = list(dict.fromkeys(r["mix"] for r in mine))
    for m in mixes:
        group = [r for r in mine if r["mix"] == m]
        for i, r in enumerate(group):
            done = "" if r["completed"] == r["jobs"] else f" ({r['completed']}/{r['jobs']} done)"
            t.add_row(
                m if i == 0 else "",
                policy_title(str(r["policy"])) + done,
                _pct(r["cru"]),
                _s(r["ttd_s"]),
                _s(r["lb_s"]),
                _x(r["ttd_over_lb"]),
                _s(r["avg_jct_s"]),
                f"{_s(r['min_jct_s'])}-{_s(r['max_jct_s'])}",
                _s(r.get("p99_jct_s")),
                _x(r.get("rho_max")).removesuffix("x"),
                f"{r['restarts_per_job']:.2f}",
                end_section=i == len(group) - 1,
            )
    console.print(t)

    ratios = Table(
        title=f"{cluster}, round {round_s:g} s: ratios per mix (TTD/JCT: speed-up = reference / policy; "
        f"CRU: gain = policy / reference; > 1 favours the first policy)"
    )
    ratios.add_column("mix")
    for p, ref in COMPARISONS:
        for m, _, _ in RATIO_METRICS:
            ratios.add_column(
                f"{m.upper()} {policy_title(p)}\nvs {policy_title(ref)}", justify="right"
            )
    ratios.add_column(
        f"HadarE TTD /\nHadar TTD\n(target <= {TARGET_HADARE_TTD_RATIO_MAX})", justify="right"
    )
    ratios.add_column(
        "best possible\nTTD speed-up vs\nHadar (Hadar TTD\n/ fork bound)", justify="right"
    )
    ratio_keys = [f"{m}_{p}_vs_{ref}" for p, ref in COMPARISONS for m, _, _ in RATIO_METRICS]
    for c in comparisons:
        ratios.add_row(
            c["mix"],
            *[_x(c[k]) for k in ratio_keys],
            _pct(c["hadare_ttd_over_hadar"]),
            _x(c["ttd_bound_vs_hadar"]),
            end_section=c is comparisons[-1],
        )
    ratios.add_row(
        f"mean ({len(comparisons)} mixes)",
        *[_x(means.get(k)) for k in ratio_keys],
        _pct(means.get("hadare_ttd_over_hadar")),
        _x(means.get("ttd_bound_vs_hadar")),
    )
    if cluster in PAPER_CLUSTERS:
        ratios.add_row(
            "paper (mean)",
            *[_x(paper_value(k, cluster)) for k in ratio_keys],
            f"{1 / PAPER_AVERAGES['ttd_hadare_vs_hadar'][PAPER_CLUSTERS[cluster]]:.3f}",
            "",
        )
    console.print(ratios)

    if targets:
        tt = Table(title=f"{cluster}, round {round_s:g} s: targets on {', '.join(TARGET_MIXES)}")
        tt.add_column("target")
        target_mixes = list(dict.fromkeys(x["mix"] for x in targets))
        for m in target_mixes:
            tt.add_column(m, justify="right")
        tt.add_column("met")
        for name in dict.fromkeys(x["target"] for x in targets):
            cells = {x["mix"]: x for x in targets if x["target"] == name}
            out = []
            for m in target_mixes:
                x = cells.get(m)
                if x is None:
                    out.append("-")
                    continue
                text = f"{x['value']:.3f} {'ok' if x['met'] else 'MISSED'}"
                if not x["met"] and x.get("best_possible") is not None:
                    text += f" (bound {x['best_possible']:.3f})"
                out.append(text)
            met = sum(1 for x in cells.values() if x["met"])
            tt.add_row(name, *out, f"{met}/{len(cells)}")
        console.print(tt)
    console.print(
        f"[bold]{cluster}[/]: throughputs [bold]estimated[/] (PMI/PCIe cold-start estimate, Eq. 10) "
        f"rather than measured: {estimated_text(estimated) or 'none (all measured)'}"
    )


def print_round_sweep(
    console: Console, cluster: str, sweeps: Mapping[str, Sequence[Row]], rounds_s: Sequence[float]
) -> None:
    """Fig. 11/12 as numbers: CRU per round length per mix for each policy, the best vs the paper's."""
    t = Table(
        title=f"{cluster}: CRU per round length (Fig. 11: HadarE, Fig. 12: Hadar)",
        caption="best = round length with the highest CRU (the paper's in brackets)",
    )
    t.add_column("mix")
    for policy in sweeps:
        for s in rounds_s:
            t.add_column(f"{policy_title(policy)}\n{s:g} s", justify="right")
        t.add_column(f"{policy_title(policy)}\nbest (paper)", justify="right")
    mixes = [x["mix"] for x in next(iter(sweeps.values()))]
    for i, m in enumerate(mixes):
        cells = [m]
        for policy, rows in sweeps.items():
            x = rows[i]
            cells += [_pct(x["cru"][s]) for s in rounds_s]
            paper = paper_best_round(policy, cluster, m)
            best = "-" if x["best_round_s"] is None else f"{x['best_round_s']:g}"
            cells.append(best + (f" ({paper})" if paper else ""))
        t.add_row(*cells)
    console.print(t)


# -- files -------------------------------------------------------------------------------------
TABLE_FILES = ("results.csv", "results.json")
"""What :func:`write_csv` and :func:`write_json` write."""
MIX_FIGURES = ("fig8_cru.png", "fig9_ttd.png", "fig10_jct.png")
"""Fig. 8-10 at the main round (:func:`hadar.experiments.figures.draw`; it draws Fig. 11/12,
:data:`~hadar.experiments.paper.PAPER_ROUND_FIGURES`, for the policies of the grid)."""


def result_names(policies: Sequence[str], figures: bool) -> list[str]:
    """Every file one ``hadar experiment physical`` of ``policies`` writes: the tables, and the
    figures when ``figures``. They are replaced together (:func:`hadar.core.io.replaced_together`)."""
    if not figures:
        return list(TABLE_FILES)
    swept = [name for policy, name in PAPER_ROUND_FIGURES.items() if policy in policies]
    return [*TABLE_FILES, *MIX_FIGURES, *swept]


def write_csv(path: Path, rows: Sequence[Row]) -> Path:
    return io.write_csv(path, rows, CSV_KEYS)


def write_json(
    path: Path,
    spec: GridSpec,
    rows: Sequence[Row],
    summary: Mapping[str, Any],
    meta: Mapping[str, Any],
) -> Path:
    doc = {
        "experiment": "physical",
        "grid": {
            "clusters": list(spec.clusters),
            "mixes": list(spec.mixes),
            "policies": list(spec.policies),
            "rounds_s": list(spec.rounds_s),
            "main_round_s": spec.main_round_s,
            "restart_penalty_s": spec.restart_penalty_s,
            "policy_options": {p: dict(o) for p, o in spec.options},
        },
        **meta,
        "paper": {
            "averages": PAPER_AVERAGES,
            "targets": {
                "mixes": list(TARGET_MIXES),
                "hadare_cru_min": TARGET_HADARE_CRU_MIN,
                "hadare_ttd_ratio_max": TARGET_HADARE_TTD_RATIO_MAX,
            },
        },
        **summary,
        "cells": list(rows),
    }
    return io.write_json(path, doc)
