"""A run directory's reports, rebuilt from its durable state (``state.sqlite``: journal, tracker, events) so that
``hadar report RUNDIR`` gives the same files after a crash: rounds.csv, jobs.csv, summary.json,
nodes_by_round.png (which job ran where, like the paper's Fig. 6) and cru_by_round.png."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from hadar.core.extras import plots_missing_note
from hadar.core.io import replaced_together, write_csv, write_figure, write_json
from hadar.core.state_db import reading_state
from hadar.matplotlib_home import load_matplotlib
from hadar.outputs_schema import JOB_COLUMNS as COMMON_JOB_COLUMNS
from hadar.outputs_schema import ROUND_COLUMNS as COMMON_ROUND_COLUMNS
from hadar.outputs_schema import completion_metrics, decision_metrics, utilisation
from hadar.runtime.config import RunConfig, load_config
from hadar.runtime.history import copy_records
from hadar.runtime.journal import EventLog, Journal, check_state_files
from hadar.runtime.state_file import EVENTS_FILE, reading_run_state
from tracker.tracker import JobTracker


def collect(
    rundir: Path,
) -> tuple[RunConfig, list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
    """(config, round rows, job rows, summary) of a run directory, in the schema a simulation
    writes (:mod:`hadar.outputs_schema`) plus the columns and keys only a real run has."""
    cfg = load_config(rundir)
    # read-only and unlocked: `hadar report` may read a run that is going on
    with reading_run_state(rundir) as db, reading_state(db.path):
        journal = Journal(db)
        tracker = JobTracker.open_read_only(db, rundir / "checkpoints")
        check_state_files(journal, tracker.last_closed_round(), db.path)
        events = EventLog(rundir / EVENTS_FILE, db).read(("start", "evaluation"))
        rounds = _rounds(cfg, journal, tracker)
        jobs = _jobs(tracker, events, rounds)
    _count_queued(rounds, jobs)
    active = sum(r["duration"] for r in rounds)
    gpu_s = sum(r["gpus_up"] * r["duration"] for r in rounds)
    node_s = sum(r["nodes_up"] * r["duration"] for r in rounds)
    overheads = [r["overhead_seconds"] for r in rounds if r["overhead_seconds"] is not None]
    coordination = [
        r["coordination_seconds"] for r in rounds if r["coordination_seconds"] is not None
    ]
    summary = {
        "policy": cfg.policy,
        "cluster": _cluster_name(events, cfg.cluster),
        **completion_metrics(
            [j["arrival"] for j in jobs], [j["start"] for j in jobs], [j["finish"] for j in jobs]
        ),
        "gru": utilisation(sum(r["busy_gpu_seconds"] for r in rounds), gpu_s),
        "cru": utilisation(sum(r["busy_node_seconds"] for r in rounds), node_s),
        "startup_gru": utilisation(sum(r["startup_gpu_seconds"] for r in rounds), gpu_s),
        "startup_cru": utilisation(sum(r["startup_node_seconds"] for r in rounds), node_s),
        "restarts_per_job": float(np.mean([j["restarts"] for j in jobs])) if jobs else 0.0,
        "rounds": len(rounds),
        **decision_metrics([r["decision_seconds"] for r in rounds]),
        "estimated_cells": _last_start(events).get("estimated_cells", []),
        # only a real run has these
        "cluster_file": cfg.cluster,
        "workload": cfg.workload,
        "size": cfg.size,
        "round_s": cfg.round_s,
        "active_s": active,
        "failures": sum(r["failures"] for r in rounds),
        "avg_overhead_s": float(np.mean(overheads)) if overheads else None,
        "avg_coordination_s": float(np.mean(coordination)) if coordination else None,
        "quality": {
            str(j["id"]): {"metric": j["metric"], "value": j["metric_value"]} for j in jobs
        },
    }
    return cfg, rounds, jobs, summary


def round_use(copies: list[dict[str, Any]], duration: float) -> dict[str, Any]:
    """What a round's copies held, split into training and the rest: a copy holds its GPUs and
    node for its wall time (at most ``duration``), of which ``train_s`` trained (the first step
    to the last) and the remainder was worker start-up (process start, model and checkpoint
    load, evaluation) or a copy that failed (it trained nothing that counted). A node's time is
    that of its longest copy. Busy (GRU, CRU) is training only; start-up is reported apart."""
    gpus_held = 0
    gpus_busy = 0
    train_gpu_s = 0.0
    held_gpu_s = 0.0
    node_train: dict[str, float] = {}
    node_held: dict[str, float] = {}
    spans: dict[str, dict[str, Any]] = {}
    for c in copies:
        held = min(float(c["wall_s"]), duration)
        train = min(float(c.get("train_s") or 0.0), held) if c["kind"] == "ok" else 0.0
        gpus = sum(n for per in c["placement"].values() for n in per.values())
        gpus_held += gpus
        gpus_busy += gpus if train > 0 else 0
        train_gpu_s += gpus * train
        held_gpu_s += gpus * held
        for node in c["placement"]:
            node_train[node] = max(node_train.get(node, 0.0), train)
            node_held[node] = max(node_held.get(node, 0.0), held)
            if held >= spans.get(node, {}).get("held", -1.0):
                spans[node] = {
                    "job": c["job"],
                    "held": held,
                    "train": train,
                    "steps": int(c.get("steps") or 0),
                    "ok": c["kind"] == "ok",
                }
    return {
        "held_gpus": gpus_held,
        "busy_gpus": gpus_busy,
        "busy_gpu_seconds": train_gpu_s,
        "busy_nodes": sum(1 for t in node_train.values() if t > 0),
        "busy_node_seconds": sum(node_train.values()),
        "startup_gpu_seconds": held_gpu_s - train_gpu_s,
        "startup_node_seconds": sum(node_held.values()) - sum(node_train.values()),
        "spans": spans,
    }


def _rounds(cfg: RunConfig, journal: Journal, tracker: JobTracker) -> list[dict[str, Any]]:
    out = []
    for row in journal.rounds():
        if row.status != "closed":
            continue
        copies = copy_records(row, tracker)
        duration = max(1e-9, (row.ended or row.started) - row.started)
        up = row.timings.get("nodes_up") or sorted({c["node"] for c in copies})
        gpus_up = row.timings.get("gpus_up") or {}
        use = round_use(copies, duration)
        held_gpus = use.pop("held_gpus")
        nodes_up = len(up) or 1
        # runs from before gpus_up was journalled: as many GPUs up as the copies held
        total_gpus = sum(gpus_up.values()) if gpus_up else max(1, held_gpus)
        out.append(
            {
                "round": row.round,
                "time": row.started - cfg.started_at,
                "duration": duration,
                **use,
                "running_jobs": len({c["job"] for c in copies}),
                "queued_jobs": 0,  # set by _count_queued once finishes are known
                "decision_seconds": row.decision_s,
                "attempt": row.attempt,
                "nodes_up": nodes_up,
                "gpus_up": total_gpus,
                "copies": len(copies),
                "failures": sum(c["kind"] not in ("ok",) for c in copies),
                "gru": use["busy_gpu_seconds"] / (total_gpus * duration),
                "cru": use["busy_node_seconds"] / (nodes_up * duration),
                "startup_gru": use["startup_gpu_seconds"] / (total_gpus * duration),
                "startup_cru": use["startup_node_seconds"] / (nodes_up * duration),
                "coordination_seconds": row.timings.get("coordination_s"),
                "overhead_seconds": row.timings.get("overhead_s"),
                "placements": {c["node"]: c["job"] for c in copies if c["kind"] == "ok"},
                "ok_copies": {
                    (c["job"], c["copy"]): c["placement"] for c in copies if c["kind"] == "ok"
                },
            }
        )
    return out


def _jobs(
    tracker: JobTracker,
    events: list[dict[str, Any]],
    rounds: list[dict[str, Any]],
) -> list[dict[str, Any]]:
    finish: dict[int, float] = {}
    start: dict[int, float] = {}
    ended = {r["round"]: r["time"] + r["duration"] for r in rounds}
    for r in rounds:
        for job, _copy in r["ok_copies"]:
            start.setdefault(job, r["time"])
    for r in rounds:  # the tracker's record, not the events: a kill may have lost those
        for job, res in tracker.round_summary(r["round"]).jobs.items():
            if res.completed and job not in finish:
                finish[job] = ended[r["round"]]
    metrics = {e["job"]: e.get("metric") for e in events if e.get("event") == "evaluation"}
    arrivals = _arrivals(events)
    types = {int(j): v for j, v in (_last_start(events).get("job_types") or {}).items()}
    restarts = _restarts(rounds)
    out = []
    for st in tracker.jobs():
        m = metrics.get(st.job_id) or {}
        f = finish.get(st.job_id) if st.completed else None
        arrival = arrivals.get(st.job_id, 0.0)
        began = start.get(st.job_id)
        job_type, gpus = types.get(st.job_id, [st.model, None])
        out.append(
            {
                "id": st.job_id,
                "type": job_type,
                "gpus": gpus,
                "arrival": arrival,
                "start": began,
                "finish": f,
                "jct": None if f is None else f - arrival,
                "queueing_delay": None if began is None else began - arrival,
                "restarts": restarts.get(st.job_id, 0),
                "model": st.model,
                "target_steps": st.target_steps,
                "steps_done": st.steps_done,
                "completed": st.completed,
                "metric": m.get("name"),
                "metric_value": m.get("value"),
            }
        )
    return out


def _restarts(rounds: list[dict[str, Any]]) -> dict[int, int]:
    """Rounds in which a job that had already run resumed on a placement other than its last
    round's (as a simulation counts them: a move, or a resume after a round without the job)."""
    out: dict[int, int] = {}
    previous: dict[tuple[int, int], Any] = {}
    ran: set[int] = set()
    for r in rounds:
        now: dict[tuple[int, int], Any] = r["ok_copies"]
        moved = {job for key, p in now.items() if previous.get(key) != p and (job := key[0]) in ran}
        for job in moved:
            out[job] = out.get(job, 0) + 1
        ran |= {job for job, _ in now}
        previous = now
    return out


