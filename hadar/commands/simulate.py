"""``hadar simulate``: replay a workload on a cluster under one policy and write the results."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.table import Table

from hadar.commands import Subparsers, terminal
from hadar.commands.common import (
    adaptation_note,
    add_policy_opt_arg,
    add_scenario_args,
    estimates_note,
    load_scenario,
)
from hadar.commands.options import (
    DriverRound,
    add_gavel_compatible_arg,
    add_out_arg,
    add_policy_arg,
    announce,
    input_files,
    output_dir,
    resolve_round,
)
from hadar.core.defaults import SIMULATED
from hadar.core.extras import plots_missing_note
from hadar.core.io import check_replaceable, replaced_together
from hadar.matplotlib_home import load_matplotlib
from hadar.policy import policy_info
from hadar.policy_options import parse_pairs

if TYPE_CHECKING:
    from hadar.api import Simulation


def register(sub: Subparsers) -> None:
    p = sub.add_parser(
        "simulate",
        help="run the trace-driven simulator",
        description="Replay a workload on a cluster under one policy; print a summary and write "
        "summary.json, jobs.csv, rounds.csv and placements.csv into --out; with --figures also "
        "three PNGs (completion CDF, GPU occupancy by job class, GPU use over time).",
    )
    add_scenario_args(p)
    add_policy_arg(p, SIMULATED.policy)
    add_policy_opt_arg(p)
    add_out_arg(p, "simulate")
    p.add_argument("--no-progress", action="store_true", help="do not show the progress bar")
    p.add_argument(
        "--figures",
        action="store_true",
        help="also draw completion.png, occupancy.png and utilisation.png (needs the plots "
        "extra; off by default: drawing costs more than a small simulation)",
    )
    add_gavel_compatible_arg(p, "the policy")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from hadar import api
    from hadar.scenario import family_note, workload_family

    family = workload_family(args.workload)
    typed = parse_pairs(args.policy_opt, policy=args.policy)
    set_up = family_note(
        family,
        [args.policy],
        None if isinstance(args.round_s, DriverRound) else args.round_s,
        {args.policy: typed},
    )
    round_note = resolve_round(args, [args.policy], family)
    out, replacing = output_dir(args.out, args.out_stem, inputs=input_files(args))
    no_plots = plots_missing_note("figures") if args.figures else None
    draw = bool(args.figures and not no_plots)
    check_replaceable(out, result_names(draw))  # before simulating; again when it is saved
    sim = api.simulate(
        args.cluster,
        args.workload,
        args.policy,
        throughputs=args.throughputs,
        seed=args.seed,
        size=args.size,
        round_s=args.round_s,
        restart_penalty_s=args.restart_penalty_s,
        policy_options=typed,
        gavel_compatible=args.gavel_compatible,
        progress=not args.no_progress,
        horizon_s=args.horizon_s,
        node_stream=args.node_stream,
        fork_progress=args.fork_progress,
    )
    for said in (set_up, round_note):
        if said:
            terminal.console(stderr=True).print(said, highlight=False, soft_wrap=True, markup=False)
    if policy_info(args.policy).adapts_batch:
        _, jobs, _ = load_scenario(args)
        said = adaptation_note([args.policy], jobs)
        if said:
            terminal.console(stderr=True).print(
                said, style="yellow", highlight=False, soft_wrap=True, markup=False
            )
    note = estimates_note(sim.records.estimated_cells)
    if note:
        terminal.console(stderr=True).print(
            note, style="yellow", highlight=False, soft_wrap=True, markup=False
        )
    figures = save(sim, out, draw, args)
    announce(replacing, terminal.console(stderr=True))
    print_summary(sim.summary, out)
    if no_plots:
        terminal.console().print(
            no_plots, style="yellow", markup=False, highlight=False, soft_wrap=True
        )
    elif figures:
        terminal.console().print(f"figures: {', '.join(figures)}", highlight=False, markup=False)
    return 0


def result_names(figures: bool) -> list[str]:
    """The files one ``hadar simulate`` writes: the run files, and the figures if drawn."""
    from hadar.outputs_schema import RUN_FIGURES
    from hadar.simulator.output import RUN_FILES

    return [*RUN_FILES, *RUN_FIGURES] if figures else list(RUN_FILES)


def save(sim: Simulation, out: Path, figures: bool, args: argparse.Namespace) -> list[str]:
    """Write the run files, and the figures drawn from them when ``figures``, into ``out`` as
    one save: they replace the previous ones together or not at all. The figures' names."""
    with replaced_together(out, result_names(figures)) as stage:
        sim.save(stage)
        drawn = _draw(stage, sim, args) if figures else []
    return [f.name for f in drawn]


def _draw(folder: Path, sim: Simulation, args: argparse.Namespace) -> list[Path]:
    """The run's figures, drawn from its files in ``folder``."""
    from hadar.clusters import load_cluster

    load_matplotlib(folder)
    from hadar.plots.simulation import draw_run, scenario_text

    cluster = load_cluster(args.cluster)
    return draw_run(
        folder, cluster, sim.summary, scenario_text(args.workload, cluster.name, args.seed)
    )


def print_summary(summary: Mapping[str, Any], out: Path | None = None) -> None:
    """A two-column table of the headline metrics."""
    table = Table(
        title=terminal.cell(
            f"{summary['policy']} on {summary['cluster']}: {summary['completed']}/{summary['jobs']} jobs"
        )
    )
    table.add_column("metric")
    table.add_column("value", justify="right")
    rows = [
        ("total time duration (TTD)", _hours(summary["ttd_s"])),
        ("average JCT", _hours(summary["avg_jct_s"])),
        ("median JCT", _hours(summary["median_jct_s"])),
        ("p99 JCT", _hours(summary["p99_jct_s"])),
        ("max JCT", _hours(summary["max_jct_s"])),
        ("max finish-time fairness rho", _ratio(summary.get("rho_max"))),
        ("average queueing delay", _hours(summary["avg_queueing_s"])),
        ("GPU resource utilisation (GRU)", f"{summary['gru']:.3f}"),
        ("cluster (node) resource utilisation (CRU)", f"{summary['cru']:.3f}"),
        ("restarts per job", f"{summary['restarts_per_job']:.2f}"),
        ("rounds", str(summary["rounds"])),
        (
            "decision time avg / max",
            f"{summary['avg_decision_s'] or 0:.4f} s / {summary['max_decision_s'] or 0:.4f} s",
        ),
    ]
    if summary.get("time_limited_rounds"):
        rows.append(("decisions that hit a solver time limit", str(summary["time_limited_rounds"])))
    for k, v in rows:
        table.add_row(k, v)
    console = terminal.console()
    console.print(table)
    if out is not None:
        console.print(f"results written to {out}/", markup=False)


def _ratio(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"


def _hours(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds / 3600:.2f} h ({seconds:,.0f} s)"
