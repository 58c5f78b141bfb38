"""Write a run's records: summary.json, jobs.csv, rounds.csv, placements.csv."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path
from typing import Any

from hadar.simulator.records import SimulationResult

JOB_COLUMNS = ["id", "type", "gpus", "arrival", "start", "finish", "jct", "queueing_delay", "restarts"]
ROUND_COLUMNS = ["round", "time", "duration", "busy_gpus", "busy_gpu_seconds", "running_jobs", "queued_jobs",
                 "decision_seconds"]


def write_result(result: SimulationResult, summary: dict[str, Any], out: str | Path) -> Path:
    """Write all files into ``out`` (created if needed); each file is replaced atomically."""
    d = Path(out)
    d.mkdir(parents=True, exist_ok=True)
    _atomic(d / "summary.json", json.dumps({**summary, "config": result.config}, indent=2) + "\n")
    _write_csv(d / "jobs.csv", JOB_COLUMNS, (
        [j.job_id, j.job_type, j.num_gpus, j.arrival, j.start, j.finish, j.jct, j.queueing_delay, j.restarts]
        for j in result.jobs
    ))
    _write_csv(d / "rounds.csv", ROUND_COLUMNS, (
        [r.index, r.time, r.duration, r.busy_gpus, r.busy_gpu_seconds, r.running_jobs, r.queued_jobs,
         r.decision_seconds]
        for r in result.rounds
    ))
    _write_csv(d / "placements.csv", ["round", "time", "job", "copy", "node", "gpu_type", "count"], (
        [p.round_index, p.time, p.job_id, p.copy, p.node, p.gpu_type, p.count] for p in result.placements
    ))
    return d


def _write_csv(path: Path, header: list[str], rows) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    with tmp.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        for row in rows:
            w.writerow(["" if v is None else (round(v, 6) if isinstance(v, float) else v) for v in row])
    os.replace(tmp, path)


def _atomic(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
