"""``hadar compare``: several policies on the same cluster and workload, side by side.

Each policy is simulated in its own process (``--jobs``); a simulation depends only on its
inputs, so the results equal those of running the policies one by one (only the measured
decision times vary). Writes ``compare.csv``, ``compare.json``, ``compare.md`` (the printed
tables as Markdown, as docs/results.md quotes them), ``decision_times.csv``, each
policy's run files in ``DIR/<policy>/`` and four PNGs: GRU per policy (paper Fig. 3), cumulative
fraction of jobs completed (Fig. 4), decision time vs number of jobs (Fig. 5) and the GPU-by-round
occupancy of one policy.

Fig. 5 is measured, after the simulations, in this process: for each queue length N, one decision
of a fresh policy instance on the empty cluster with N queued jobs (the workload's jobs repeated
as needed, all arrived) -- the hardest round, where Gavel solves its LP and Hadar runs its DP.

A policy whose simulation stops (:class:`~hadar.simulator.engine.SimulationLimitError`: it
cannot place a job, a node stream ends with too few GPUs, the horizon) is reported as failed, with
the reason, beside the others' complete rows; the command then exits 7
(:data:`~hadar.core.errors.PARTIAL_RESULT_EXIT_CODE`). Its run up to the stop is kept in
``DIR/<policy>/`` (``summary.json`` says ``"failed"``), but no metric of it enters the tables: its
JCTs would be those of the jobs it could finish, its TTD and GRU would count the stall. Bad input
and bugs (any other exception) still end the command.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from estimators.throughput import ThroughputModel
from hadar.commands import Subparsers, argtypes, terminal
from hadar.commands.common import (
    adaptation_note,
    add_policy_opt_arg,
    add_scenario_args,
    charged_restart_s,
    estimates_note,
    load_scenario,
)
from hadar.commands.options import (
    DriverRound,
    add_gavel_compatible_arg,
    add_out_arg,
    add_workers_arg,
    announce,
    input_files,
    output_dir,
    resolve_round,
)
from hadar.core.cluster import Cluster
from hadar.core.defaults import SIMULATED
from hadar.core.errors import PARTIAL_RESULT_EXIT_CODE, InputError, shorten
from hadar.core.extras import plots_missing_note
from hadar.core.io import check_replaceable, replaced_together, write_csv, write_json, write_text
from hadar.core.jobs import Job, JobStatus
from hadar.core.safe_paths import confined
from hadar.core.text import comma_items
from hadar.matplotlib_home import load_matplotlib
from hadar.policy import (
    POLICY_REGISTRY,
    RoundContext,
    default_policies,
    policy_class,
    preferred_reference,
)
from hadar.policy_options import build_config, parse_pairs, policy_with_options
from hadar.scenario import (
    check_job_restarts,
    check_round,
    comparison_default_set,
    family_note,
    family_options,
    workload_family,
)
from hadar.sweep import check_ray_address, default_workers, run_cells

DECISION_SIZES = (32, 64, 128, 256, 512, 1024, 2048)
DECISION_REPEATS = 3
"""Decisions timed per policy and queue length (Fig. 5 draws the median and the min-max range)."""
SCENARIO_KEYS = (
    "cluster",
    "workload",
    "throughputs",
    "seed",
    "size",
    "round_s",
    "restart_penalty_s",
    "horizon_s",
    "node_stream",
    "fork_progress",
)


def _duration(v: float) -> str:
    """A duration in the unit that shows it with three significant figures or so (hours down
    to 0.1 h, then minutes, then seconds), so a ratio next to it reads true."""
    if abs(v) >= 360:
        return f"{v / 3600:.2f} h"
    if abs(v) >= 60:
        return f"{v / 60:.1f} min"
    return f"{v:.1f} s"


def _share(v: float) -> str:
    """A share as a percentage that is 0 % only when nothing is in it (2 of 480 is 0.4 %)."""
    pct = 100 * v
    return f"{pct:.0f}%" if pct == 0 or pct >= 10 else f"{max(pct, 0.1):.1f}%"


METRICS: tuple[tuple[str, str, Callable[[float], str]], ...] = (
    ("ttd_s", "TTD", _duration),
    ("avg_jct_s", "avg JCT", _duration),
    ("median_jct_s", "median JCT", _duration),
    ("p99_jct_s", "p99 JCT", _duration),
    ("max_jct_s", "max JCT", _duration),
    ("rho_max", "max rho", lambda v: f"{v:.2f}"),
    ("gru", "GRU", lambda v: f"{100 * v:.1f}%"),
    ("cru", "CRU", lambda v: f"{100 * v:.1f}%"),
    ("gpu_hours", "GPU-hours", lambda v: f"{v:,.0f}"),
    ("avg_gpus_per_job", "GPUs / job", lambda v: f"{v:.1f}"),
    ("avg_batch_per_job", "batch / job", lambda v: f"{v:,.0f}"),
    ("restarts_per_job", "restarts/job", lambda v: f"{v:.2f}"),
    ("avg_decision_s", "decision avg", lambda v: f"{v:.4f} s"),
    ("max_decision_s", "decision max", lambda v: f"{v:.3f} s"),
)
"""Table/CSV metrics: summary key, column title, formatter. Ratios are policy / reference."""

FAIRNESS_METRICS: tuple[tuple[str, str, Callable[[float], str]], ...] = (
    ("avg_queueing_s", "avg queueing", _duration),
    ("work_efficiency", "work efficiency", lambda v: f"{v:.2f}"),
    ("rho_mean", "mean rho", lambda v: f"{v:.2f}"),
    ("rho_median", "median rho", lambda v: f"{v:.2f}"),
    ("rho_above_1", "rho > 1", _share),
)
"""The second table: queueing delay, work efficiency (1.0 = every job always on its fastest GPU
type) and Themis's finish-time fairness rho (JCT over JCT with a 1/n share; > 1 is unfair)."""


