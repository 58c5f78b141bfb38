"""``hadar report RUNDIR``: rebuild a run's CSVs, summary and charts from its saved state."""

from __future__ import annotations

import argparse
from pathlib import Path

from hadar.commands import Subparsers
from hadar.commands.run import print_run_summary
from hadar.core.extras import require
from hadar.core.safe_paths import refuse_links


def register(sub: Subparsers) -> None:
    p = sub.add_parser(
        "report",
        help="redraw a run's reports and charts",
        description="Rebuild rounds.csv, jobs.csv, summary.json and the PNG charts of a run "
        "directory from its journal, tracker and events.",
    )
    p.add_argument(
        "rundir", metavar="RUNDIR", help="a run directory written by hadar run (holds run.json)"
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    require("torch", "hadar report (reads the run's tracker)")
    from hadar.runtime.config import load_config
    from hadar.runtime.outputs import write_report  # brings torch (through the tracker)

    rundir = Path(args.rundir)
    load_config(rundir, "give the --out directory of a hadar run")
    refuse_links(rundir, "the run directory")  # nothing is read, locked or written through one
    print_run_summary(write_report(rundir), rundir)
    return 0
