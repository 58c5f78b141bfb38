"""``hadar experiment physical``: the paper's physical evaluation (section VI) in the simulator.

Runs every (cluster, mix, policy, slot) cell (in ``--jobs`` processes; same numbers as one by
one), prints per cluster at the main slot the CRU/TTD/JCT table with lower bounds on TTD, the
ratios between policies next to the paper's means, the issue's HadarE targets and which
throughputs were estimated; then the slot sweep (Fig. 11/12 as numbers). Writes ``results.csv``,
``results.json`` and the PNGs of Fig. 8-12 into ``--out``. See docs/experiments.md.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from rich.console import Console

from hadar.errors import InputError
from hadar.experiments import grid, report, tables
from hadar.experiments.grid import DEFAULT_CLUSTERS, DEFAULT_MIXES, DEFAULT_POLICIES, DEFAULT_SLOTS


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("experiment", help="reproduce the paper's experiments in the simulator",
                       description="Experiment grids reproducing the paper's evaluations (see docs/experiments.md).")
    exp = p.add_subparsers(dest="experiment", metavar="EXPERIMENT", required=True)
    ph = exp.add_parser(
        "physical", help="section VI: Gavel/Hadar/HadarE on the AWS and lab 5-node clusters (Fig. 8-12)",
        description="Simulate every cluster x mix x policy x slot cell, print the CRU/TTD/JCT tables with TTD "
                    "lower bounds, ratios vs the paper and the HadarE targets, and write results.csv, "
                    "results.json and the PNGs of Fig. 8-12 into --out.")
    ph.add_argument("--clusters", default=",".join(DEFAULT_CLUSTERS),
                    help="comma-separated cluster names or YAML files (default: %(default)s)")
    ph.add_argument("--mixes", default=",".join(DEFAULT_MIXES), help="workload mixes M-1 ... M-12 (default: %(default)s)")
    ph.add_argument("--policies", default=",".join(DEFAULT_POLICIES), help="policies (default: %(default)s)")
    ph.add_argument("--slots", default=",".join(f"{s:g}" for s in DEFAULT_SLOTS),
                    help="slot (round) times in seconds for the sweep (default: %(default)s)")
    ph.add_argument("--main-slot", default=None, metavar="SECONDS",
                    help="slot of the main tables and Fig. 8-10; one of --slots (default: 360 if swept, else the longest)")
    ph.add_argument("--restart-penalty", default="10", metavar="SECONDS",
                    help="checkpoint-restart penalty in seconds (default: %(default)s)")
    ph.add_argument("--jobs", default=None, metavar="N",
                    help="parallel processes (default: the CPU count; 1 = one by one)")
    ph.add_argument("--out", default="out/experiment-physical", help="output directory (default: %(default)s)")
    ph.set_defaults(func=run_physical)


def _count(text: str | None, option: str) -> int | None:
    if text is None:
        return None
    try:
        v = int(text)
    except ValueError:
        raise InputError(f"{option}: expected a whole number (got {text!r})") from None
    if v < 1:
        raise InputError(f"{option}: must be >= 1 (got {v})")
    return v


def _seconds(text: str, option: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise InputError(f"{option}: expected seconds (got {text!r})") from None


def run_physical(args: argparse.Namespace) -> int:
    workers_arg = _count(args.jobs, "--jobs")
    spec = grid.parse_spec(args.clusters, args.mixes, args.policies, args.slots, args.main_slot,
                           _seconds(args.restart_penalty, "--restart-penalty"))
    out = Path(args.out)
    console = Console(width=max(180, Console().width))
    todo = grid.cells(spec)
    workers = workers_arg or grid.default_workers(len(todo))
    console.print(f"physical experiment: {len(todo)} cells ({len(spec.clusters)} clusters x {len(spec.mixes)} mixes x "
                  f"{len(spec.policies)} policies x {len(spec.slots)} slots) in {workers} "
                  f"process{'es' if workers > 1 else ''}")
    t0 = time.perf_counter()
    rows = grid.run_cells(todo, workers)
    sim_seconds = time.perf_counter() - t0
    bounds = grid.scenario_bounds(spec)
    estimated = grid.estimated_pairs(spec)
    rows = tables.with_bounds(rows, bounds)
    for r in rows:
        r["estimated"] = ";".join(f"{m}@{g}" for m, g in estimated[(r["cluster"], r["mix"])])

    names = list(dict.fromkeys(r["cluster"] for r in rows))
    summary: dict = {"clusters": {}}
    for c in names:
        comps = tables.cluster_comparisons(rows, bounds, c, spec.main_slot, spec.mixes)
        means = tables.mean_over_mixes(comps, report.MEAN_KEYS)
        targets = tables.targets(comps)
        sweeps = {p: tables.slot_sweep(rows, c, p, spec.mixes, spec.slots) for p in ("hadare", "hadar")
                  if p in spec.policies}
        pairs = sorted({p for m in spec.mixes for p in estimated[(c, m)]})
        report.print_cluster(console, c, spec.main_slot, rows, comps, means, targets, pairs)
        summary["clusters"][c] = {
            "main_slot_s": spec.main_slot, "per_mix": comps, "mean_over_mixes": means, "targets": targets,
            "slot_sweep": sweeps, "estimated": {m: [list(p) for p in estimated[(c, m)]] for m in spec.mixes},
            "bounds": {m: vars(bounds[(c, m)]) for m in spec.mixes},
        }
    if len(spec.slots) > 1:
        for c in names:
            sweeps = summary["clusters"][c]["slot_sweep"]
            if sweeps:
                report.print_slot_sweep(console, c, sweeps, spec.slots)
    files = [report.write_csv(out / "results.csv", rows)]
    from hadar.experiments import figures  # matplotlib: loaded only when drawing

    files += figures.draw(rows, bounds, names, spec.mixes, spec.slots, spec.main_slot, out)
    wall = time.perf_counter() - t0
    files.append(report.write_json(out / "results.json", spec, rows, summary,
                                   {"workers": workers, "simulation_seconds": round(sim_seconds, 3),
                                    "wall_seconds": round(wall, 3)}))
    console.print(f"{len(todo)} cells simulated in {sim_seconds:.1f} s ({workers} process{'es' if workers > 1 else ''}), "
                  f"{wall:.1f} s with bounds and figures; wrote {', '.join(f.name for f in files)} in {out}/")
    return 0
