"""Per-round decision time of Gavel vs Hadar, and the wall time of the four-policy comparison.

Decision time, on sim-60gpu, with N = 32, 64, ..., 2048 jobs drawn by the paper's Philly
generator (``philly-N``, all arrived), median over ``--repeat`` decisions, two scenarios:

* cold:   empty cluster, every job queued, a fresh policy instance: Gavel solves its LP and runs
          its mechanism, Hadar runs its DP over the whole queue (the round at t = 0);
* steady: the next round, same jobs, the cold round's placements running: Gavel keeps its
          allocation (the job set did not change) and re-ranks; Hadar keeps running jobs and
          considers the rest of the queue.

Then ``hadar compare`` with hadar, gavel, tiresias and yarn-cs on philly-480 / sim-60gpu (the
paper's set-up, 2 processes, default Fig. 5 sizes), timed end to end in a subprocess.

    .venv/bin/python benchmarks/bench_decision_time.py [--repeat 5] [--skip-compare] [--max-jobs 2048]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time

from estimators.throughput import GavelThroughputTable
from hadar.core.cluster_config import load_cluster
from hadar.core.jobs import JobStatus
from hadar.policy import RoundContext, make_policy
from hadar.workloads import load_workload

POLICIES = ("gavel", "hadar")


def decision_times(
    n: int, table: GavelThroughputTable, repeat: int
) -> dict[tuple[str, str], list[float]]:
    cluster = load_cluster("sim-60gpu")
    jobs = load_workload(f"philly-{n}", table)
    statuses = tuple(JobStatus(j, j.total_steps) for j in jobs)
    out: dict[tuple[str, str], list[float]] = {}
    for name in POLICIES:
        for _ in range(repeat):
            policy = make_policy(name)
            ctx = RoundContext(0.0, 0, 360.0, cluster, statuses, {}, table)
            t0 = time.perf_counter()
            plan = policy.decide(ctx)
            out.setdefault((name, "cold"), []).append(time.perf_counter() - t0)
            nxt = RoundContext(360.0, 1, 360.0, cluster, statuses, plan.allocation(), table)
            t0 = time.perf_counter()
            policy.decide(nxt)
            out.setdefault((name, "steady"), []).append(time.perf_counter() - t0)
    return out


def time_compare() -> float:
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        subprocess.run(
            [
                sys.executable,
                "-m",
                "hadar",
                "compare",
                "--cluster",
                "sim-60gpu",
                "--workload",
                "philly-480",
                "--policies",
                "hadar,gavel,tiresias,yarn-cs",
                "--workers",
                "2",
                "--out",
                tmp,
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--max-jobs", type=int, default=2048)
    ap.add_argument("--skip-compare", action="store_true")
    args = ap.parse_args()
    table = GavelThroughputTable.bundled()
    sizes = [n for n in (32, 64, 128, 256, 512, 1024, 2048) if n <= args.max_jobs]
    print(f"decision time on sim-60gpu, median of {args.repeat} (seconds)")
    print(
        f"{'jobs':>6} {'gavel cold':>11} {'hadar cold':>11} {'gavel steady':>13} {'hadar steady':>13}"
    )
    for n in sizes:
        t = decision_times(n, table, args.repeat)
        med = {k: statistics.median(v) for k, v in t.items()}
        print(
            f"{n:6d} {med['gavel', 'cold']:11.3f} {med['hadar', 'cold']:11.3f} "
            f"{med['gavel', 'steady']:13.3f} {med['hadar', 'steady']:13.3f}",
            flush=True,
        )
    if not args.skip_compare:
        print(
            f"\nhadar compare, 4 policies, philly-480 on sim-60gpu, 2 processes: {time_compare():.1f} s wall"
        )


if __name__ == "__main__":
    main()
