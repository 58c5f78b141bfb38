"""Argument helpers shared by sub-commands: cluster, workload and throughput options."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TYPE_CHECKING

from hadar.commands import argtypes
from hadar.commands.options import add_restart_penalty_arg, add_round_arg, add_size_arg
from hadar.core.cluster_config import bundled_cluster_names
from hadar.core.defaults import DEFAULT_HORIZON_S, FORK_PROGRESS
from hadar.core.validation import MAX_SECONDS

if TYPE_CHECKING:  # the parsers import no simulator, estimator or scenario code
    from estimators.throughput import EstimatedCell, ThroughputModel
    from hadar.core.cluster import Cluster
    from hadar.core.jobs import Job


def add_scenario_args(
    p: argparse.ArgumentParser,
    default_cluster: str = "sim-60gpu",
    default_workload: str = "philly-480",
) -> None:
    p.add_argument(
        "--cluster",
        default=default_cluster,
        help="cluster YAML file or bundled name: "
        + ", ".join(bundled_cluster_names())
        + " (default: %(default)s)",
    )
    p.add_argument(
        "--workload",
        default=default_workload,
        help="philly-N[-arrivals][-elastic], M-1..M-12, pollux-1..pollux-8, a .csv/.yaml job list "
        "or a Gavel .trace (default: %(default)s)",
    )
    p.add_argument(
        "--load",
        type=float,
        default=None,
        metavar="L",
        help="relative job load of a pollux-N workload: 0.5, 1, 1.5 or 2 (default: 1)",
    )
    p.add_argument(
        "--throughputs",
        default=None,
        help="throughputs JSON in Gavel's schema (default: Gavel's bundled measurements)",
    )
    p.add_argument(
        "--seed",
        type=argtypes.seed,
        default=0,
        help="workload sampling seed (default: %(default)s)",
    )
    p.add_argument(
        "--fork-progress",
        choices=FORK_PROGRESS,
        default=FORK_PROGRESS[0],
        help="how HadarE's forked copies of a job with efficiency data (Pollux workloads) "
        "progress: goodput = at most as one job at their combined batch, steps = each copy's "
        "own progress in full (the Hadar paper's accounting) (default: %(default)s)",
    )
    add_size_arg(p)
    add_round_arg(p)
    add_restart_penalty_arg(p)
    p.add_argument(
        "--horizon",
        dest="horizon_s",
        type=argtypes.seconds(1, MAX_SECONDS, units=True),
        default=DEFAULT_HORIZON_S,
        help="simulated time by which every job must have finished, in seconds or with a unit "
        "(90m, 36h, 30d); a workload that cannot finish by then is an error (default: %(default)s, 365 days)",
    )
    p.add_argument(
        "--node-stream",
        default=None,
        metavar="FILE",
        help="CSV time,node,event: nodes of the cluster join and leave the pool mid-run (a leave "
        "preempts without warning; a node the stream never names is never up); see "
        "docs/node-streams.md and hadar node-stream",
    )


def add_policy_opt_arg(p: argparse.ArgumentParser, per_policy: bool = False) -> None:
    """``--policy-opt KEY=VALUE`` (repeatable); with ``per_policy``, ``POLICY:KEY=VALUE``."""
    form = "POLICY:KEY=VALUE" if per_policy else "KEY=VALUE"
    p.add_argument(
        "--policy-opt",
        action="append",
        default=[],
        metavar=form,
        help="a policy knob (repeatable), e.g. "
        + (
            "hadar:utility=sigmoid"
            if per_policy
            else "utility=sigmoid, replan=never, preset=legacy (or POLICY:KEY=VALUE, as hadar "
            "compare takes it, for this command's policy)"
        )
        + "; the knobs of each policy are in "
        "docs/hadar.md and docs/baselines.md",
    )


def estimates_note(cells: Sequence[EstimatedCell], limit: int = 6) -> str | None:
    """One line naming the throughput figures a run had to estimate (None when all were measured)."""
    if not cells:
        return None
    shown = "; ".join(c.describe() for c in cells[:limit])
    more = (
        f"; and {len(cells) - limit} more (summary.json: estimated_cells)"
        if len(cells) > limit
        else ""
    )
    return (
        f"note: {len(cells)} throughput figure(s) are not in the measured table and were estimated "
        f"(PMI/PCIe, Eq. 10): {shown}{more}"
    )


def adaptation_note(policies: Sequence[str], jobs: Sequence[Job]) -> str | None:
    """The line saying which jobs a batch-adapting policy (``PolicyInfo.adapts_batch``: Pollux)
    adapts by GPU count only: those without statistical-efficiency data (None when there are
    none, or no such policy runs)."""
    from hadar.policy import find_policy_info
    from hadar.workloads.pollux_throughput import is_pollux_job

    adapting = [p for p in policies if (info := find_policy_info(p)) and info.adapts_batch]
    without = sum(not is_pollux_job(j) for j in jobs)
    if not adapting or not without:
        return None
    return (
        f"note: {without} of {len(jobs)} jobs have no statistical-efficiency data (not one of "
        f"Pollux's applications): {', '.join(adapting)} adapts their GPU count only (within "
        "their min-max GPUs; a rigid job runs on its gang or waits), at their own batch size"
    )


def charged_restart_s(args: argparse.Namespace) -> float:
    """The ``--restart-penalty`` a run charges: none in Gavel-compatible mode, which ignores it."""
    if getattr(args, "gavel_compatible", False):
        return 0.0
    return float(getattr(args, "restart_penalty_s", 0.0))


def load_scenario(args: argparse.Namespace) -> tuple[Cluster, list[Job], ThroughputModel]:
    """:func:`hadar.scenario.load_scenario` from the scenario flags (``--cluster``, ``--workload``,
    ``--throughputs``, ``--seed``, ``--size``, ``--round``, ``--restart-penalty`` and ``--horizon``
    where the command has them)."""
    from hadar import scenario

    scenario.check_round(getattr(args, "round_s", None), charged_restart_s(args))
    return scenario.load_scenario(
        args.cluster,
        args.workload,
        args.throughputs,
        seed=args.seed,
        size=getattr(args, "size", "paper"),
        horizon_s=getattr(args, "horizon_s", None),
    )
