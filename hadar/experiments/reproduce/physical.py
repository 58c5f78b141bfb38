"""The Hadar paper's physical evaluation (section VI), simulated: the seven mixes on the AWS and
lab clusters at 360 s rounds and a 10 s restart penalty, the paper's per-mix ratios averaged over
the mixes as the paper averages them. Shared by ``reproduce hadar`` and ``reproduce hadare``."""

from __future__ import annotations

from collections.abc import Sequence

from hadar.experiments.grid import DEFAULT_CLUSTERS, DEFAULT_MIXES, GridSpec, cells, run_cells
from hadar.experiments.paper import PAPER_CLUSTERS, paper_value
from hadar.experiments.reproduce import Reproduction, Row
from hadar.experiments.tables import cluster_comparisons, mean_over_mixes
from hadar.sweep import default_workers

TOLERANCE = 0.10
"""Relative tolerance of every physical row (simulated averages of ratios)."""

LABELS = {"ttd": "TTD speed-up", "cru": "CRU gain", "jct": "average-JCT speed-up"}


def physical_rows(
    system: str,
    keys: Sequence[str],
    policies: tuple[str, ...],
    quick: bool,
    workers: int | None,
) -> Reproduction:
    """Rows ``keys`` (``<metric>_<policy>_vs_<reference>``, the paper's averages) per cluster;
    ``quick`` runs the AWS cluster only."""
    clusters = DEFAULT_CLUSTERS[:1] if quick else DEFAULT_CLUSTERS
    spec = GridSpec(clusters=clusters, policies=policies, rounds_s=(GridSpec.main_round_s,))
    todo = cells(spec)
    rows_out = run_cells(todo, default_workers(len(todo), workers))
    names = {r["cluster"] for r in rows_out}
    rows = []
    for cluster in sorted(names):
        comps = cluster_comparisons(rows_out, {}, cluster, spec.main_round_s, DEFAULT_MIXES)
        means = mean_over_mixes(comps, keys)
        for key in keys:
            paper = paper_value(key, cluster)
            if paper is None:
                continue
            metric, _, pair = key.partition("_")
            rows.append(
                Row(
                    f"{LABELS[metric]}, {pair.replace('_vs_', ' vs ')}, {PAPER_CLUSTERS[cluster]} "
                    "(mean of 7 mixes)",
                    paper,
                    means[key],
                    TOLERANCE,
                    unit="x",
                )
            )
    setup = (
        f"{', '.join(sorted(names))}; mixes {', '.join(DEFAULT_MIXES)} at the paper's sizes; "
        f"{spec.main_round_s:g} s rounds, {spec.restart_penalty_s:g} s restart penalty; "
        f"policies {', '.join(policies)}"
    )
    return Reproduction(system, quick, setup, tuple(rows))
