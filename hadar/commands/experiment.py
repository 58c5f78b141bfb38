"""``hadar experiment physical``: the paper's physical evaluation (section VI) in the simulator;
``hadar experiment load-sweep``: average JCT vs input job rate (docs/experiments.md).

Runs every (cluster, mix, policy, slot) cell (in ``--jobs`` processes; same numbers as one by
one), prints per cluster at the main slot the CRU/TTD/JCT table with lower bounds on TTD, the
ratios between policies next to the paper's means, the issue's HadarE targets and which
throughputs were estimated; then the slot sweep (Fig. 11/12 as numbers). Writes ``results.csv``,
``results.json`` and the PNGs of Fig. 8-12 into ``--out``. See docs/experiments.md.

Both experiments check every result file before the first simulation and save them as one:
they replace the previous ones together or not at all (:func:`hadar.core.io.replaced_together`).
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from rich.console import Console

from hadar.commands import Subparsers, argtypes, terminal
from hadar.commands.common import adaptation_note, add_policy_opt_arg, charged_restart_s
from hadar.commands.options import (
    add_alias,
    add_gavel_compatible_arg,
    add_out_arg,
    add_restart_penalty_arg,
    add_round_arg,
    add_workers_arg,
    announce,
    input_files,
    is_file,
    output_dir,
    resolve_round,
)
from hadar.core.defaults import DEFAULT_HORIZON_S
from hadar.core.errors import InputError, shorten
from hadar.core.extras import plots_missing_note
from hadar.core.io import check_replaceable, replaced_together
from hadar.core.text import comma_items
from hadar.core.validation import MAX_JOBS, MAX_SEED
from hadar.experiments import grid, load_sweep, report, tables
from hadar.experiments.grid import (
    DEFAULT_CLUSTERS,
    DEFAULT_MIXES,
    DEFAULT_POLICIES,
    DEFAULT_ROUNDS_S,
)
from hadar.experiments.paper import PAPER_BEST_ROUND
from hadar.matplotlib_home import load_matplotlib
from hadar.policy import declared_round, default_policies
from hadar.sweep import check_ray_address, default_workers


def register(sub: Subparsers) -> None:
    p = sub.add_parser(
        "experiment",
        help="reproduce the paper's experiments in the simulator",
        description="Experiment grids reproducing the paper's evaluations (see docs/experiments.md).",
    )
    exp = p.add_subparsers(dest="experiment", metavar="EXPERIMENT", required=True)
    ph = exp.add_parser(
        "physical",
        help="section VI: Gavel/Hadar/HadarE on the AWS and lab 5-node clusters (Fig. 8-12)",
        description="Simulate every cluster x mix x policy x round cell, print the CRU/TTD/JCT tables with TTD "
        "lower bounds, ratios vs the paper and the HadarE targets, and write results.csv, "
        "results.json and the PNGs of Fig. 8-12 into --out.",
    )
    ph.add_argument(
        "--clusters",
        default=",".join(DEFAULT_CLUSTERS),
        help="comma-separated cluster names or YAML files (default: %(default)s)",
    )
    ph.add_argument(
        "--mixes",
        default=",".join(DEFAULT_MIXES),
        help="workload mixes M-1 ... M-12 (default: %(default)s)",
    )
    ph.add_argument(
        "--policies", default=",".join(DEFAULT_POLICIES), help="policies (default: %(default)s)"
    )
    ph.add_argument(
        "--rounds",
        dest="rounds",
        default=None,
        metavar="LIST",
        help="round lengths in seconds for the sweep, the paper's slots (default: "
        + ",".join(f"{s:g}" for s in DEFAULT_ROUNDS_S)
        + ", plus the policies' declared round, which is then the main round)",
    )
    add_alias(ph, "--slots", "--rounds", "rounds")
    ph.add_argument(
        "--main-round",
        dest="main_round",
        default=None,
        metavar="SECONDS",
        help="round length of the main tables and Fig. 8-10; one of --rounds (default: 360 if swept, "
        "else the longest)",
    )
    add_alias(ph, "--main-slot", "--main-round", "main_round")
    add_restart_penalty_arg(ph)
    add_policy_opt_arg(ph, per_policy=True)
    add_workers_arg(ph, "the CPU count")
    add_out_arg(ph, "experiment-physical")
    ph.set_defaults(func=run_physical)
    ls = exp.add_parser(
        "load-sweep",
        help="average JCT vs input job rate (Poisson arrivals), every policy, with saturation rates",
        description="For each rate, the paper's Philly jobs (seeded) arrive as a Poisson process; every policy is "
        "simulated; JCT is measured over a steady-state window of jobs. Writes load_sweep.csv, "
        "load_sweep.json and load_sweep.png (JCT vs rate, one line per policy) into --out.",
    )
    ls.add_argument(
        "--cluster",
        default="sim-60gpu",
        help="cluster YAML file or bundled name (default: %(default)s)",
    )
    ls.add_argument(
        "--throughputs",
        default=None,
        help="throughputs JSON (default: Gavel's bundled measurements)",
    )
    ls.add_argument(
        "--rates",
        default=",".join(f"{r:g}" for r in load_sweep.DEFAULT_RATES),
        help="input job rates in jobs/hour (default: %(default)s)",
    )
    ls.add_argument(
        "--policies",
        default=",".join(default_policies("load-sweep")),
        help="policies (default: %(default)s)",
    )
    ls.add_argument(
        "--seeds", default="0", help="workload seeds, comma-separated (default: %(default)s)"
    )
    ls.add_argument(
        "--num-jobs",
        type=argtypes.count(2, MAX_JOBS, "jobs"),
        default=load_sweep.DEFAULT_JOBS,
        metavar="N",
        help="jobs per trace (default: %(default)s)",
    )
    ls.add_argument(
        "--window",
        default="{}:{}".format(*load_sweep.DEFAULT_WINDOW),
        metavar="A:B",
        help="measure jobs A..B-1 by arrival order (default: %(default)s)",
    )
    add_round_arg(ls)
    add_restart_penalty_arg(ls)
    add_policy_opt_arg(ls, per_policy=True)
    add_gavel_compatible_arg(ls)
    add_workers_arg(ls, "the CPU count")
    ls.add_argument(
        "--ray-address",
        default=None,
        metavar="ADDR",
        help="run the cells as tasks on this Ray cluster (needs the ray extra)",
    )
    add_out_arg(ls, "load-sweep")
    ls.set_defaults(func=run_load_sweep)


def run_load_sweep(args: argparse.Namespace) -> int:
    from hadar.clusters import load_cluster
    from hadar.commands.compare import parse_policies, parse_policy_options
    from hadar.sweep import run_cells

    policies = parse_policies(args.policies)
    options = parse_policy_options(args.policy_opt, policies)
    rates = _floats(args.rates, "--rates")
    if max(rates) > MAX_RATE_PER_H:
        raise InputError(
            f"--rates: at most {MAX_RATE_PER_H:,.0f} jobs/hour (got {shorten(args.rates)!r})"
        )
    seeds = _ints(args.seeds, "--seeds")
    if any(not 0 <= s <= MAX_SEED for s in seeds):
        raise InputError(
            f"--seeds: each seed must be in 0..{MAX_SEED} (got {shorten(args.seeds)!r})"
        )
    if args.num_jobs < 2:
        raise InputError(f"--num-jobs: must be >= 2 (got {args.num_jobs})")
    window = _window(args.window, args.num_jobs)
    span_h = args.num_jobs / min(rates)  # the expected arrival span at the lowest rate
    if span_h * 3600 > DEFAULT_HORIZON_S / 2:
        raise InputError(
            f"--rates: at {min(rates):.3g} jobs/h the {args.num_jobs} jobs arrive over about "
            f"{span_h:,.6g} h, beyond what the simulated year leaves to finish them; raise "
            "--rates or lower --num-jobs"
        )
    round_note = resolve_round(args, policies)
    if not (args.round_s > 0 and math.isfinite(args.round_s)):
        raise InputError(f"--round: must be a positive number of seconds (got {args.round_s})")
    if not (args.restart_penalty_s >= 0 and math.isfinite(args.restart_penalty_s)):
        raise InputError(f"--restart-penalty: must be >= 0 seconds (got {args.restart_penalty_s})")
    cluster = load_cluster(args.cluster)  # bad input fails here, once
    check_ray_address(args.ray_address)  # before the output directory exists
    out, replacing = output_dir(args.out, args.out_stem, inputs=input_files(args))
    cells = [
        replace(c, options=options.get(c.policy, {}))
        for c in load_sweep.cells(
            policies,
            rates,
            seeds,
            cluster=args.cluster,
            num_jobs=args.num_jobs,
            window=window,
            round_s=args.round_s,
            restart_penalty_s=args.restart_penalty_s,
            throughputs=args.throughputs,
            gavel_compatible=args.gavel_compatible,
        )
    ]
    load_sweep.run_cell(
        replace(cells[0], num_jobs=2, window=(0, 2))
    )  # workload/throughput errors, once
    no_plots = plots_missing_note(load_sweep.FIGURE)
    saved = load_sweep.result_names(figure=not no_plots)
    check_replaceable(out, saved)  # before simulating; again when the results are saved
    workers = default_workers(len(cells), args.workers)
    console = terminal.console()
    announce(replacing, console)
    if round_note:
        console.print(round_note, highlight=False, soft_wrap=True, markup=False)
    where = (
        f"Ray at {shorten(args.ray_address)}"
        if args.ray_address
        else f"{workers} process{'es' if workers > 1 else ''}"
    )
    console.print(
        f"load sweep: {len(policies)} policies x {len(rates)} rates x {len(seeds)} seed(s) = {len(cells)} "
        f"simulations of {args.num_jobs} jobs on {cluster.name} ({where}); window = jobs "
        f"{window[0]}..{window[1] - 1}{'; Gavel-compatible mode' if args.gavel_compatible else ''}",
        markup=False,
    )
    t0 = time.perf_counter()
    rows = run_cells(
        load_sweep.run_cell,
        cells,
        workers,
        args.ray_address,
        on_done=lambda c, r: console.print(
            f"  {c.policy:>14} {c.rate:6g} jobs/h seed {c.seed}: avg JCT "
            f"{(r['avg_jct_s'] or 0) / 3600:6.2f} h{' (saturated)' if r['saturated'] else ''}"
            f" [{r['wall_s']:.1f} s]",
            markup=False,
        ),
    )
    wall = time.perf_counter() - t0
    saturation = {p: load_sweep.saturation_rate(rows, p) for p in policies}
    sustained = {p: load_sweep.sustained_rate(rows, p) for p in policies}
    meta = {
        "cluster": cluster.name,
        "cluster_file": args.cluster,
        "policies": policies,
        "rates": rates,
        "seeds": seeds,
        "num_jobs": args.num_jobs,
        "window": list(window),
        "round_s": args.round_s,
        "restart_penalty_s": charged_restart_s(args),
        "gavel_compatible": args.gavel_compatible,
        "policy_options": options,
        "saturation_growth": load_sweep.SATURATION_GROWTH,
        "saturates_at": saturation,
        "sustains_up_to": sustained,
        "wall_seconds": round(wall, 3),
        "workers": workers,
        "ray_address": args.ray_address,
    }
    with replaced_together(out, saved) as stage:  # all the results, or none
        files = load_sweep.write_outputs(stage, rows, meta)
        if no_plots:
            console.print(no_plots, style="yellow", markup=False, highlight=False, soft_wrap=True)
        else:
            load_matplotlib(stage)
            from hadar.plots import load_sweep_chart

            title = (
                f"Average JCT vs input job rate: {args.num_jobs} Philly jobs (seed{'s' if len(seeds) > 1 else ''} "
                f"{','.join(map(str, seeds))}) on {cluster.name}, window jobs {window[0]}..{window[1] - 1}"
            )
            files.append(load_sweep_chart(rows, stage / load_sweep.FIGURE, title, saturation))
    load_sweep.print_table(console, rows, policies, rates, saturation)
    console.print(
        f"{len(cells)} simulations in {wall:.1f} s; wrote {', '.join(f.name for f in files)} in {out}/",
        markup=False,
    )
    return 0


MAX_RATE_PER_H = 1e6
"""The largest ``--rates`` value: a million jobs an hour arrive in the first seconds of the
simulated year already (the chart's axis could not be drawn near 1e308)."""


def _floats(text: str, option: str) -> list[float]:
    try:
        values = [float(x) for x in comma_items(text, option)]
    except ValueError:
        raise InputError(
            f"{option}: expected comma-separated numbers (got {shorten(text)!r})"
        ) from None
    if not values or any(not (v > 0 and math.isfinite(v)) for v in values):
        raise InputError(f"{option}: expected positive finite numbers (got {shorten(text)!r})")
    if len(set(values)) != len(values):
        raise InputError(f"{option}: a value is given twice ({shorten(text)!r})")
    return values


def _ints(text: str, option: str) -> list[int]:
    try:
        values = [int(x) for x in comma_items(text, option)]
    except ValueError:
        raise InputError(
            f"{option}: expected comma-separated whole numbers (got {shorten(text)!r})"
        ) from None
    if not values or len(set(values)) != len(values):
        raise InputError(f"{option}: expected distinct whole numbers (got {shorten(text)!r})")
    return values


def _window(text: str, num_jobs: int) -> tuple[int, int]:
    a, sep, b = text.partition(":")
    try:
        start, end = int(a), int(b)
    except ValueError:
        raise InputError(
            f"--window: expected A:B, two whole numbers (got {shorten(text)!r})"
        ) from None
    if not sep or not 0 <= start < end <= num_jobs:
        raise InputError(
            f"--window: need 0 <= A < B <= --num-jobs ({num_jobs}) (got {shorten(text)!r})"
        )
    return start, end


def _cell_line(
    console: Console, total: int, t0: float
) -> Callable[[grid.Cell, dict[str, Any]], None]:
    """Prints one line per finished cell of the physical experiment (a long grid says how far
    it is, in a log too)."""
    done = 0

    def line(cell: grid.Cell, row: dict[str, Any]) -> None:
        nonlocal done
        done += 1
        ttd = row["ttd_s"]
        console.print(
            f"  [{done}/{total}] {row['cluster']} {cell.mix} {cell.policy} round {cell.round_s:g} s: "
            f"TTD {'-' if ttd is None else f'{ttd / 3600:.2f} h'}, "
            f"{row['completed']}/{row['jobs']} jobs done [{time.perf_counter() - t0:.0f} s]",
            markup=False,
            highlight=False,
        )

    return line


def run_physical(args: argparse.Namespace) -> int:
    from hadar.commands.compare import parse_policy_options

    rounds, main_round, round_note = _physical_rounds(args.rounds, args.main_round, args.policies)
    options = parse_policy_options(args.policy_opt, grid.parse_policies(args.policies))
    spec = grid.parse_spec(
        args.clusters,
        args.mixes,
        args.policies,
        rounds,
        main_round,
        args.restart_penalty_s,
        options,
    )
    clusters = {  # cluster files named in --clusters are inputs the results must not replace
        f"clusters ({name})": name for name in spec.clusters if is_file(name, "--clusters")
    }
    out, replacing = output_dir(args.out, args.out_stem, inputs={**input_files(args), **clusters})
    no_plots = plots_missing_note("figures")
    saved = report.result_names(spec.policies, figures=not no_plots)
    check_replaceable(out, saved)  # before simulating; again when the results are saved
    console = terminal.console()
    announce(replacing, console)
    if round_note:
        console.print(round_note, highlight=False, soft_wrap=True, markup=False)
    jobs = [j for m in spec.mixes for j in grid.scenario(spec.clusters[0], m)[1]]  # every mix's
    adapting = adaptation_note(spec.policies, jobs)
    if adapting:
        console.print(adapting, style="yellow", highlight=False, soft_wrap=True, markup=False)
    todo = grid.cells(spec)
    workers = default_workers(len(todo), args.workers)
    console.print(
        f"physical experiment: {len(todo)} cells ({len(spec.clusters)} clusters x {len(spec.mixes)} mixes x "
        f"{len(spec.policies)} policies x {len(spec.rounds_s)} rounds) in {workers} "
        f"process{'es' if workers > 1 else ''}",
        markup=False,
    )
    t0 = time.perf_counter()
    rows = grid.run_cells(todo, workers, on_done=_cell_line(console, len(todo), t0))
    sim_seconds = time.perf_counter() - t0
    bounds = grid.scenario_bounds(spec)
    estimated = grid.estimated_pairs(spec)
    rows = tables.with_bounds(rows, bounds)
    for r in rows:
        r["estimated"] = ";".join(f"{m}@{g}" for m, g in estimated[(r["cluster"], r["mix"])])

    names = list(dict.fromkeys(r["cluster"] for r in rows))
    summary: dict[str, dict[str, dict[str, Any]]] = {"clusters": {}}
    for c in names:
        comps = tables.cluster_comparisons(rows, bounds, c, spec.main_round_s, spec.mixes)
        means = tables.mean_over_mixes(comps, report.MEAN_KEYS)
        targets = tables.targets(comps)
        sweeps = {
            p: tables.round_sweep(rows, c, p, spec.mixes, spec.rounds_s)
            for p in PAPER_BEST_ROUND  # the policies of the paper's slot sweeps (Figs. 11-12)
            if p in spec.policies
        }
        pairs = sorted({p for m in spec.mixes for p in estimated[(c, m)]})
        report.print_cluster(console, c, spec.main_round_s, rows, comps, means, targets, pairs)
        summary["clusters"][c] = {
            "main_round_s": spec.main_round_s,
            "per_mix": comps,
            "mean_over_mixes": means,
            "targets": targets,
            "round_sweep": sweeps,
            "estimated": {m: [list(p) for p in estimated[(c, m)]] for m in spec.mixes},
            "bounds": {m: vars(bounds[(c, m)]) for m in spec.mixes},
        }
    if len(spec.rounds_s) > 1:
        for c in names:
            sweeps = summary["clusters"][c]["round_sweep"]
            if sweeps:
                report.print_round_sweep(console, c, sweeps, spec.rounds_s)
    with replaced_together(out, saved) as stage:  # all the results, or none
        csv_name, json_name = report.TABLE_FILES
        files = [report.write_csv(stage / csv_name, rows)]
        if no_plots:
            console.print(no_plots, style="yellow", markup=False, highlight=False, soft_wrap=True)
        else:
            load_matplotlib(stage)
            from hadar.experiments import figures  # matplotlib: loaded only when drawing

            files += figures.draw(
                rows, bounds, names, spec.mixes, spec.rounds_s, spec.main_round_s, stage
            )
        wall = time.perf_counter() - t0
        files.append(
            report.write_json(
                stage / json_name,
                spec,
                rows,
                summary,
                {
                    "workers": workers,
                    "simulation_seconds": round(sim_seconds, 3),
                    "wall_seconds": round(wall, 3),
                },
            )
        )
    console.print(
        f"{len(todo)} cells simulated in {sim_seconds:.1f} s ({workers} process{'es' if workers > 1 else ''}), "
        f"{wall:.1f} s with bounds and figures; wrote {', '.join(f.name for f in files)} in {out}/",
        markup=False,
    )
    return 0


def _physical_rounds(
    rounds: str | None, main_round: str | None, policies: str
) -> tuple[str, str | None, str | None]:
    """``--rounds`` and ``--main-round`` of the physical grid: not typed, the paper's sweep plus
    the policies' declared round (:func:`hadar.policy.declared_round`), which is then the main
    round of every policy alike (as in ``hadar compare``); and the line saying so."""
    if rounds is not None:
        return rounds, main_round, None
    declared = declared_round([p.strip() for p in policies.split(",")])
    swept = sorted({*DEFAULT_ROUNDS_S, *([declared.seconds] if declared else [])})
    text = ",".join(f"{s:g}" for s in swept)
    if declared is None:
        return text, main_round, None
    main = main_round if main_round is not None else f"{declared.seconds:g}"
    note = (
        f"rounds: {text} s; main round {main} s for every policy "
        f"({', '.join(declared.declared_by)}'s declared scheduling interval; --rounds to change)"
    )
    return text, main, note