def _count_queued(rounds: list[dict[str, Any]], jobs: list[dict[str, Any]]) -> None:
    """Each round's ``queued_jobs``: arrived, unfinished jobs that did not run in it."""
    for r in rounds:
        running = {job for job, _ in r["ok_copies"]}
        r["queued_jobs"] = sum(
            1
            for j in jobs
            if j["arrival"] <= r["time"]
            and (j["finish"] is None or j["finish"] > r["time"])
            and j["id"] not in running
        )


ROUND_COLUMNS = [
    *COMMON_ROUND_COLUMNS,
    "attempt",
    "nodes_up",
    "gpus_up",
    "copies",
    "failures",
    "gru",
    "cru",
    "startup_gpu_seconds",
    "startup_node_seconds",
    "startup_gru",
    "startup_cru",
    "coordination_seconds",
    "overhead_seconds",
]
JOB_COLUMNS = [
    *COMMON_JOB_COLUMNS,
    "model",
    "target_steps",
    "steps_done",
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


REPORT_FILES = ("rounds.csv", "jobs.csv", "summary.json")
"""A run's report tables, replaced together with its charts (:data:`REPORT_CHARTS`)."""
REPORT_CHARTS = ("nodes_by_round.png", "cru_by_round.png")


def write_report(rundir: Path) -> dict[str, Any]:
    """Write rounds.csv, jobs.csv, summary.json and the two charts as one save (they replace the
    previous report together or not at all); returns the summary."""
    cfg, rounds, jobs, summary = collect(rundir)
    rundir = rundir.resolve()  # written without following a link at any component
    charts = plots_missing_note("charts") is None  # else print_run_summary says why there are none
    names = (*REPORT_FILES, *(REPORT_CHARTS if charts else ()))
    with replaced_together(rundir, names, nofollow=True) as stage:
        write_csv(stage / "rounds.csv", rounds, ROUND_COLUMNS, decimals=CSV_DECIMALS, nofollow=True)
        write_csv(stage / "jobs.csv", jobs, JOB_COLUMNS, decimals=CSV_DECIMALS, nofollow=True)
        write_json(stage / "summary.json", summary, nofollow=True)
        if charts:
            _charts(stage, cfg, rounds, jobs)
    return summary


def _charts(
    rundir: Path, cfg: RunConfig, rounds: list[dict[str, Any]], jobs: list[dict[str, Any]]
) -> None:
    """``nodes_by_round.png`` (:func:`nodes_figure`) and ``cru_by_round.png``: CRU per round
    split the same way (solid: training, the CRU of rounds.csv; hatched on top: start-up, its
    ``startup_cru``)."""
    load_matplotlib(rundir)
    import matplotlib.pyplot as plt

    fig = nodes_figure(cfg.policy, rounds, jobs)
    if fig is not None:
        write_figure(rundir / "nodes_by_round.png", fig, dpi=110, nofollow=True)
        plt.close(fig)
    fig, ax = plt.subplots(figsize=(7, 3.2))
    x = [r["round"] for r in rounds]
    train = [r["cru"] for r in rounds]
    ax.bar(x, train, color="tab:blue", label="training")
    ax.bar(
        x,
        [r["startup_cru"] for r in rounds],
        bottom=train,
        color="tab:blue",
        alpha=0.35,
        hatch="//",
        edgecolor="white",
        label="worker start-up",
    )
    ax.set_ylim(0, 1.05)
    ax.set_xticks(x)
    ax.set_xlabel("round")
    ax.set_ylabel("CRU")
    ax.legend(fontsize=8, loc="lower right")
    ax.set_title(
        f"{cfg.policy}: cluster resource utilisation per round (rounds.csv cru + startup_cru)"
    )
    fig.tight_layout()
    write_figure(rundir / "cru_by_round.png", fig, dpi=110, nofollow=True)
    plt.close(fig)


def nodes_figure(policy: str, rounds: list[dict[str, Any]], jobs: list[dict[str, Any]]) -> Any:
    """Per node and round, the copy's worker start-up (hatched) and its training (solid), each
    as long as it lasted, so a round that trained nothing shows as start-up only; one colour
    per job, named in the legend (``J0: MM``), with what hatched, solid and grey mean. None
    when no copy ran."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    nodes = sorted({n for r in rounds for n in r["spans"]})
    if not rounds or not nodes:
        return None
    fig, ax = plt.subplots(figsize=(max(7, 0.5 * len(rounds) + 3), 0.6 * len(nodes) + 1.8))
    cmap = plt.get_cmap("tab10")
    shown: set[int] = set()
    for r in rounds:
        for y, node in enumerate(nodes):
            sp = r["spans"].get(node)
            if sp is None:
                continue
            colour = cmap(sp["job"] % 10) if sp["ok"] else "lightgrey"
            shown.add(sp["job"])
            startup = sp["held"] - sp["train"]
            ax.barh(
                y, startup, left=r["time"], color=colour, alpha=0.35, hatch="//", edgecolor="white"
            )
            ax.barh(y, sp["train"], left=r["time"] + startup, color=colour, edgecolor="white")
            ax.text(
                r["time"] + sp["held"] / 2,
                y,
                f"J{sp['job']}"
                + ("" if not sp["ok"] else "" if sp["steps"] else " (0 steps)")
                + ("" if sp["ok"] else " (failed)"),
                ha="center",
                va="center",
                fontsize=7,
            )
    kinds = {j["id"]: j.get("type") or j.get("model") or "" for j in jobs}
    handles = [
        Patch(color=cmap(job % 10), label=f"J{job}: {kinds.get(job, '')}".rstrip(": "))
        for job in sorted(shown)
    ]
    handles += [
        Patch(facecolor="white", edgecolor="black", hatch="//", label="worker start-up"),
        Patch(facecolor="black", label="training"),
        Patch(color="lightgrey", label="failed copy"),
    ]
    ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.set_yticks(range(len(nodes)), nodes)
    ax.set_xlabel("time since start (s)")
    ax.set_title(
        f"{policy}: which job ran on which node "
        "(hatched = worker start-up, solid = training, gap = idle)",
        fontsize=9,
    )
    fig.tight_layout()
    return fig
