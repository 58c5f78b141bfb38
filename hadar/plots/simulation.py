"""The figure set of one simulated run, drawn from the files the simulator wrote (jobs.csv,
rounds.csv, placements.csv): completion CDF, GPU occupancy by job, GPU use over time."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from hadar.core.cluster import Cluster
from hadar.outputs_schema import RUN_FIGURES
from hadar.plots.figures import completion_cdf, occupancy_chart, utilisation_chart


def scenario_text(workload: str, cluster: str, seed: int) -> str:
    """What every title names: the workload, the cluster and the seed."""
    return f"{workload} on {cluster}, seed {seed}"


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as fh:
        return list(csv.DictReader(fh))


def finish_times(run_dir: str | Path) -> tuple[list[float], int]:
    """Completion times (seconds from the first arrival) of the finished jobs, and the job count."""
    jobs = _rows(Path(run_dir) / "jobs.csv")
    first = min((float(r["arrival"]) for r in jobs), default=0.0)
    return [float(r["finish"]) - first for r in jobs if r["finish"]], len(jobs)


def placements(run_dir: str | Path) -> list[tuple[int, int, str, str, int]]:
    """``(round, job, node, gpu type, count)`` records of placements.csv."""
    return [
        (int(r["round"]), int(r["job"]), r["node"], r["gpu_type"], int(r["count"]))
        for r in _rows(Path(run_dir) / "placements.csv")
    ]


def round_times(run_dir: str | Path) -> list[tuple[int, float, float]]:
    """``(round, start s, duration s)`` of rounds.csv."""
    return [
        (int(r["round"]), float(r["time"]), float(r["duration"]))
        for r in _rows(Path(run_dir) / "rounds.csv")
    ]


def job_classes(run_dir: str | Path) -> dict[int, str]:
    """Each job's class: its model without the batch size (``ResNet-50 (batch size 64)`` ->
    ``ResNet-50``), from jobs.csv."""
    return {int(r["id"]): r["type"].split(" (")[0] for r in _rows(Path(run_dir) / "jobs.csv")}


def draw_run(
    run_dir: str | Path, cluster: Cluster, summary: dict[str, Any], scenario: str
) -> list[Path]:
    """``completion.png``, ``occupancy.png`` and ``utilisation.png`` in ``run_dir``."""
    d = Path(run_dir)
    policy = summary["policy"]
    finish, total = finish_times(d)
    nodes = [(n.name, dict(n.gpus)) for n in cluster.nodes]
    return [
        completion_cdf(
            {policy: finish},
            {policy: total},
            d / RUN_FIGURES[0],
            title=f"Jobs completed over time: {policy}, {scenario}",
        ),
        occupancy_chart(
            nodes,
            placements(d),
            round_times(d),
            job_classes(d),
            d / RUN_FIGURES[1],
            title=f"GPU occupancy: {policy}, {scenario}",
        ),
        utilisation_chart(
            _rows(d / "rounds.csv"),
            cluster.total_gpus,
            d / RUN_FIGURES[2],
            title=f"GPU use and jobs over time: {policy}, {scenario}",
        ),
    ]
