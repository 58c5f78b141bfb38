"""Real-run benchmarks of ``hadar run`` on local nodes (tiny/small PyTorch models, CPU).

1. Coordination overhead per round (decide + stage + fetch + average), 5 local nodes, tiny
   models, HadarE: median and max over rounds, against the round length.
2. Demo: mix M-5 at small size on local-5node (emulated V100 / 2x K80 / 2x T4 speeds): CRU and
   TTD for hadare vs hadar vs gavel.

    .venv/bin/python benchmarks/bench_run.py [--only overhead|demo] [--round 30] [--out out/bench-run]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def run(out: Path, *args: str) -> dict[str, Any]:
    shutil.rmtree(out, ignore_errors=True)
    proc = subprocess.run(
        [sys.executable, "-m", "hadar", "run", "--no-live", "--out", str(out), *args],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise SystemExit(proc.stdout + proc.stderr)
    summary: dict[str, Any] = json.loads((out / "summary.json").read_text())
    return summary


def rounds(out: Path) -> list[dict[str, str]]:
    import csv

    with open(out / "rounds.csv") as fh:
        return list(csv.DictReader(fh))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", choices=["overhead", "demo"])
    ap.add_argument("--round", dest="round_s", type=float, default=30.0, help="round length, s")
    ap.add_argument("--out", default="out/bench-run")
    a = ap.parse_args()
    base = Path(a.out)
    cluster = str(REPO / "cluster_configs" / "local-5node.yaml")
    if a.only in (None, "overhead"):
        out = base / "overhead"
        run(
            out,
            "--cluster",
            cluster,
            "--workload",
            "M-5",
            "--size",
            "small",
            "--policy",
            "hadare",
            "--round",
            str(a.round_s),
            "--no-eval",
        )
        rs = rounds(out)[1:]  # round 0 also starts the warm servers: reported separately
        coord = [float(r["coordination_seconds"]) for r in rs]
        first = rounds(out)[0]
        print(
            f"coordination overhead per round, 5 local nodes, small M-5, hadare, round {a.round_s:g} s:"
        )
        print(
            f"  median {statistics.median(coord):.2f} s, max {max(coord):.2f} s over {len(coord)} rounds "
            f"({100 * statistics.median(coord) / a.round_s:.1f}% of the round); "
            f"round 0 (warm servers start) {float(first['coordination_seconds']):.2f} s"
        )
    if a.only in (None, "demo"):
        print(f"demo: M-5 small on local-5node, round {a.round_s:g} s")
        print(f"{'policy':8} {'CRU':>6} {'TTD s':>8} {'avg JCT s':>10} {'rounds':>7}")
        for policy in ("hadare", "hadar", "gavel"):
            s = run(
                base / f"demo-{policy}",
                "--cluster",
                cluster,
                "--workload",
                "M-5",
                "--size",
                "small",
                "--policy",
                policy,
                "--round",
                str(a.round_s),
                "--no-eval",
            )
            print(
                f"{policy:8} {s['cru']:6.3f} {s['ttd_s']:8.1f} {s['avg_jct_s']:10.1f} {s['rounds']:7d}",
                flush=True,
            )


if __name__ == "__main__":
    main()
