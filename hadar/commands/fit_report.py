"""``hadar fit-report``: fit Pollux's throughput model (Eq. 11) to each application's measured
iterations and report its error on them (docs/elastic.md)."""

from __future__ import annotations

import argparse
import stat
import time
from pathlib import Path
from typing import TYPE_CHECKING

from rich.table import Table

from hadar.commands import Subparsers, argtypes, terminal
from hadar.core.errors import InputError
from hadar.core.io import write_csv
from hadar.core.validation import look_up

if TYPE_CHECKING:
    from goodput.traces import AppTrace


def register(sub: Subparsers) -> None:
    p = sub.add_parser(
        "fit-report",
        help="fit Pollux's throughput model to the traces; report its error",
        description="Fit Pollux's iteration-time model (Eq. 11, scipy.optimize on log-error) to "
        "every measured iteration of each application and report its median and largest "
        "relative error on those points, the fitted parameters and the fit time.",
    )
    p.add_argument(
        "--traces",
        default=None,
        metavar="DIR",
        help="a folder of application folders (placements.csv, scalability.csv, "
        "validation-<M>.csv), or one application folder (default: the bundled Pollux traces)",
    )
    p.add_argument(
        "--csv",
        default=None,
        type=argtypes.out_file,
        metavar="PATH",
        help="also write the table as CSV",
    )
    p.set_defaults(func=run)


def _traces(folder: str | None) -> list[AppTrace]:
    from goodput.applications import APPLICATIONS
    from goodput.traces import bundled_trace, load_trace_dir

    if folder is None:
        return [bundled_trace(name) for name in APPLICATIONS]
    root = Path(folder)
    found = look_up(root, "--traces")  # a name over 255 bytes, a link loop: one line
    if found is None or not stat.S_ISDIR(found.st_mode):
        raise InputError(f"--traces: {root} is not a folder")
    if (root / "placements.csv").exists():
        return [load_trace_dir(root)]
    apps = sorted(d for d in root.iterdir() if (d / "placements.csv").exists())
    if not apps:
        raise InputError(f"--traces: {root} holds no application folder (with placements.csv)")
    return [load_trace_dir(d) for d in apps]


def _check_csv_is_no_trace(csv: str | None, traces: str | None) -> None:
    """``--csv`` may not be written inside the ``--traces`` folder: it would replace a table
    the report reads, or (a new file such as ``validation-64.csv``) be read as one next time."""
    if csv is None or traces is None:
        return
    if Path(csv).resolve().is_relative_to(Path(traces).resolve()):
        raise InputError(
            f"--csv {csv}: is inside the --traces folder {traces}, whose files are read as "
            "traces; write it to another folder"
        )


def run(args: argparse.Namespace) -> int:
    from goodput.traces import fit_application

    _check_csv_is_no_trace(args.csv, args.traces)
    traces = _traces(args.traces)  # every table is checked before any fit
    rows = []
    for trace in traces:
        t0 = time.perf_counter()
        fit = fit_application(trace)
        p = fit.params
        rows.append(
            {
                "application": trace.name,
                "points": fit.num_points,
                "median_rel_error": fit.median_rel_error,
                "max_rel_error": fit.max_rel_error,
                "compute_median_rel_error": fit.compute_median_rel_error,
                "converged": fit.converged,
                "fit_s": time.perf_counter() - t0,
                **{k: getattr(p, k) for k in ("alpha_c", "beta_c", "alpha_n", "beta_n")},
                **{k: getattr(p, k) for k in ("alpha_r", "beta_r", "gamma")},
            }
        )
    table = Table(title="Pollux Eq. 11 fitted to each application's measured iterations")
    for col in ("application", "points", "median error", "max error", "fit", "gamma"):
        table.add_column(col, justify="left" if col == "application" else "right")
    for r in rows:
        table.add_row(
            r["application"],
            str(r["points"]),
            f"{r['median_rel_error']:.1%}",
            f"{r['max_rel_error']:.1%}",
            f"{r['fit_s']:.2f} s" + ("" if r["converged"] else " (not converged)"),
            f"{r['gamma']:.2f}",
        )
    terminal.console().print(table)
    print(f"all fits: {sum(r['fit_s'] for r in rows):.2f} s")
    if args.csv:
        write_csv(args.csv, rows, list(rows[0]))
    return 0
