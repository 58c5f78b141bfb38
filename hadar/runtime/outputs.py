"""A run directory's reports, rebuilt from its durable state (journal, tracker, events) so that
``hadar report RUNDIR`` gives the same files after a crash: rounds.csv, jobs.csv, summary.json,
nodes_by_round.png (which job ran where, like the paper's Fig. 6) and cru_by_round.png."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from hadar.extras import plots_missing_note
from hadar.io import write_csv, write_json
from hadar.runtime.config import RunConfig, load_config
from hadar.runtime.history import copy_records
from hadar.runtime.journal import EventLog, Journal
from tracker.tracker import JobTracker


def collect(
    rundir: Path,
) -> tuple[RunConfig, list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    """(config, round rows, job rows, summary) of a run directory."""
    cfg = load_config(rundir)
    journal = Journal(rundir / "journal.sqlite")
    tracker = JobTracker.open(rundir / "tracker.sqlite", rundir / "checkpoints")
    try:
        rounds = _rounds(cfg, journal, tracker)
        events = EventLog(rundir / "events.jsonl").read()
        jobs = _jobs(cfg, journal, tracker, events, rounds)
    finally:
        tracker.close()
        journal.close()
    done = [j for j in jobs if j["finish"] is not None]
    busy = sum(r["busy_s"] for r in rounds)
    avail = sum(r["nodes_up"] * r["duration"] for r in rounds)
    overheads = [r["overhead_s"] for r in rounds if r["overhead_s"] is not None]
    coordination = [r["coordination_s"] for r in rounds if r["coordination_s"] is not None]
    summary = {
        "policy": cfg.policy,
        "cluster": _cluster_name(events, cfg.cluster),
        "cluster_file": cfg.cluster,
        "workload": cfg.workload,
        "size": cfg.size,
        "slot_s": cfg.slot_s,
        "jobs": len(jobs),
        "completed": len(done),
        "ttd_s": max((j["finish"] for j in done), default=None),
        "avg_jct_s": float(np.mean([j["jct"] for j in done])) if done else None,
        "cru": busy / avail if avail > 0 else 0.0,
        "rounds": len(rounds),
        "failures": sum(r["failures"] for r in rounds),
        "avg_decision_s": float(np.mean([r["decision_s"] for r in rounds])) if rounds else None,
        "avg_overhead_s": float(np.mean(overheads)) if overheads else None,
        "avg_coordination_s": float(np.mean(coordination)) if coordination else None,
        "quality": {
            str(j["id"]): {"metric": j["metric"], "value": j["metric_value"]} for j in jobs
        },
        "estimated_cells": _last_start(events).get("estimated_cells", []),
    }
    return cfg, rounds, jobs, summary


def _rounds(cfg: RunConfig, journal: Journal, tracker: JobTracker) -> list[dict[str, Any]]:
    out = []
    for row in journal.rounds():
        if row.status != "closed":
            continue
        copies = copy_records(row, tracker)
        duration = max(1e-9, (row.ended or row.started) - row.started)
        nodes_up = len(row.timings.get("nodes_up") or {c["node"] for c in copies}) or 1
        busy = sum(min(float(c["wall_s"]), duration) for c in copies)
        out.append(
            {
                "round": row.round,
                "attempt": row.attempt,
                "start": row.started - cfg.started_at,
                "duration": duration,
                "nodes_up": nodes_up,
                "copies": len(copies),
                "failures": sum(c["kind"] not in ("ok",) for c in copies),
                "busy_s": busy,
                "cru": busy / (nodes_up * duration),
                "decision_s": row.decision_s,
                "overhead_s": row.timings.get("overhead_s"),
                "coordination_s": row.timings.get("coordination_s"),
                "placements": {c["node"]: c["job"] for c in copies if c["kind"] == "ok"},
            }
        )
    return out


def _jobs(
    cfg: RunConfig,
    journal: Journal,
    tracker: JobTracker,
    events: list[dict[str, Any]],
    rounds: list[dict[str, Any]],
) -> list[dict[str, Any]]:
    finish: dict[int, float] = {}
    start: dict[int, float] = {}
    ended = {r["round"]: r["start"] + r["duration"] for r in rounds}
    for r in rounds:
        for job in r["placements"].values():
            start.setdefault(job, r["start"])
    for e in events:
        if (
            e.get("event") == "aggregation"
            and e.get("completed")
            and e["job"] not in finish
            and e["round"] in ended
        ):
            finish[e["job"]] = ended[e["round"]]
    metrics = {e["job"]: e.get("metric") for e in events if e.get("event") == "evaluation"}
    arrivals = _arrivals(events)
    out = []
    for st in tracker.jobs():
        m = metrics.get(st.job_id) or {}
        f = finish.get(st.job_id) if st.completed else None
        arrival = arrivals.get(st.job_id, 0.0)
        out.append(
            {
                "id": st.job_id,
                "model": st.model,
                "target_steps": st.target_steps,
                "steps_done": st.steps_done,
                "arrival": arrival,
                "start": start.get(st.job_id),
                "finish": f,
                "jct": None if f is None else f - arrival,
                "queueing_delay": None
                if start.get(st.job_id) is None
                else start[st.job_id] - arrival,
                "completed": st.completed,
                "metric": m.get("name"),
                "metric_value": m.get("value"),
            }
        )
    return out


ROUND_COLUMNS = [
    "round",
    "attempt",
    "start",
    "duration",
    "nodes_up",
    "copies",
    "failures",
    "busy_s",
    "cru",
    "decision_s",
    "coordination_s",
    "overhead_s",
]
JOB_COLUMNS = [
    "id",
    "model",
    "target_steps",
    "steps_done",
    "arrival",
    "start",
    "finish",
    "jct",
    "queueing_delay",
    "completed",
    "metric",
    "metric_value",
]
CSV_DECIMALS = 4
"""Floats in a real run's CSV files are rounded to this many decimals."""


