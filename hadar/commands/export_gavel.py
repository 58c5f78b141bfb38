"""``hadar export-gavel``: write any workload as a 10-column Gavel trace (replayable in Gavel)."""

from __future__ import annotations

import argparse

from hadar.commands import Subparsers, argtypes
from hadar.commands.options import add_out_file_arg, refuse_output_over_input
from hadar.core.errors import InputError
from hadar.core.physical_workloads import PHYSICAL_WORKLOADS
from hadar.core.text import counted
from hadar.scenario import load_table
from hadar.workloads import load_workload
from hadar.workloads.gavel_trace import check_in_table, gavel_steps, trace_lines, write_trace


def register(sub: Subparsers) -> None:
    p = sub.add_parser(
        "export-gavel",
        help="write a workload as a Gavel trace (10 tab-separated columns)",
        description="Write a workload (philly-N, a .csv/.yaml job list or a Gavel .trace) as a "
        "trace for Gavel's own simulator. Every (job type, GPU count) must be in the throughputs "
        "table, since Gavel cannot replay a job without one: the physical mixes M-1..M-12 use "
        "job types Gavel never measured (MM, LT, IC, ...), so they export only with a "
        "--throughputs table that has them; nothing is mapped to a stand-in model.",
    )
    p.add_argument(
        "--workload",
        default="philly-480",
        help="philly-N, philly-N-arrivals, a .csv/.yaml job list or a .trace (default: %(default)s)",
    )
    add_out_file_arg(
        p,
        "trace file to write (a missing folder is created, and the command says so)",
        required=True,
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
    refuse_output_over_input(
        args.out, "--out", {"--workload": args.workload, "--throughputs": args.throughputs}
    )
    table = load_table(args.throughputs)
    jobs = load_workload(args.workload, table, seed=args.seed)
    unmeasured = {w.job_type: w for w in PHYSICAL_WORKLOADS.values() if w.gavel_job_type is None}
    lacking = sorted({j.job_type for j in jobs if j.job_type in unmeasured} - set(table.job_types))
    if lacking:
        what = "; ".join(f"{t}: {unmeasured[t].description}" for t in lacking)
        raise InputError(
            f"{args.workload}: job type {', '.join(repr(t) for t in lacking)} ({what}) is a "
            f"physical workload Gavel never measured, so {table.source} has no throughputs for "
            "it and Gavel cannot replay it; give --throughputs with its measurements, or export "
            "philly-N or a job list"
        )
    for job in jobs:
        check_in_table(job, table, f"{args.workload}: job {job.job_id}")
    trace_lines(jobs, str(args.workload))  # every line one the reader accepts, before any write
    created = argtypes.missing_folder(args.out)
    path = write_trace(jobs, args.out, str(args.workload))
    rounded = sum(1 for j in jobs if gavel_steps(j.total_steps) != j.total_steps)
    note = f" (total steps of {counted(rounded, 'job')} rounded to integers)" if rounded else ""
    print(f"wrote {counted(len(jobs), 'job')} to {path}{note}")
    if created is not None:
        print(f"note: created the folder {created}")
    return 0
