"""One policy against another over every (seed, rate) cell of a load sweep: in how many cells it
is behind, by how much at worst, and the geometric mean of the ratio (issue 27's per-cell
targets; the mean table the sweep prints can hide a lost cell).

    hadar experiment load-sweep --policies hadar,gavel --seeds 0,1,2,3,4 --out out/sweep
    PYTHONPATH=. .venv/bin/python benchmarks/load_sweep_versus.py out/sweep/load_sweep.csv \
        [--policy hadar] [--versus gavel]

Ratios are policy / versus (below 1: the policy is ahead); "behind" counts the cells with a ratio
above 1 (a tie is not behind).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import pandas as pd

METRICS = {
    "avg_jct_s": "avg JCT (window)",
    "median_jct_s": "median JCT (window)",
    "p99_jct_s": "p99 JCT (window)",
    "all_avg_jct_s": "avg JCT (whole run)",
    "all_p99_jct_s": "p99 JCT (whole run)",
}


def versus(rows: pd.DataFrame, policy: str, other: str) -> list[tuple[str, int, int, float, str]]:
    """Per metric: (label, cells behind, cells, geometric-mean ratio, the cells behind)."""
    key = ["seed", "rate"]
    mine = rows[rows["policy"] == policy].set_index(key).sort_index()
    theirs = rows[rows["policy"] == other].set_index(key).sort_index()
    cells = mine.index.intersection(theirs.index)
    if cells.empty:
        raise SystemExit(f"no (seed, rate) cell has both {policy!r} and {other!r}")
    out = []
    for metric, label in METRICS.items():
        ratio = mine.loc[cells, metric] / theirs.loc[cells, metric]
        behind = ratio[ratio > 1.0]
        listed = ", ".join(f"s{s}@{r:g}/h {x:.3f}" for (s, r), x in behind.items())
        geo = math.exp(float(ratio.map(math.log).mean()))
        out.append((label, len(behind), len(cells), geo, listed))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("csv", type=Path, help="load_sweep.csv of `hadar experiment load-sweep`")
    parser.add_argument("--policy", default="hadar")
    parser.add_argument("--versus", default="gavel")
    args = parser.parse_args(argv)
    try:
        rows = pd.read_csv(args.csv)
    except (OSError, pd.errors.ParserError) as exc:
        print(f"{args.csv}: cannot read: {exc}", file=sys.stderr)
        return 2
    missing = sorted({"policy", "seed", "rate", *METRICS} - set(rows.columns))
    if missing:
        print(f"{args.csv}: not a load_sweep.csv: no column {', '.join(missing)}", file=sys.stderr)
        return 2
    for label, behind, cells, geo, listed in versus(rows, args.policy, args.versus):
        print(
            f"{label:22s} behind in {behind:2d}/{cells} cells, geo-mean ratio {geo:.3f}  {listed}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
