"""Wall time of the two sweeps of issue 9, each ``hadar`` command run end to end in a subprocess:

* ``hadar compare`` with every policy on philly-480 / sim-60gpu (target: under 60 s);
* ``hadar experiment load-sweep`` with its defaults: 5 policies x 8 rates x 1 seed, 600 jobs
  (target: under 10 minutes with the local process pool).

    .venv/bin/python benchmarks/bench_sweeps.py [--workers N] [--skip-load-sweep]

Prints one row per sweep with the CPU count and load average seen, since on a shared machine
wall time depends on what else runs.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

POLICIES = "hadar,hadare,gavel,tiresias,yarn-cs,hadar-legacy"
TARGETS = {"compare": 60.0, "load-sweep": 600.0}


def timed(args: list[str]) -> float:
    """Seconds ``python -m hadar ARGS`` takes; raises if it fails."""
    t0 = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "hadar", *args], check=True, capture_output=True, text=True
    )
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--workers", type=int, default=None, help="processes (default: one per CPU)"
    )
    parser.add_argument("--skip-load-sweep", action="store_true")
    a = parser.parse_args()
    workers = [] if a.workers is None else ["--workers", str(a.workers)]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        rows.append(
            (
                "compare",
                timed(["compare", "--policies", POLICIES, "--out", f"{tmp}/compare", *workers]),
            )
        )
        if not a.skip_load_sweep:
            rows.append(
                (
                    "load-sweep",
                    timed(["experiment", "load-sweep", "--out", f"{tmp}/sweep", *workers]),
                )
            )
    print(f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    print(f"{'sweep':<12} {'wall s':>8} {'target s':>9}")
    for name, wall in rows:
        print(
            f"{name:<12} {wall:8.1f} {TARGETS[name]:9.0f}{'' if wall <= TARGETS[name] else '  (over)'}"
        )


if __name__ == "__main__":
    main()