def _cluster_name(events: list[dict[str, Any]], cluster_file: str) -> str:
    """The cluster's name (as a simulation's summary has it), from the last ``start`` event."""
    return str(_last_start(events).get("cluster") or Path(cluster_file).stem)


def _arrivals(events: list[dict[str, Any]]) -> dict[int, float]:
    """Each job's arrival second (from the run's start), as the last ``start`` event lists them
    (0 for jobs it does not list, and for runs from before arrivals were honoured)."""
    return {int(j): float(a) for j, a in (_last_start(events).get("arrivals") or {}).items()}


def _last_start(events: list[dict[str, Any]]) -> dict[str, Any]:
    """The last ``start`` event (each session of the run emits one), or {} if none."""
    return next((e for e in reversed(events) if e.get("event") == "start"), {})


def write_report(rundir: Path) -> dict[str, Any]:
    """Write rounds.csv, jobs.csv, summary.json and the two charts; returns the summary."""
    cfg, rounds, jobs, summary = collect(rundir)
    write_csv(rundir / "rounds.csv", rounds, ROUND_COLUMNS, decimals=CSV_DECIMALS)
    write_csv(rundir / "jobs.csv", jobs, JOB_COLUMNS, decimals=CSV_DECIMALS)
    write_json(rundir / "summary.json", summary)
    if plots_missing_note("charts") is None:  # else print_run_summary says why there are none
        _charts(rundir, cfg, rounds)
    return summary


def _charts(rundir: Path, cfg: RunConfig, rounds: list[dict[str, Any]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    nodes = sorted({n for r in rounds for n in r["placements"]})
    if rounds and nodes:
        fig, ax = plt.subplots(figsize=(max(6, 0.5 * len(rounds) + 2), 0.6 * len(nodes) + 1.5))
        cmap = plt.get_cmap("tab20")
        for r in rounds:
            for y, node in enumerate(nodes):
                job = r["placements"].get(node)
                if job is None:
                    continue
                ax.barh(y, r["duration"], left=r["start"], color=cmap(job % 20), edgecolor="white")
                ax.text(
                    r["start"] + r["duration"] / 2,
                    y,
                    f"J{job}",
                    ha="center",
                    va="center",
                    fontsize=7,
                )
        ax.set_yticks(range(len(nodes)), nodes)
        ax.set_xlabel("time since start (s)")
        ax.set_title(f"{cfg.policy}: which job ran on which node, round by round")
        fig.tight_layout()
        fig.savefig(rundir / "nodes_by_round.png", dpi=110)
        plt.close(fig)
    fig, ax = plt.subplots(figsize=(7, 3.2))
    ax.bar([r["round"] for r in rounds], [r["cru"] for r in rounds], color="tab:blue")
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("round")
    ax.set_ylabel("CRU")
    ax.set_title(f"{cfg.policy}: cluster resource utilisation per round")
    fig.tight_layout()
    fig.savefig(rundir / "cru_by_round.png", dpi=110)
    plt.close(fig)
