"""Pollux's whole decision at scale: 2,000 jobs queued on 1,024 T4s (256 nodes x 4).

    PYTHONPATH=. .venv/bin/python benchmarks/bench_pollux_scale.py [--jobs 2000] [--nodes 256]
        [--rounds 4] [--policy pollux]

The jobs are the first ``--jobs`` rows of Pollux's eight load-2.0 workloads (2,560 jobs in all,
the bundled data), every one arriving at 0 so that all are present at the first decision; the
cluster is ``--nodes`` nodes of 4 T4 (``pollux-64t4``'s node, repeated). Each whole decision
(agent fits, batch search, allocation, placement) is timed as the round loop calls it, in CPU
seconds (``decision_cpu.decision_times``). Targets: <= 1 s per decision at 1,024 GPUs / 2,000
jobs.
"""

from __future__ import annotations

import argparse
import csv
import io
import sys
import tempfile
from importlib import resources
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).parent))

from decision_cpu import decision_times, print_times  # noqa: E402


def write_inputs(folder: Path, jobs: int, nodes: int) -> tuple[Path, Path]:
    """The cluster file and the workload CSV of the benchmark, in ``folder``."""
    data = resources.files("hadar.workloads").joinpath("data/pollux/load_2_0")
    rows: list[dict[str, str]] = []
    for number in range(1, 9):
        text = data.joinpath(f"workload-{number}.csv").read_text()
        rows.extend(csv.DictReader(io.StringIO(text)))
    if jobs > len(rows):
        raise SystemExit(f"--jobs: at most {len(rows)} (the eight load-2.0 workloads)")
    out = io.StringIO()
    writer = csv.DictWriter(
        out, fieldnames=["name", "time", "application", "num_replicas", "batch_size"]
    )
    writer.writeheader()
    for i, row in enumerate(rows[:jobs]):
        writer.writerow({**row, "name": f"{row['application']}-{i}", "time": "0"})
    workload = folder / "jobs.csv"
    workload.write_text(out.getvalue())
    cluster = folder / "cluster.yaml"
    cluster.write_text(
        yaml.safe_dump(
            {
                "name": f"t4-{nodes}x4",
                "nodes": [{"name": "n", "count": nodes, "gpus": {"t4": 4}}],
            }
        )
    )
    return cluster, workload


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=2000)
    ap.add_argument("--nodes", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--policy", default="pollux")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cluster, workload = write_inputs(Path(tmp), args.jobs, args.nodes)
        times, digest = decision_times(args.policy, str(cluster), str(workload), 0, args.rounds)
    print_times(f"{args.policy}: {args.jobs} jobs on {args.nodes * 4} T4s", times, digest)


if __name__ == "__main__":
    main()