def register(sub: Subparsers) -> None:
    p = sub.add_parser(
        "compare",
        help="compare policies on one cluster and workload (table, CSV/JSON, paper figures)",
        description="Simulate several policies on the same cluster and workload (in parallel processes), print "
        "one table with ratios to Hadar, write compare.csv/compare.json/compare.md (Markdown), each policy's run files in "
        "DIR/<policy>/ and the paper's figures as PNG. A policy whose simulation stops with an error (it "
        "cannot place a job, the node stream ends with too few GPUs, the horizon) is marked failed with "
        f"its reason and the others are reported: exit {PARTIAL_RESULT_EXIT_CODE}; its run up to the "
        "stop stays in DIR/<policy>/, outside the tables.",
    )
    add_scenario_args(p)
    p.add_argument(
        "--policies",
        default=DefaultPolicies(",".join(default_policies("compare"))),
        help=f"comma-separated, from {', '.join(sorted(POLICY_REGISTRY))} (default: %(default)s; "
        f"on a workload with efficiency data, pollux-N: {','.join(default_policies('compare-elastic'))})",
    )
    add_policy_opt_arg(p, per_policy=True)
    add_out_arg(p, "compare")
    add_workers_arg(p, "one per policy, at most the CPU count")
    p.add_argument(
        "--ray-address",
        default=None,
        metavar="ADDR",
        help="run the policies as tasks on this Ray cluster instead (needs the ray extra)",
    )
    add_gavel_compatible_arg(p)
    p.add_argument(
        "--occupancy-policy",
        default=SIMULATED.policy,
        metavar="POLICY",
        help="policy whose GPU-by-round occupancy is drawn (default: %(default)s, or the first policy)",
    )
    p.add_argument(
        "--decision-sizes",
        default=",".join(map(str, DECISION_SIZES)),
        metavar="LIST",
        help="queue lengths for the decision-time figure; empty: no figure (default: %(default)s)",
    )
    p.add_argument(
        "--decision-repeats",
        type=argtypes.count(1, 100, "decisions"),
        default=DECISION_REPEATS,
        metavar="N",
        help="decisions timed per policy and queue length; the figure draws the median and "
        "the min-max range (default: %(default)s)",
    )
    p.set_defaults(func=run)


