"""A simulation's records as tables (pandas), and the files a run writes: summary.json,
jobs.csv, rounds.csv, placements.csv. One schema for the files and the Python API."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from hadar.core.io import replaced_together, write_frame, write_json
from hadar.outputs_schema import JOB_COLUMNS, ROUND_COLUMNS
from hadar.simulator.records import SimulationResult

PLACEMENT_COLUMNS = ["round", "time", "job", "copy", "node", "gpu_type", "count"]
ELASTIC_PLACEMENT_COLUMNS = [
    "gpus",
    "batch_size",
    "throughput",
    "efficiency",
    "goodput",
    "estimated",
    "after",
]
"""Appended to ``placements.csv`` (docs/outputs.md): the run's GPUs, for runs of elastic jobs
with efficiency data their batch size, samples/s, efficiency and goodput (empty otherwise),
whether its speed was estimated, and for a refill the job it followed on those GPUs."""
ELASTIC_ROUND_COLUMNS = ["goodput", "efficiency"]
"""Appended to ``rounds.csv``: the elastic runs' summed goodput and mean efficiency."""
PROGRESS_JOB_COLUMNS = ["target", "step_sum"]
"""Appended to ``jobs.csv``: the job's progress target (steps, or samples at its initial batch)
and the progress the steps accounting credited it (each forked copy's own progress in full);
above the target when goodput accounting bounded its forks (docs/elastic.md)."""
RUN_FILES = ("summary.json", "jobs.csv", "rounds.csv", "placements.csv")
"""The files a simulation writes (:func:`write_result`): the summary, then a CSV per table of
:func:`result_frames`."""
CSV_DECIMALS = 6
"""Floats in the CSV files are rounded to this many decimals (the frames keep full precision)."""


def result_frames(result: SimulationResult) -> dict[str, pd.DataFrame]:
    """``{"jobs", "rounds", "placements"}``: one row per job, round and placement (the CSV columns)."""
    jobs = pd.DataFrame(
        [
            [
                j.job_id,
                j.job_type,
                j.num_gpus,
                j.arrival,
                j.start,
                j.finish,
                j.jct,
                j.queueing_delay,
                j.restarts,
                j.total_steps,
                j.step_sum,
            ]
            for j in result.jobs
        ],
        columns=JOB_COLUMNS + PROGRESS_JOB_COLUMNS,
    )
    rounds = pd.DataFrame(
        [
            [
                r.index,
                r.time,
                r.duration,
                r.busy_gpus,
                r.busy_gpu_seconds,
                r.busy_nodes,
                r.busy_node_seconds,
                r.running_jobs,
                r.queued_jobs,
                r.decision_seconds,
                r.goodput,
                r.efficiency,
            ]
            for r in result.rounds
        ],
        columns=ROUND_COLUMNS + ELASTIC_ROUND_COLUMNS,
    )
    placements = pd.DataFrame(
        [
            [
                p.round_index,
                p.time,
                p.job_id,
                p.copy,
                p.node,
                p.gpu_type,
                p.count,
                p.gpus,
                p.batch_size,
                p.throughput,
                p.efficiency,
                p.goodput,
                p.estimated,
                p.after,
            ]
            for p in result.placements
        ],
        columns=PLACEMENT_COLUMNS + ELASTIC_PLACEMENT_COLUMNS,
    )
    for frame, floats in (
        (jobs, JOB_COLUMNS[3:8] + PROGRESS_JOB_COLUMNS),
        (
            rounds,
            ["time", "duration", "busy_gpu_seconds", "busy_node_seconds", "decision_seconds"]
            + ELASTIC_ROUND_COLUMNS,
        ),
        (placements, ["time", "throughput", "efficiency", "goodput"]),
    ):
        frame[floats] = frame[floats].astype(float)  # None -> NaN, one dtype per column
    for column in ("batch_size", "after"):
        placements[column] = placements[column].astype("Int64")
    return {"jobs": jobs, "rounds": rounds, "placements": placements}


def write_result(
    result: SimulationResult,
    summary: dict[str, Any],
    out: str | Path,
    frames: dict[str, pd.DataFrame] | None = None,
) -> Path:
    """Write :data:`RUN_FILES` into ``out`` (created if needed) as one save: they replace the
    previous ones all together or not at all (:func:`hadar.core.io.replaced_together`; a file
    that cannot be written or replaced is a one-line InputError naming it)."""
    d = Path(out)
    tables = frames or result_frames(result)
    with replaced_together(d, RUN_FILES) as stage:
        write_json(stage / RUN_FILES[0], {**summary, "config": result.config})
        for name, frame in tables.items():
            write_frame(stage / f"{name}.csv", frame, decimals=CSV_DECIMALS)
    return d
