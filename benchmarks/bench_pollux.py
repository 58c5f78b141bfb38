"""Pollux's workloads under every policy, the fit of Eq. 11, and their cost (issue 23).

    PYTHONPATH=. .venv/bin/python benchmarks/bench_pollux.py fit
    PYTHONPATH=. .venv/bin/python benchmarks/bench_pollux.py tiresias [--workloads 6]
    PYTHONPATH=. .venv/bin/python benchmarks/bench_pollux.py hadare
    PYTHONPATH=. .venv/bin/python benchmarks/bench_pollux.py table pollux_sweep.csv [...]
    PYTHONPATH=. .venv/bin/python benchmarks/bench_pollux.py sweep --out pollux_sweep.csv \
        [--policies ...] [--workloads 1-8] [--loads 0.5,1,1.5,2]

``fit``: CPU and wall seconds to fit all six applications (target <= 2 s) and each fit's
median relative error on its own points (target <= 10 %). ``tiresias``: average JCT of
Tiresias+TunedJobs on pollux-N at load 1 with 60 s rounds, with our default threshold and with
the official simulator's (16 GPU-hours), against the published 3,470 s for workload 6, and the
CPU seconds of one simulation (target <= 2 s). ``sweep``: average JCT of each policy on each
workload and load, one CSV row per run, appended as runs finish (so an interrupted sweep keeps
what it did). ``hadare``: HadarE under ``--fork-progress steps`` and ``goodput`` beside Hadar
(docs/results.md). Times are ``time.process_time`` (CPU) unless marked wall.
"""

from __future__ import annotations

import argparse
import csv
import time
from pathlib import Path

OFFICIAL_TIRESIAS_W6_S = 3470.0
"""Average JCT of Tiresias+TunedJobs on workload 6, load 1.0, 64 T4s (Pollux artifact README)."""
ARTIFACT_THRESHOLD_GPU_S = 16 * 3600.0
"""The official simulator's Tiresias queue threshold (simulator/tiresias.py: 3600 * 16)."""
POLICIES = ("hadar", "hadare", "gavel", "gavel-fifo", "gavel-makespan", "tiresias", "yarn-cs")


def fit() -> None:
    from goodput.applications import APPLICATIONS
    from goodput.traces import bundled_trace, fit_application

    traces = [bundled_trace(a) for a in APPLICATIONS]  # loaded before timing
    cpu0, wall0 = time.process_time(), time.perf_counter()
    print("| application | points | median error | max error | CPU s |")
    print("|---|---:|---:|---:|---:|")
    for t in traces:
        c = time.process_time()
        r = fit_application(t)
        print(
            f"| {t.name} | {r.num_points} | {r.median_rel_error:.1%} | {r.max_rel_error:.1%} "
            f"| {time.process_time() - c:.2f} |"
        )
    print(
        f"all six: {time.process_time() - cpu0:.2f} CPU s, {time.perf_counter() - wall0:.2f} wall s"
    )


def tiresias(workloads: list[int]) -> None:
    from hadar.api import simulate

    print("| workload | threshold | avg JCT (s) | vs 3,470 s | CPU s |")
    print("|---|---:|---:|---:|---:|")
    for n in workloads:
        for threshold in (None, ARTIFACT_THRESHOLD_GPU_S):
            opts = None if threshold is None else {"threshold": str(threshold)}
            c = time.process_time()
            sim = simulate(
                "pollux-64t4", f"pollux-{n}", "tiresias", round_s=60.0, policy_options=opts
            )
            jct = sim.summary["avg_jct_s"]
            ratio = f"{jct / OFFICIAL_TIRESIAS_W6_S - 1:+.1%}" if n == 6 else ""
            label = "3,250 (default)" if threshold is None else f"{threshold:,.0f} (artifact)"
            print(
                f"| pollux-{n} | {label} | {jct:,.0f} | {ratio} | {time.process_time() - c:.2f} |"
            )