class DefaultPolicies(str):
    """``--policies`` not typed: the default set that fits the workload
    (:func:`hadar.scenario.comparison_default_set`)."""


@dataclass(frozen=True)
class DecisionTime:
    """Fig. 5's measurement of one policy at one queue length, over ``repeats`` decisions."""

    policy: str
    jobs: int
    seconds: float
    """The median."""
    min_s: float
    max_s: float
    repeats: int


@dataclass(frozen=True)
class RunSpec:
    """Everything a worker process needs to simulate one policy (plain, picklable values)."""

    policy: str
    scenario: dict[str, Any]
    gavel_compatible: bool
    out: str
    options: dict[str, str] = field(default_factory=dict)
    """``--policy-opt`` knobs of this policy."""


def run(args: argparse.Namespace) -> int:
    typed = None if isinstance(args.policies, DefaultPolicies) else parse_policies(args.policies)
    sizes = parse_sizes(args.decision_sizes)
    cluster, jobs, throughput = load_scenario(args)  # bad input fails here, once
    policies = typed or list(default_policies(comparison_default_set(jobs)))
    typed_options = parse_policy_options(args.policy_opt, policies)
    family = workload_family(args.workload)
    options = {p: family_options(family, p, typed_options.get(p)) for p in policies}
    options = {p: o for p, o in options.items() if o}
    set_up = family_note(
        family,
        policies,
        None if isinstance(args.round_s, DriverRound) else args.round_s,
        typed_options,
    )
    occupancy = args.occupancy_policy if args.occupancy_policy in policies else None
    if occupancy is None and args.occupancy_policy != SIMULATED.policy:
        raise InputError(f"--occupancy-policy: {args.occupancy_policy!r} is not one of --policies")
    occupancy = occupancy or policies[0]
    round_note = resolve_round(args, policies, family)
    check_round(args.round_s, charged_restart_s(args))
    check_job_restarts(jobs, args.round_s, str(args.workload))
    scenario = {k: getattr(args, k) for k in SCENARIO_KEYS}
    check_ray_address(args.ray_address)  # before the output directory exists
    out, replacing = output_dir(args.out, args.out_stem, inputs=input_files(args))
    no_plots = plots_missing_note("figures")
    names = result_names(policies, None if no_plots else occupancy)
    for p in policies:
        _policy_dir(out, p)
    check_replaceable(out, names)  # before simulating; again when the results are saved
    console = terminal.console()
    announce(replacing, console)
    announce(earlier_results_note(out, policies), console)
    workers = default_workers(len(policies), args.workers)
    mode = "gavel-compatible" if args.gavel_compatible else "normal"
    note = estimates_note(throughput.estimated_cells(jobs, cluster))
    if note:
        console.print(note, style="yellow", highlight=False, soft_wrap=True, markup=False)
    for said in (set_up, round_note):
        if said:
            console.print(said, highlight=False, soft_wrap=True, markup=False)
    adapting = adaptation_note(policies, jobs)
    if adapting:
        console.print(adapting, style="yellow", highlight=False, soft_wrap=True, markup=False)
    where = (
        f"Ray at {shorten(args.ray_address)}"
        if args.ray_address
        else f"{workers} process{'es' if workers > 1 else ''}"
    )
    console.print(
        f"simulating {', '.join(policies)} on {cluster.name} / {args.workload} ({mode} mode, {where})",
        markup=False,
    )
    with replaced_together(out, names) as stage:  # all the results, or none
        t0 = time.perf_counter()
        specs = [
            RunSpec(p, scenario, args.gavel_compatible, str(stage / p), options.get(p, {}))
            for p in policies
        ]
        summaries = run_all(
            specs,
            workers,
            args.ray_address,
            on_done=lambda s, dt: console.print(
                f"  {s['policy']:>15} {'FAILED' if FAILED in s else 'done'} ({dt:.1f} s)",
                markup=False,
            ),
        )
        ok = [s for s in summaries if FAILED not in s]
        failed = {s["policy"]: str(s[FAILED]) for s in summaries if FAILED in s}
        reference = preferred_reference([s["policy"] for s in ok] or policies)
        rows = table_rows(summaries, reference)
        decisions = (
            measure_decision_times(
                cluster,
                jobs,
                throughput,
                list(default_policies("decision-times")),
                sizes,
                args.round_s,
                args.gavel_compatible,
                repeat=args.decision_repeats,
                options=options,
            )
            if sizes
            else []
        )
        meta = {
            "mode": mode,
            "reference": reference,
            "cluster": cluster.name,
            "workload": args.workload,
            "seed": args.seed,
            "jobs": len(jobs),
            "round_s": args.round_s,
            "notes": [n for n in (set_up, round_note, adapting) if n],
            "estimated_cells": [asdict(c) for c in throughput.estimated_cells(jobs, cluster)],
            "failed": failed,
            "wall_seconds": round(time.perf_counter() - t0, 3),
        }
        files = write_outputs(stage, rows, decisions, meta)
        if no_plots:
            console.print(no_plots, style="yellow", markup=False, highlight=False, soft_wrap=True)
        elif ok:
            load_matplotlib(stage)
            from hadar.plots.simulation import scenario_text

            files += draw_figures(
                stage,
                cluster,
                ok,
                decisions,
                occupancy if occupancy not in failed else ok[0]["policy"],
                scenario_text(args.workload, cluster.name, args.seed),
            )
        files = [f.relative_to(stage) for f in files]
    print_table(console, rows, reference, mode, cluster.name, args.workload)
    for line in failure_lines(rows):
        console.print(line, style="red", markup=False, highlight=False, soft_wrap=True)
    console.print(
        f"wrote {', '.join(map(str, files))} and {', '.join(policies)}/ in {out}/", markup=False
    )
    if failed:
        print(
            f"hadar: error: {len(failed)} of {len(policies)} policies failed ({', '.join(failed)}; "
            "the reasons are under the table and in compare.json); the others are reported",
            file=sys.stderr,
        )
        return PARTIAL_RESULT_EXIT_CODE
    return 0


