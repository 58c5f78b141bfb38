"""Fig. 8-12 of the paper from the grid's rows (data shaping only; drawing is hadar.plots.physical)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from hadar.experiments.bounds import TtdBounds
from hadar.experiments.paper import PAPER_ROUND_FIGURES
from hadar.experiments.report import MIX_FIGURES
from hadar.plots import physical


def _panels(
    rows: Sequence[dict[str, Any]],
    clusters: Sequence[str],
    mixes: Sequence[str],
    round_s: float,
    value: Callable[[dict[str, Any]], Any],
) -> dict[str, dict[str, dict[str, Any]]]:
    out: dict[str, dict[str, dict[str, Any]]] = {c: {m: {} for m in mixes} for c in clusters}
    for r in rows:
        if float(r["round_s"]) == round_s and r["cluster"] in out and r["mix"] in out[r["cluster"]]:
            out[r["cluster"]][r["mix"]][r["policy"]] = value(r)
    return out


def draw(
    rows: Sequence[dict[str, Any]],
    bounds: Mapping[tuple[str, str], TtdBounds],
    clusters: Sequence[str],
    mixes: Sequence[str],
    rounds_s: Sequence[float],
    main_round_s: float,
    out: Path,
) -> list[Path]:
    """Write Fig. 8, 9, 10 at ``main_round_s`` and Fig. 11/12 (HadarE/Hadar CRU per slot) into ``out``."""
    at = f" (round {main_round_s:g} s)"
    marks = {
        c: {
            m: {"lower bound (forking)": b.fork_s, "lower bound (no forking)": b.nofork_s}
            for m in mixes
            if (b := bounds.get((c, m))) is not None
        }
        for c in clusters
    }
    files = [
        physical.cru_by_mix(
            _panels(rows, clusters, mixes, main_round_s, lambda r: r["cru"]),
            out / MIX_FIGURES[0],
            title="Cluster resource utilisation (CRU) per mix" + at,
        ),
        physical.ttd_by_mix(
            _panels(rows, clusters, mixes, main_round_s, lambda r: r["ttd_s"]),
            out / MIX_FIGURES[1],
            bounds_s=marks,
            title="Total time duration (TTD) per mix" + at,
        ),
        physical.jct_by_mix(
            _panels(rows, clusters, mixes, main_round_s, lambda r: r["avg_jct_s"]),
            out / MIX_FIGURES[2],
            ranges_s=_panels(
                rows,
                clusters,
                mixes,
                main_round_s,
                lambda r: None if r["min_jct_s"] is None else (r["min_jct_s"], r["max_jct_s"]),
            ),
            title="Average JCT per mix, min-max JCT marked" + at,
        ),
    ]
    policies = {r["policy"] for r in rows}
    for policy, name in PAPER_ROUND_FIGURES.items():
        if policy not in policies:
            continue
        data: dict[str, dict[str, dict[str, Any]]] = {c: {m: {} for m in mixes} for c in clusters}
        for r in rows:
            if r["policy"] == policy and r["cluster"] in data and r["mix"] in data[r["cluster"]]:
                data[r["cluster"]][r["mix"]][f"{float(r['round_s']):g} s"] = r["cru"]
        for c in data:  # series in slot order
            for m in data[c]:
                data[c][m] = {f"{s:g} s": data[c][m].get(f"{s:g} s") for s in rounds_s}
        files.append(physical.cru_by_round(data, out / name, policy))
    return files
