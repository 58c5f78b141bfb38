"""``hadar reproduce NAME``: a seed system's headline experiment with its paper's set-up, our
figures beside the paper's (``hadar.experiments.reproduce``). Its two files are checked before the
experiment runs and replace the previous ones together or not at all
(:func:`hadar.core.io.replaced_together`)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

from hadar.commands import Subparsers
from hadar.commands.options import add_out_arg, add_workers_arg, announce, output_dir
from hadar.core.io import check_replaceable, replaced_together, write_json, write_text
from hadar.experiments.paper import REPRODUCED

if TYPE_CHECKING:
    from hadar.experiments.reproduce import Reproduction

RESULT_FILES = ("reproduce.json", "reproduce.md")
"""What one ``hadar reproduce`` writes into ``--out``: the rows as JSON and as Markdown."""


def register(sub: Subparsers) -> None:
    p = sub.add_parser(
        "reproduce",
        help="run a seed system's headline experiment and set ours beside the paper's figures",
        description="Run NAME's headline experiment with its paper's set-up (cluster, workload, "
        "round, baseline settings, job sizes, node stream), print each of the paper's figures "
        "beside ours with the tolerance stated before the run, and write reproduce.json and "
        "reproduce.md (the table as Markdown) into --out. Exit 0 whatever the figures: a row "
        "outside its tolerance is reported, not hidden.",
    )
    p.add_argument("name", choices=REPRODUCED, metavar="NAME", help=", ".join(REPRODUCED))
    p.add_argument(
        "--quick",
        action="store_true",
        help="a smaller version of the same experiment (a few minutes at most), with its own rows",
    )
    add_out_arg(p, "reproduce")
    add_workers_arg(p, "one per simulation, at most the CPU count")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from hadar.experiments.reproduce import reproduce
    from hadar.experiments.reproduce.report import tolerance_text, value_text

    out, replacing = output_dir(args.out, f"{args.out_stem}-{args.name}")
    check_replaceable(out, RESULT_FILES)  # before the experiment; again when they are saved
    console = Console()
    announce(replacing, Console(stderr=True))
    result = reproduce(args.name, quick=args.quick, workers=args.workers)
    table = Table(title=f"{args.name}{' (quick)' if args.quick else ''}: ours against the paper")
    table.add_column("figure")
    for col in ("paper", "ours", "tolerance"):
        table.add_column(col, justify="right")
    table.add_column("within", justify="center")
    for row in result.rows:
        table.add_row(
            row.figure,
            value_text(row.paper, row.unit),
            value_text(row.ours, row.unit),
            tolerance_text(row),
            "yes" if row.within else "[bold red]no[/]",
        )
    console.print(f"set-up: {result.setup}", highlight=False, markup=False, soft_wrap=True)
    console.print(table)
    for note in result.notes:
        console.print(f"note: {note}", highlight=False, markup=False, soft_wrap=True)
    save(result, out)
    within = sum(r.within for r in result.rows)
    console.print(
        f"{within}/{len(result.rows)} rows within tolerance; wrote reproduce.json and "
        f"reproduce.md in {out}/",
        highlight=False,
        markup=False,
    )
    return 0


def save(result: Reproduction, out: Path) -> None:
    """Write :data:`RESULT_FILES` into ``out`` as one save: they replace the previous ones
    together or not at all (a file that cannot be written is a one-line InputError naming it)."""
    from hadar.experiments.reproduce.report import markdown

    json_name, md_name = RESULT_FILES
    with replaced_together(out, RESULT_FILES) as stage:
        write_json(stage / json_name, result.as_dict())
        write_text(stage / md_name, markdown(result))
