"""Per-hour-of-stream figures from ``hadar compare --node-stream`` outputs, for each policy
directory of a compare run: useful work completed within the stream's first ``--hours`` (the
targets, in samples at the initial batch size, of the jobs finished by then, per second: a
lower bound on useful throughput that counts no work twice), jobs finished by then, GRU,
restarts per job, average JCT and TTD; for a policy whose simulation stopped (``hadar compare``
exit 6), the window figures alone, when it stopped after the window. (rounds.csv's ``goodput``
is each round's rate, not the work done: runs that stop mid-round or pay a restart would be
counted whole.)

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


def policy_row(run: Path, horizon: float, targets: pd.Series) -> dict[str, float | str | None]:
    """One policy's figures. A policy whose simulation stopped (``failed`` in its summary.json,
    the run up to the stop) has only its window figures, and those only when it stopped after the
    window; its GRU, restarts, JCT and TTD would count the stall or leave out the jobs it could
    not finish."""
    jobs = pd.read_csv(run / "jobs.csv")
    summary = json.loads((run / "summary.json").read_text())
    done = jobs["finish"] <= horizon
    failed = summary.get("failed")
    stopped = summary.get("stopped_at_s")
    if failed and (stopped is None or stopped < horizon):
        return {"policy": run.name, "failed": str(failed), "stopped_at_s": stopped}
    row: dict[str, float | str | None] = {
        "policy": run.name,
        "work_rate": float(targets.loc[jobs.loc[done, "id"]].sum()) / horizon,
        "completed": int(done.sum()),
    }
    if failed:
        return {**row, "failed": str(failed), "stopped_at_s": stopped}
    return {
        **row,
        "gru": float(summary.get("gru", float("nan"))),
        "restarts_per_job": float(summary.get("restarts_per_job", float("nan"))),
        "avg_jct_h": float(summary.get("avg_jct_s", float("nan"))) / 3600,
        "ttd_h": float(summary.get("ttd_s", float("nan"))) / 3600,
    }


def markdown_row(stream: str, r: dict[str, float | str | None]) -> str:
    """A table row; a failed policy's figures that are not shown read ``failed``."""
    cells = [stream, str(r["policy"])]
    if "work_rate" in r:
        cells += [f"{r['work_rate']:,.0f}", f"{r['completed']}"]
    else:
        cells += ["failed", "failed"]
    if "failed" in r:
        at = r.get("stopped_at_s")
        cells += ["failed" + ("" if at is None else f" (stopped at {float(at) / 3600:.1f} h)")]
        cells += ["failed"] * 3
    else:
        cells += [
            f"{r['gru']:.2f}",
            f"{r['restarts_per_job']:.2f}",
            f"{r['avg_jct_h']:.2f}",
            f"{r['ttd_h']:.1f}",
        ]
    return "| " + " | ".join(cells) + " |"


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("compare_dirs", nargs="+")
    ap.add_argument("--hours", type=float, default=12.0)
    ap.add_argument("--workload", default="pollux-1", help="the compared workload (its targets)")
    args = ap.parse_args()
    from hadar.workloads.pollux import pollux_jobs

    targets = pd.Series({j.job_id: float(j.total_steps) for j in pollux_jobs(args.workload)})
    print(
        "| stream | policy | work done in window (samples/s) | jobs done in window | GRU "
        "| restarts/job | avg JCT h | TTD h |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    failures: list[str] = []
    for d in args.compare_dirs:
        meta = Path(d) / "compare.json"
        failed = json.loads(meta.read_text()).get("failed", {}) if meta.exists() else {}
        runs = {p.name: p for p in Path(d).iterdir() if (p / "rounds.csv").exists()}
        for name in sorted(set(runs) | set(failed)):
            r = (
                policy_row(runs[name], args.hours * 3600, targets)
                if name in runs
                else {"policy": name, "failed": failed[name], "stopped_at_s": None}
            )
            print(markdown_row(Path(d).name, r))
            if "failed" in r:
                failures.append(f"{Path(d).name} / {name}: {r['failed']}")
    for line in failures:
        print(f"\nfailed: {line}")


if __name__ == "__main__":
    main()
