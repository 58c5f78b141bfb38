"""Per-hour-of-stream figures from ``hadar compare --node-stream`` outputs: useful throughput
(goodput: samples at the initial batch size per second, from rounds.csv), jobs completed and
restarts within the stream's first ``--hours``, for each policy directory of a compare run.

    hadar node-stream generate --cluster pollux-64t4 --preset summit --idle-share 0.5 \\
        --duration 12h --seed 1 -o summit.csv
    hadar compare --cluster pollux-64t4 --workload pollux-1 --node-stream summit.csv \\
        --policies hadar,hadare,bftrainer,freetrain,malletrain --workers 1 --out cmp-summit
    PYTHONPATH=. .venv/bin/python benchmarks/churn_table.py cmp-summit --hours 12
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd


def policy_row(run: Path, horizon: float) -> dict[str, float | str]:
    rounds = pd.read_csv(run / "rounds.csv")
    jobs = pd.read_csv(run / "jobs.csv")
    inside = rounds[rounds["time"] < horizon]
    seconds = (inside["time"] + inside["duration"]).clip(upper=horizon) - inside["time"]
    goodput = float((inside["goodput"].fillna(0.0) * seconds).sum()) / horizon
    busy = float((inside["busy_gpus"] * seconds).sum()) / horizon
    summary = json.loads((run / "summary.json").read_text())
    return {
        "policy": run.name,
        "goodput": goodput,
        "completed": int((jobs["finish"] <= horizon).sum()),
        "busy_gpus": busy,
        "restarts_per_job": float(summary.get("restarts_per_job", float("nan"))),
        "avg_jct_h": float(summary.get("avg_jct_s", float("nan"))) / 3600,
        "ttd_h": float(summary.get("ttd_s", float("nan"))) / 3600,
    }


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("compare_dirs", nargs="+")
    ap.add_argument("--hours", type=float, default=12.0)
    args = ap.parse_args()
    print(
        "| stream | policy | goodput (samples/s) | jobs done in stream | busy GPUs (mean) | restarts/job | avg JCT h | TTD h |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for d in args.compare_dirs:
        for run in sorted(p for p in Path(d).iterdir() if (p / "rounds.csv").exists()):
            r = policy_row(run, args.hours * 3600)
            print(
                f"| {Path(d).name} | {r['policy']} | {r['goodput']:,.0f} | {r['completed']} | {r['busy_gpus']:.1f} "
                f"| {r['restarts_per_job']:.2f} | {r['avg_jct_h']:.2f} | {r['ttd_h']:.1f} |"
            )


if __name__ == "__main__":
    main()