FAILED = "failed"
"""The summary key of a policy whose simulation stopped: its one-line reason."""


def table_rows(summaries: Sequence[dict[str, Any]], reference: str) -> list[dict[str, Any]]:
    """The rows of the tables and compare.csv, in ``summaries`` order: each completed policy's
    summary with its ratios to ``reference``; a failed one's name, status and reason alone."""
    from hadar.simulator.metrics import comparison_rows  # the simulator: not for the parser

    ok = [s for s in summaries if FAILED not in s]
    keys = [key for key, _, _ in METRICS + FAIRNESS_METRICS]
    done = {r["policy"]: r for r in (comparison_rows(ok, reference, keys) if ok else [])}
    return [
        {**done[s["policy"]], "status": "ok"} if FAILED not in s else {**s, "status": FAILED}
        for s in summaries
    ]


def failure_lines(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """One line per failed policy: its name, when its simulation stopped (simulated time; a
    stall is found ``stall_rounds`` idle rounds after it began) and the error that stopped it."""
    lines = []
    for r in rows:
        if FAILED in r:
            at = r.get("stopped_at_s")
            when = "" if at is None else f" (simulation stopped at {at / 3600:,.1f} h)"
            lines.append(f"{r['policy']} failed{when}: {r[FAILED]}")
    return lines


def parse_policies(text: str) -> list[str]:
    names = comma_items(text, "--policies")
    for n in names:
        policy_class(n, "--policies")
    return names


def parse_policy_options(
    items: Sequence[str], policies: Sequence[str]
) -> dict[str, dict[str, str]]:
    """``["hadar:utility=sigmoid", ...]`` -> ``{"hadar": {"utility": "sigmoid"}}``, each checked
    against the policy's knobs (one-line errors)."""
    per: dict[str, list[str]] = {}
    for item in items:
        policy, sep, pair = item.partition(":")
        if not sep or "=" in policy:
            raise InputError(f"--policy-opt: expected POLICY:KEY=VALUE (got {item!r})")
        if policy not in policies:
            raise InputError(
                f"--policy-opt: {policy!r} is not one of --policies ({', '.join(policies)})"
            )
        per.setdefault(policy, []).append(pair)
    out = {p: parse_pairs(pairs) for p, pairs in per.items()}
    for p, opts in out.items():
        build_config(p, opts)
    return out


def parse_sizes(text: str) -> list[int]:
    if not text.strip():  # no decision-time figure
        return []
    try:
        sizes = [int(s) for s in comma_items(text, "--decision-sizes")]
    except ValueError:
        raise InputError(
            f"--decision-sizes: expected comma-separated integers (got {shorten(text)!r})"
        ) from None
    if len(set(sizes)) != len(sizes):
        raise InputError(f"--decision-sizes: a size is given twice (got {shorten(text)!r})")
    if any(not 1 <= s <= MAX_DECISION_SIZE for s in sizes):
        raise InputError(
            f"--decision-sizes: sizes must be whole numbers of jobs in [1, {MAX_DECISION_SIZE}] "
            f"(got {shorten(text)!r}); beyond it Gavel's LP, timed beside Hadar, takes minutes and "
            "cannot be interrupted (benchmarks/bench_scale.py times Hadar alone at larger sizes)"
        )
    return sizes


MAX_DECISION_SIZE = 16_384
"""The largest ``--decision-sizes`` queue: Gavel's max-min LP (HiGHS, which Ctrl-C cannot interrupt)
took 35 s at 16,384 jobs and 230 s at 32,768 on two cores (Hadar: 0.27 s and 0.52 s)."""


# -- running ---------------------------------------------------------------------------------
def run_policy(spec: RunSpec) -> dict[str, Any]:
    """Simulate one policy, write its run files into ``spec.out``; return its summary, or, when
    the simulation stops (:class:`SimulationLimitError`: it cannot place a job, the horizon),
    ``{policy, jobs, completed, failed, stopped_at_s}`` with the run up to the stop in
    ``spec.out`` (its summary.json marked ``failed`` and ``partial``). Bad input and bugs (a
    :class:`PolicyError`, any other exception) propagate."""
    from hadar import api
    from hadar.simulator.engine import SimulationLimitError

    try:
        sim = api.simulate(
            policy=spec.policy,
            policy_options=spec.options,
            gavel_compatible=spec.gavel_compatible,
            **spec.scenario,
        )
    except SimulationLimitError as exc:
        failure = {FAILED: str(exc), "stopped_at_s": exc.stopped_at_s}
        if exc.partial is None:
            return {"policy": spec.policy, **failure}
        run = api.simulation_of(exc.partial, spec.policy)
        run.summary.update(failure, partial=True)
        run.save(spec.out)
        return {
            "policy": spec.policy,
            "jobs": run.summary["jobs"],
            "completed": run.summary["completed"],
            **failure,
        }
    sim.save(spec.out)
    return sim.summary


def run_all(
    specs: Sequence[RunSpec],
    workers: int,
    ray_address: str | None = None,
    on_done: Callable[[dict[str, Any], float], None] | None = None,
) -> list[dict[str, Any]]:
    """Summaries in ``specs`` order (local processes, or Ray tasks with ``ray_address``)."""
    t0 = time.perf_counter()
    return run_cells(
        run_policy,
        specs,
        workers,
        ray_address,
        on_done=None if on_done is None else lambda _, s: on_done(s, time.perf_counter() - t0),
    )


def decision_queue(jobs: Sequence[Job], n: int) -> list[Job]:
    """``n`` queued jobs: the workload's jobs repeated in order, renumbered, all arrived at 0."""
    return [replace(jobs[i % len(jobs)], job_id=i, arrival=0.0) for i in range(n)]


def measure_decision_times(
    cluster: Cluster,
    jobs: Sequence[Job],
    throughput: ThroughputModel,
    policies: Sequence[str],
    sizes: Sequence[int],
    round_s: float = SIMULATED.round_s,
    gavel_compatible: bool = False,
    repeat: int = DECISION_REPEATS,
    options: Mapping[str, Mapping[str, str]] | None = None,
) -> list[DecisionTime]:
    """One decision on the empty cluster per repeat, each by a fresh policy instance (Gavel
    solves its LP, Hadar runs its DP): median, fastest and slowest of the repeats."""
    from hadar.simulator import gavel_mode

    if gavel_compatible:
        throughput = gavel_mode.ConsolidatedThroughput(throughput)
    rows = []
    for n in sizes:
        queue = decision_queue(jobs, n)
        ctx = RoundContext(
            now=0.0,
            round_index=0,
            round_s=round_s,
            cluster=cluster,
            jobs=tuple(JobStatus(j, j.total_steps) for j in queue),
            current={},
            throughput=throughput,
            restart_penalty_s=0.0 if gavel_compatible else SIMULATED.restart_penalty_s,
        )
        for name in policies:
            fixed = gavel_mode.policy_options(name) if gavel_compatible else {}
            times = []
            for _ in range(max(1, repeat)):
                policy = policy_with_options(name, (options or {}).get(name), **fixed)
                t = time.perf_counter()
                policy.decide(ctx)
                times.append(time.perf_counter() - t)
            times.sort()
            rows.append(
                DecisionTime(name, n, times[len(times) // 2], times[0], times[-1], len(times))
            )
    return rows


# -- outputs ---------------------------------------------------------------------------------
TABLE_FILES = ("compare.csv", "compare.json", "decision_times.csv", "compare.md")
"""What :func:`write_outputs` writes, in this order."""
FIGURES = ("fig3_gru.png", "fig4_completion.png", "fig5_decision_time.png")
"""Fig. 3-5 (:func:`draw_figures`); the occupancy chart is ``occupancy_<policy>.png``."""


def earlier_results_note(out: Path, policies: Sequence[str]) -> str | None:
    """A note naming the policies' folders an earlier comparison left in ``out`` (policies not
    in this one): this run replaces its own results, never deletes those."""
    from hadar.policy import policy_names

    if not out.is_dir():
        return None
    others = sorted(
        d.name
        for d in out.iterdir()
        if d.name in policy_names() and d.name not in policies and d.is_dir() and not d.is_symlink()
    )
    if not others:
        return None
    folders = ", ".join(f"{out}/{name}/" for name in others)
    return (
        f"note: {folders} hold an earlier comparison's results (policies not in --policies); "
        "they are left as they are"
    )


def result_names(policies: Sequence[str], occupancy: str | None) -> list[str]:
    """Every file one ``hadar compare`` writes, relative to ``--out``: the tables, the figures
    (``occupancy``: the policy whose occupancy is drawn; None: no figures) and each policy's
    run files in its folder. They are replaced together (:func:`hadar.core.io.replaced_together`)."""
    from hadar.simulator.output import RUN_FILES

    figures = [] if occupancy is None else [*FIGURES, f"occupancy_{occupancy}.png"]
    return [*TABLE_FILES, *figures, *(f"{p}/{f}" for p in policies for f in RUN_FILES)]


def write_outputs(
    out: Path,
    rows: Sequence[dict[str, Any]],
    decisions: Sequence[DecisionTime],
    meta: dict[str, Any],
) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    csv_name, json_name, decisions_name, md_name = TABLE_FILES
    keys = ["policy", "status", "jobs", "completed", "rounds"]
    for key, _, _ in METRICS + FAIRNESS_METRICS:
        keys += [key, f"{key}_ratio"]
    keys += ["gpu_util_gavel", "median_decision_s", FAILED, "stopped_at_s"]
    csv_path = write_csv(out / csv_name, rows, keys)
    json_path = write_json(
        out / json_name,
        {
            **meta,
            "policies": list(rows),
            "decision_times": [asdict(d) for d in decisions],
        },
    )
    dec_path = write_csv(
        out / decisions_name,
        [asdict(d) for d in decisions],
        ["policy", "jobs", "seconds", "min_s", "max_s", "repeats"],
    )
    notes = "".join(f"{n}\n\n" for n in meta.get("notes", []))
    md_path = write_text(
        out / md_name,
        notes + markdown_tables(rows, str(meta["reference"]), str(meta["mode"])),
    )
    return [csv_path, json_path, dec_path, md_path]


def draw_figures(
    out: Path,
    cluster: Cluster,
    summaries: Sequence[dict[str, Any]],
    decisions: Sequence[DecisionTime],
    occupancy: str,
    scenario: str,
) -> list[Path]:
    """Fig. 3-5 and the occupancy chart of ``occupancy``; ``scenario`` (workload, cluster, seed)
    is in every title."""
    from hadar import plots
    from hadar.plots.simulation import finish_times, job_classes, placements, round_times

    finish: dict[str, list[float]] = {}
    totals: dict[str, int] = {}
    for s in summaries:
        finish[s["policy"]], totals[s["policy"]] = finish_times(out / s["policy"])
    return [
        plots.gru_bars(
            {s["policy"]: s["gru"] for s in summaries},
            out / FIGURES[0],
            title=f"GPU resource utilisation (GRU): {scenario}",
        ),
        plots.completion_cdf(
            finish,
            totals,
            out / FIGURES[1],
            title=f"Cumulative fraction of jobs completed: {scenario}",
        ),
        plots.decision_time_curve(
            [(d.policy, d.jobs, d.seconds, d.min_s, d.max_s) for d in decisions],
            out / FIGURES[2],
            title=f"Decision time of one round vs queued jobs ({cluster.name}; "
            f"median of {decisions[0].repeats if decisions else 0}, bars = min-max)",
        ),
        plots.occupancy_chart(
            [(n.name, dict(n.gpus)) for n in cluster.nodes],
            placements(out / occupancy),
            round_times(out / occupancy),
            job_classes(out / occupancy),
            out / f"occupancy_{occupancy}.png",
            title=f"GPU occupancy: {occupancy}, {scenario}",
        ),
    ]


def print_table(
    console: Console,
    rows: Sequence[dict[str, Any]],
    reference: str,
    mode: str,
    cluster: str,
    workload: str,
) -> None:
    """The comparison as two tables: completion and cost, then delay, efficiency and fairness."""
    extra = ("util (Gavel)", "gpu_util_gavel") if mode == "gavel-compatible" else None
    _metric_table(
        console,
        rows,
        METRICS,
        f"{workload} on {cluster} ({mode} mode); (x) = policy / {reference}",
        extra,
        reference,
    )
    _metric_table(
        console,
        rows,
        FAIRNESS_METRICS,
        "queueing delay, work efficiency and finish-time fairness (rho)",
        None,
        reference,
    )


def _metric_table(
    console: Console,
    rows: Sequence[dict[str, Any]],
    metrics: Sequence[tuple[str, str, Callable[[float], str]]],
    title: str,
    extra: tuple[str, str] | None,
    reference: str,
) -> None:
    """One metric per row, one policy per column (so four or five policies fit 80 columns);
    a ratio is that of the unrounded values."""
    table = Table(title=title)
    table.add_column("metric")
    for r in rows:
        table.add_column(_heading(r), justify="right", overflow="fold")
    for key, name, fmt in measured(metrics, rows):
        cells = []
        for r in rows:
            v, ratio = r.get(key), r.get(f"{key}_ratio")
            shown = "-" if v is None else fmt(v)
            if (
                v is not None
                and ratio is not None
                and math.isfinite(ratio)
                and r["policy"] != reference
            ):
                shown += f" ({ratio:.2f}x)"
            cells.append(shown)
        table.add_row(name, *cells)
    if extra:
        table.add_row(
            extra[0],
            *("-" if r.get(extra[1]) is None else f"{100 * r[extra[1]]:.1f}%" for r in rows),
        )
    console.print(table)


def measured(
    metrics: Sequence[tuple[str, str, Callable[[float], str]]], rows: Sequence[Mapping[str, Any]]
) -> list[tuple[str, str, Callable[[float], str]]]:
    """The metrics some row has a value for (``batch / job`` only on elastic workloads): a
    column of dashes says nothing. CSV and JSON keep every key."""
    return [m for m in metrics if any(r.get(m[0]) is not None for r in rows)]


def _cells(
    r: Mapping[str, Any],
    metrics: Sequence[tuple[str, str, Callable[[float], str]]],
    extra: tuple[str, str] | None,
) -> list[str]:
    """One policy's row: its name (and how many jobs finished, if not all), each metric with its
    ratio to the reference."""
    cells = [_heading(r)]
    for key, _, fmt in metrics:
        v, ratio = r.get(key), r.get(f"{key}_ratio")
        cells.append(
            "-"
            if v is None
            else fmt(v) + ("" if ratio is None or not math.isfinite(ratio) else f" ({ratio:.2f}x)")
        )
    if extra:
        cells.append("-" if r.get(extra[1]) is None else f"{100 * r[extra[1]]:.1f}%")
    return cells


def _heading(r: Mapping[str, Any]) -> str:
    """A policy's name, with how many jobs finished when not all did, and FAILED when its
    simulation stopped (its metrics are then left out; the reason is under the table)."""
    done = (
        ""
        if r.get("completed") == r.get("jobs")
        else f"{r.get('completed', '?')}/{r.get('jobs', '?')} done"
    )
    said = [w for w in ("FAILED" if FAILED in r else "", done) if w]
    return str(r["policy"]) + (f" ({'; '.join(said)})" if said else "")


def markdown_tables(rows: Sequence[dict[str, Any]], reference: str, mode: str) -> str:
    """The two printed tables as Markdown (``compare.md``, the form docs/results.md quotes)."""
    extra = ("util (Gavel)", "gpu_util_gavel") if mode == "gavel-compatible" else None
    out = []
    for every, more in ((METRICS, extra), (FAIRNESS_METRICS, None)):
        metrics = measured(every, rows)
        names = ["policy", *(name for _, name, _ in metrics), *([more[0]] if more else [])]
        out.append("| " + " | ".join(names) + " |")
        out.append("|---" * len(names) + "|")
        out += ["| " + " | ".join(_cells(r, metrics, more)) + " |" for r in rows]
        out.append("")
    out += [f"{line}\n" for line in failure_lines(rows)]
    return f"Ratios (x) are policy / {reference}.\n\n" + "\n".join(out)


def _policy_dir(out: Path, policy: str) -> Path:
    """``out/<policy>``, refused (:class:`PathEscapeError`) when it leads outside ``out`` (a
    symbolic link planted there: results are never written through one)."""
    return confined(out, policy, what=f"--out {out}")
