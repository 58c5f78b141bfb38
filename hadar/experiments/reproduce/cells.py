"""One simulation of a reproduction (a picklable cell for :func:`hadar.sweep.run_cells`), run
with its workload family's set-up (:func:`hadar.scenario.workload_family`) as ``hadar simulate``
runs it with no knobs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from hadar import sweep


@dataclass(frozen=True)
class SimCell:
    cluster: str
    workload: str
    policy: str
    restart_s: float | None = None
    """Every job's re-allocation delay instead of its own (None: the workload's)."""
    options: tuple[tuple[str, str], ...] = ()
    """Knobs of the policy, over the family's (as ``--policy-opt``)."""


def run_sim(cell: SimCell) -> dict[str, Any]:
    """The run's summary (``hadar.simulator.metrics.summarize``) plus per-application average
    JCT (``app_jct_s``) and the run's round (``round_s``)."""
    from hadar.policy_options import policy_with_options
    from hadar.scenario import family_options, family_round, load_scenario, workload_family
    from hadar.simulator import SimConfig, simulate
    from hadar.simulator.metrics import summarize

    family = workload_family(cell.workload)
    cluster, jobs, throughput = load_scenario(cell.cluster, cell.workload)
    if cell.restart_s is not None:
        jobs = [replace(j, restart_s=cell.restart_s) for j in jobs]
    policy = policy_with_options(
        cell.policy, family_options(family, cell.policy, dict(cell.options))
    )
    round_s = family_round(family, [type(policy)], None)
    result = simulate(cluster, jobs, policy, throughput, SimConfig(round_s=round_s))
    summary = summarize(result)
    by_app: dict[str, list[float]] = {}
    for rec in result.jobs:
        if rec.jct is not None:
            by_app.setdefault(rec.job_type, []).append(rec.jct)
    summary["app_jct_s"] = {a: sum(v) / len(v) for a, v in sorted(by_app.items())}
    summary["round_s"] = round_s
    return summary


def run_sims(cells: Sequence[SimCell], workers: int | None) -> dict[SimCell, dict[str, Any]]:
    """Every cell's summary (``workers`` processes)."""
    return dict(
        zip(
            cells,
            sweep.run_cells(run_sim, list(cells), sweep.default_workers(len(cells), workers)),
            strict=True,
        )
    )