def sweep(out: Path, policies: list[str], workloads: list[int], loads: list[float]) -> None:
    from hadar.api import simulate
    from hadar.workloads.pollux import workload_at_load

    new = not out.exists()
    with out.open("a", newline="") as f:
        w = csv.writer(f)
        if new:
            w.writerow(["policy", "workload", "load", "jobs", "completed", "avg_jct_s", "cpu_s"])
        for load in loads:
            for n in workloads:
                name = workload_at_load(f"pollux-{n}", load)
                for policy in policies:
                    c = time.process_time()
                    s = simulate("pollux-64t4", name, policy, round_s=60.0).summary
                    w.writerow(
                        [
                            policy,
                            n,
                            load,
                            s["jobs"],
                            s["completed"],
                            round(s["avg_jct_s"], 1),
                            round(time.process_time() - c, 2),
                        ]
                    )
                    f.flush()


def hadare() -> None:
    """HadarE under both fork accountings, beside Hadar: the paper's mixes on its two 5-node
    clusters (360 s slots), philly-480 on sim-60gpu (360 s) and pollux-6 on pollux-64t4 (60 s).
    ``step sum / target``: the steps the paper's accounting credited over the progress that
    counted, averaged over the jobs (1.00 when nothing was bounded)."""
    from hadar.api import simulate

    scenarios = [
        (c, m, 360.0)
        for c in ("aws-5node", "lab-5node")
        for m in ("M-1", "M-3", "M-4", "M-5", "M-8", "M-10", "M-12")
    ]
    scenarios += [("sim-60gpu", "philly-480", 360.0), ("pollux-64t4", "pollux-6", 60.0)]
    print(
        "| cluster | workload | Hadar TTD | HadarE TTD steps | HadarE TTD goodput | change "
        "| HadarE avg JCT steps | goodput | step sum / target (max) |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for cluster, workload, round_s in scenarios:
        base = simulate(cluster, workload, "hadar", round_s=round_s).summary
        runs = {
            mode: simulate(cluster, workload, "hadare", round_s=round_s, fork_progress=mode)
            for mode in ("steps", "goodput")
        }
        st, gp = runs["steps"].summary, runs["goodput"].summary
        ratio = runs["goodput"].jobs.step_sum / runs["goodput"].jobs.target
        print(
            f"| {cluster} | {workload} | {base['ttd_s']:,.0f} | {st['ttd_s']:,.0f} | "
            f"{gp['ttd_s']:,.0f} | {gp['ttd_s'] / st['ttd_s'] - 1:+.1%} | {st['avg_jct_s']:,.0f} | "
            f"{gp['avg_jct_s']:,.0f} | {ratio.mean():.2f} ({ratio.max():.2f}) |",
            flush=True,
        )


def table(paths: list[Path]) -> None:
    """The sweep CSVs as one markdown table: average JCT per (load, workload) and policy."""
    import pandas as pd

    runs = pd.concat([pd.read_csv(p) for p in paths], ignore_index=True)
    runs = runs.drop_duplicates(["policy", "workload", "load"], keep="last")
    policies = [p for p in POLICIES if p in set(runs.policy)]
    print("| load | workload | " + " | ".join(policies) + " |")
    print("|---|---|" + "---:|" * len(policies))
    for (load, n), rows in runs.groupby(["load", "workload"], sort=True):
        by = dict(zip(rows.policy, rows.avg_jct_s, strict=True))
        cells = [f"{by[p]:,.0f}" if p in by else "-" for p in policies]
        print(f"| {load:g} | pollux-{n} | " + " | ".join(cells) + " |")


def _ints(text: str) -> list[int]:
    lo, _, hi = text.partition("-")
    return list(range(int(lo), int(hi or lo) + 1))


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("what", choices=("fit", "tiresias", "sweep", "hadare", "table"))
    p.add_argument("csv", nargs="*", type=Path, help="sweep CSVs (table)")
    p.add_argument("--workloads", default="1-8")
    p.add_argument("--loads", default="0.5,1,1.5,2")
    p.add_argument("--policies", default=",".join(POLICIES))
    p.add_argument("--out", type=Path, default=Path("pollux_sweep.csv"))
    a = p.parse_args()
    if a.what == "fit":
        fit()
    elif a.what == "table":
        table(a.csv)
    elif a.what == "hadare":
        hadare()
    elif a.what == "tiresias":
        tiresias(_ints(a.workloads))
    else:
        sweep(
            a.out, a.policies.split(","), _ints(a.workloads), [float(x) for x in a.loads.split(",")]
        )


if __name__ == "__main__":
    main()
