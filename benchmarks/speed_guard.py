"""Speed guard: Hadar rounds' CPU time as a ratio to a fixed reference computation, against the
committed baseline (``scripts/check`` runs it).

    PYTHONPATH=. .venv/bin/python benchmarks/speed_guard.py [--check | --write] [--repeat 5]

A busy machine slows every computation of a process alike, so the guard never compares seconds:
it times a fixed reference computation (pure Python and small NumPy operations, the mix a round
spends its time on) and each guarded round interleaved, in this process, in CPU seconds
(``time.process_time``), and compares ``min(round) / min(reference)`` with the ratio recorded in
``speed_guard.json``. ``--check`` exits 1 when a ratio grew more than ``FACTOR`` times over its
baseline (a regression like the 4.5x one of the tail guard and type matching); ``--write``
records the ratios measured now (after a deliberate change, with the reason in the commit).
About 5 CPU seconds.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

BASELINE = Path(__file__).with_name("speed_guard.json")
FACTOR = 2.0
"""A round may grow to this many times its baseline ratio before the guard fails."""

ROUNDS: dict[str, tuple[int, int]] = {
    "cold round, 2,048 jobs, sim-60gpu": (2048, 0),
    "cold round, 5,000 jobs, 256 x 8 GPUs": (5000, 256),
}
"""Guarded rounds: every job queued on an empty cluster (``bench_hadar_decision.cold_round``),
jobs and nodes (0: sim-60gpu) as ``bench_scale.py`` builds them."""


def reference() -> None:
    """The fixed reference computation: sorting, dicts and tuples, small NumPy reductions."""
    rng = random.Random(0)
    values = [rng.random() for _ in range(50_000)]
    table: dict[tuple[int, int], float] = {}
    for i, v in enumerate(sorted(values)):
        table[(i % 97, i % 89)] = table.get((i % 97, i % 89), 0.0) + v
    best = max(table.items(), key=lambda kv: (kv[1], kv[0]))
    free = np.arange(180, dtype=np.int64).reshape(60, 3) % 5
    for i in range(8000):
        free[i % 60, i % 3] = (free[i % 60, i % 3] + 1) % 5
        int(free.sum())
        np.flatnonzero(free[:, i % 3] > best[0][0] % 5)


def round_timer(jobs: int, nodes: int) -> Callable[[], None]:
    """A function deciding one cold round of ``jobs`` on ``nodes`` x 8 GPUs by a fresh policy."""
    sys.path.insert(0, str(Path(__file__).parent))
    from bench_hadar_decision import cold_round, jobs_for

    from estimators.throughput import GavelThroughputTable
    from hadar.core.cluster import Cluster, Node
    from hadar.core.cluster_config import load_cluster
    from hadar.scheduler import HadarPolicy

    types = ("v100", "p100", "k80")
    table = GavelThroughputTable.bundled()
    cluster = (
        load_cluster("sim-60gpu")
        if nodes == 0
        else Cluster(
            f"gen-{nodes}x8", tuple(Node(f"n{i}", {types[i % 3]: 8}) for i in range(nodes))
        )
    )
    ctx = cold_round(cluster, jobs_for(jobs, table), table)

    def run() -> None:
        HadarPolicy().decide(ctx)

    return run


def cpu_seconds(fn: Callable[[], None]) -> float:
    c0 = time.process_time()
    fn()
    return time.process_time() - c0


def measure(repeat: int) -> dict[str, float]:
    """Each guarded round's ratio ``min(round CPU s) / min(reference CPU s)``, interleaved."""
    timers = {name: round_timer(*spec) for name, spec in ROUNDS.items()}
    for fn in (reference, *timers.values()):  # warm: imports, first-use caches
        fn()
    ref: list[float] = []
    times: dict[str, list[float]] = {name: [] for name in timers}
    for _ in range(repeat):
        for name, fn in timers.items():
            ref.append(cpu_seconds(reference))
            times[name].append(cpu_seconds(fn))
    base = min(ref)
    return {name: min(t) / base for name, t in times.items()}


def regressions(ratios: dict[str, float], baseline: dict[str, float], factor: float) -> list[str]:
    """One line per guarded round whose ratio grew more than ``factor`` times over its baseline,
    or that has no baseline."""
    out = []
    for name, ratio in ratios.items():
        if name not in baseline:
            out.append(f"{name}: no baseline in {BASELINE.name} (run --write)")
        elif ratio > factor * baseline[name]:
            out.append(
                f"{name}: {ratio:.2f} x the reference, {ratio / baseline[name]:.2f} x its "
                f"baseline {baseline[name]:.2f} (limit {factor:g} x)"
            )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    group = ap.add_mutually_exclusive_group()
    group.add_argument("--check", action="store_true", help="exit 1 on a regression")
    group.add_argument("--write", action="store_true", help=f"record the ratios in {BASELINE.name}")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    ratios = measure(args.repeat)
    baseline: dict[str, float] = json.loads(BASELINE.read_text()) if BASELINE.exists() else {}
    for name, ratio in ratios.items():
        old = baseline.get(name)
        versus = f"  baseline {old:.2f} ({ratio / old:.2f} x)" if old else ""
        print(f"{name:<40} {ratio:6.2f} x the reference{versus}")
    if args.write:
        BASELINE.write_text(json.dumps(ratios, indent=1, sort_keys=True) + "\n")
        print(f"wrote {BASELINE}")
    elif args.check:
        bad = regressions(ratios, baseline, FACTOR)
        if bad:
            print("speed guard: slower than the committed baseline:", file=sys.stderr)
            for line in bad:
                print(f"  {line}", file=sys.stderr)
            sys.exit(1)


if __name__ == "__main__":
    main()
