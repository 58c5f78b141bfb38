"""``hadar estimate-error``: the cold-start estimate (Eq. 10) against a measured throughput table."""

from __future__ import annotations

import argparse

from estimators.error_report import (
    HOLDOUTS,
    RESULT_FILES,
    build_report,
    make_out_dir,
    render,
    score_variants,
    write_outputs,
)
from estimators.pmi import PmiParams
from hadar.commands import Subparsers, argtypes
from hadar.commands.options import input_files, output_dir
from hadar.core.errors import InputError
from hadar.core.gpu_catalogue import canonical_gpu
from hadar.core.io import check_replaceable
from hadar.core.text import comma_items
from hadar.scenario import load_table


def register(sub: Subparsers) -> None:
    p = sub.add_parser(
        "estimate-error",
        help="error of the PMI/PCIe cold-start throughput estimate against measured throughputs",
        description="Predict every measured cell of a Gavel-schema throughput table with Eq. 10, "
        "never using the cell being predicted, and report the error per GPU type.",
    )
    p.add_argument(
        "--throughputs",
        metavar="FILE",
        help="Gavel-schema throughputs JSON (default: Gavel's bundled K80/P100/V100 table)",
    )
    p.add_argument(
        "--reference",
        default="v100",
        metavar="GPU",
        help="reference GPU type of X_ref (default: %(default)s)",
    )
    p.add_argument(
        "--holdout",
        default=",".join(HOLDOUTS),
        metavar="LIST",
        help="comma-separated hold-outs (default: %(default)s, all of them)",
    )
    p.add_argument(
        "--variants",
        action="store_true",
        help="also score a few PMI variants (TFLOPS choice, exponent)",
    )
    p.add_argument(
        "--out",
        metavar="DIR",
        type=argtypes.out_dir,
        help="write estimate_error_cells.csv, _summary.csv and .json here",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from hadar.commands.terminal import console as terminal_console

    params = PmiParams(reference_gpu=canonical_gpu(args.reference, "--reference"))
    holdouts = comma_items(args.holdout, "--holdout")
    bad = [h for h in holdouts if h not in HOLDOUTS]
    if bad:
        raise InputError(
            f"--holdout: unknown hold-out {bad[0] if bad else ''!r} (choose from {', '.join(HOLDOUTS)})"
        )
    table = load_table(args.throughputs)
    if args.out:  # checked before the report; again when the files are saved, together
        output_dir(args.out, "estimate-error", inputs=input_files(args))  # no input inside
        check_replaceable(args.out, RESULT_FILES)
        make_out_dir(args.out)
    report = build_report(table, params, holdouts)
    variants = score_variants(table, params) if args.variants else ()
    console = terminal_console()
    render(report, console, variants)
    if args.out:
        paths = write_outputs(report, args.out, variants)
        console.print("wrote " + ", ".join(str(p) for p in paths))
    return 0
