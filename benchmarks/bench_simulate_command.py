"""The everyday command's wall time against the simulation it runs (issue 30): ``hadar
simulate`` on philly-480 / sim-60gpu, end to end in a subprocess (interpreter start, imports,
simulation, CSV/JSON files, printing), with and without ``--figures``, and the simulation alone
(``hadar.api.simulate`` timed inside one process after its imports).

    .venv/bin/python benchmarks/bench_simulate_command.py [--repeat 3] [--workload philly-480]

Prints a Markdown table (median of the repeats, and the spread) with the load average, since on
a shared machine wall time depends on what else runs; docs/results.md keeps the figures.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

SIMULATION_ALONE = """
import sys, time
from hadar import api
t = time.perf_counter()
api.simulate("sim-60gpu", sys.argv[1], "hadar")
print(time.perf_counter() - t)
"""


def command(args: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "hadar", *args], check=True, capture_output=True, text=True
    )
    return time.perf_counter() - t0


def simulation_alone(workload: str) -> float:
    res = subprocess.run(
        [sys.executable, "-c", SIMULATION_ALONE, workload],
        check=True,
        capture_output=True,
        text=True,
    )
    return float(res.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--workload", default="philly-480")
    a = p.parse_args()
    rows: dict[str, list[float]] = {
        "simulation alone (api.simulate, imports excluded)": [],
        "hadar simulate (default: no figures)": [],
        "hadar simulate --figures": [],
        "hadar --version (interpreter + CLI imports)": [],
    }
    names = list(rows)
    with tempfile.TemporaryDirectory() as tmp:
        base = ["simulate", "--workload", a.workload, "--no-progress", "--out", f"{tmp}/o"]
        for _ in range(a.repeat):  # interleaved, so a load spike hits every row alike
            rows[names[0]].append(simulation_alone(a.workload))
            rows[names[1]].append(command(base))
            rows[names[2]].append(command([*base, "--figures"]))
            rows[names[3]].append(command(["--version"]))
    sim = statistics.median(rows[names[0]])
    print(
        f"{a.workload} on sim-60gpu, policy hadar; {a.repeat} runs each; "
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}\n"
    )
    print("| what | median s | min-max s | vs the simulation |")
    print("|---|---:|---:|---:|")
    for name, times in rows.items():
        med = statistics.median(times)
        print(f"| {name} | {med:.2f} | {min(times):.2f}-{max(times):.2f} | {med / sim:.2f}x |")


if __name__ == "__main__":
    main()
