"""``hadar export-gavel``: write any workload as a 10-column Gavel trace (replayable in Gavel)."""

from __future__ import annotations

import argparse

from hadar.commands import argtypes
from hadar.scenario import load_table
from hadar.workloads import load_workload
from hadar.workloads.gavel_trace import check_in_table, gavel_steps, write_trace


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "export-gavel",
        help="write a workload as a Gavel trace (10 tab-separated columns)",
        description="Write a workload (philly-N, M-x, a .csv/.yaml job list or a Gavel .trace) as a trace for "
        "Gavel's own simulator. Every (job type, GPU count) must be in the throughputs table, since "
        "Gavel cannot replay a job without one.",
    )
    p.add_argument(
        "--workload", default="philly-480", help="workload to export (default: %(default)s)"
    )
    p.add_argument(
        "--out", required=True, metavar="FILE", type=argtypes.out_file, help="trace file to write"
    )
    p.add_argument(
        "--seed",
        type=argtypes.seed,
        default=0,
        help="workload sampling seed (default: %(default)s)",
    )
    p.add_argument(
        "--throughputs",
        default=None,
        help="throughputs JSON in Gavel's schema (default: Gavel's bundled measurements)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    table = load_table(args.throughputs)
    jobs = load_workload(args.workload, table, seed=args.seed)
    for job in jobs:
        check_in_table(job, table, f"{args.workload}: job {job.job_id}")
    path = write_trace(jobs, args.out)
    rounded = sum(1 for j in jobs if gavel_steps(j.total_steps) != j.total_steps)
    note = f" ({rounded} jobs' total steps rounded to integers)" if rounded else ""
    print(f"wrote {len(jobs)} jobs to {path}{note}")
    return 0
