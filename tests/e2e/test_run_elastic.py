"""Real runs of elastic jobs (``--workload elastic-N`` on ``local-elastic``: one local node
emulating four GPUs, each GPU of a gang one worker process; ``local-hetero-elastic``: two GPU
types): between rounds a job's GPU count, batch size and GPU type change by checkpoint-restart,
and progress stays exact."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.runlib import (
    REPO,
    closed_rounds,
    events,
    hadar,
    kill,
    run_argv,
    run_pids,
    run_to_end,
    start,
    steps_added,
    stop_cleanly,
    tracker_progress,
    wait_for,
)
from tests.faults.campaign import RunFigures, account
from tests.fixtures.processes import HANG_S

pytestmark = pytest.mark.slow

ELASTIC = str(REPO / "cluster_configs" / "local-elastic.yaml")
HETERO_ELASTIC = str(REPO / "cluster_configs" / "local-hetero-elastic.yaml")


def trained_rounds(out: Path) -> dict[int, list[dict[str, Any]]]:
    """Per job, its results that trained at least one step, in round order (a round redone
    after a restart: its last result)."""
    last: dict[tuple[int, int], dict[str, Any]] = {}
    for e in events(out):
        if e["event"] == "result" and e["steps"] > 0:
            last[(e["job"], e["round"])] = e
    per: dict[int, list[dict[str, Any]]] = {}
    for (job, _), e in sorted(last.items()):
        per.setdefault(job, []).append(e)
    return per


def assert_exact_progress(out: Path, targets: dict[int, int]) -> None:
    """Every job finished with exactly its steps: the tracker's count, the rounds' additions
    and the workers' results agree (nothing lost or counted twice across a rescale)."""
    assert tracker_progress(out) == targets
    assert steps_added(out) == targets
    results = trained_rounds(out)
    assert {j: sum(e["steps"] for e in rs) for j, rs in results.items()} == targets


def write_elastic_jobs(path: Path, jobs: list[tuple[str, int, float, int]]) -> Path:
    """A job file of elastic tiny jobs: (model, steps, arrival, initial total batch M0), 1-4
    GPUs, batches M0-4 M0."""
    rows = [
        {
            "id": i,
            "type": model,
            "gpus": 1,
            "min_gpus": 1,
            "max_gpus": 4,
            "batch_range": [m0, 4 * m0],
            "steps": steps,
            "arrival": arrival,
            "spec": {
                "model": model,
                "size": "tiny",
                "data": "synthetic",
                "batch_size": m0,
                "lr": 0.05 if model == "IC" else 0.001,
                "seed": i,
            },
        }
        for i, (model, steps, arrival, m0) in enumerate(jobs)
    ]
    path.write_text(yaml.safe_dump({"jobs": rows}))
    return path


def pollux_agents(out: Path) -> dict[str, Any]:
    """The Pollux agents of the run's last committed round (its journalled policy state)."""
    from hadar.runtime.journal import Journal

    journal = Journal(out / "state.sqlite")
    try:
        closed = [r for r in journal.rounds() if r.status == "closed"]
        return dict(closed[-1].policy_state["agents"])
    finally:
        journal.close()


def test_pollux_changes_a_jobs_batch_size_and_gpu_count_from_what_its_worker_measured(tmp_path):
    # Pollux's delta is the re-allocation delay its realloc factor assumes (30 s, for 60 s
    # rounds and restarts of 15-120 s); a restart of a warm worker here costs about 1 s.
    # 240 steps outlast one round on one GPU (at most ~75 on this 2-core machine), so the job
    # trains in two rounds or more.
    jobs = write_elastic_jobs(tmp_path / "jobs.yaml", [("MM", 240, 0.0, 16)])
    out = tmp_path / "run"
    proc = run_to_end(
        out,
        jobs,
        "--policy",
        "pollux",
        "--round",
        "4",
        "--policy-opt",
        "delta_s=1",
        cluster=ELASTIC,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    runs = trained_rounds(out)[0]
    assert len({e["gpus"] for e in runs}) > 1, runs  # its GPU count changed between rounds
    assert len({e["batch_size"] for e in runs}) > 1, runs  # and its total batch
    # one GPU first (Pollux's start), then at most twice the most GPUs held (exploration)
    assert runs[0]["gpus"] == 1
    for i in range(1, len(runs)):
        assert runs[i]["gpus"] <= 2 * max(e["gpus"] for e in runs[:i])
    for e in runs:  # measured on one replica: successive steps; on several: per-replica norms
        assert e["step_time"] > 0
        if e["gpus"] == 1:
            assert e["sync_time"] == 0 and (e["steps"] < 2 or e["diff_sqnorm"] > 0)
        else:
            assert 0 < e["sync_time"] < e["step_time"] and len(e["replica_sqnorms"]) == e["gpus"]
    # the agent fitted its throughput model to those measurements (every round but the last,
    # which no decision followed) and tracks the noise scale
    agent = pollux_agents(out)["0"]
    configs = {(p["num_gpus"], p["local_bsz"]) for p in agent["points"]}
    assert {(e["gpus"], e["local_bsz"]) for e in runs[:-1]} <= configs
    assert agent["perf"] is not None and agent["grad"] is not None
    assert_exact_progress(out, {0: 240})


def dispatched_gpus(out: Path, job: int) -> list[tuple[int, int]]:
    """(round, GPUs) of every dispatch of ``job``, in order (attempts of one round included)."""
    return [
        (e["round"], sum(sum(per.values()) for per in e["placement"].values()))
        for e in events(out)
        if e["event"] == "dispatch" and e["job"] == job
    ]


def audit(out: Path, targets: dict[int, int]) -> None:
    """Every job complete; tracker == its checkpoints == the committed reports (no step lost or
    counted twice, tests/faults/campaign.py)."""
    figures = RunFigures(targets=targets)
    account(out, figures)
    assert figures.tracker_steps == targets
    assert figures.checkpoint_steps == figures.tracker_steps
    assert figures.steps_lost == 0 and figures.steps_double_counted == 0
    assert figures.round_mismatches == 0
    assert steps_added(out) == targets


ENDLESS = 1_000_000
"""Steps of a job that outlasts any test on any machine (its run is stopped, not finished)."""


def audit_stopped(out: Path) -> None:
    """:func:`audit` for a run stopped before its jobs finished: the tracker, its checkpoints,
    the committed reports and the rounds' additions agree on every job's steps."""
    figures = RunFigures(targets=dict.fromkeys(tracker_progress(out), ENDLESS))
    account(out, figures)
    assert figures.tracker_steps == steps_added(out)
    assert figures.checkpoint_steps == figures.tracker_steps
    assert figures.reported_steps == figures.tracker_steps
    assert figures.steps_lost == 0 and figures.steps_double_counted == 0
    assert figures.round_mismatches == 0


def test_afs_shrinks_a_running_job_for_a_newcomer_across_a_coordinator_kill(tmp_path):
    # AFS on elastic-2: job 0 runs alone on four GPUs; job 1 arrives and AFS shrinks job 0 for
    # it. The coordinator is SIGKILLed while that rescaled round is in flight; the resumed run
    # redoes the round (shrunk again) and loses nothing.
    out = tmp_path / "run"
    proc = start(*run_argv(out, "elastic-2", "--policy", "afs", "--round", "4", cluster=ELASTIC))
    try:

        def shrink_dispatched() -> bool:  # job 0 dispatched on fewer GPUs than before, in flight
            seen = dispatched_gpus(out, 0)
            return any(b[1] < a[1] for a, b in zip(seen, seen[1:], strict=False)) and (
                seen[-1][0] not in closed_rounds(out)
            )

        wait_for(shrink_dispatched, HANG_S, "job 0's shrink to be dispatched", proc, poll_s=0.05)
        kill(proc.pid)  # SIGKILL: the rescaled round's workers are running
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
        for pid in run_pids(out):  # what the dead coordinator left behind
            with contextlib.suppress(ProcessLookupError):
                kill(pid)
    killed_round = dispatched_gpus(out, 0)[-1][0]
    resumed = hadar("run", "--resume", str(out), "--no-live", timeout=300)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert any(e["event"] == "aborted" and e["round"] == killed_round for e in events(out))
    runs = trained_rounds(out)
    first = runs[0]
    # job 0 ran alone on all four GPUs before job 1 arrived (AFS's dispatches: on a loaded
    # machine the first rounds may train nothing while the node's warm server starts, so what
    # trained alone, if anything, does not say what AFS decided)
    joined = dispatched_gpus(out, 1)[0][0]
    alone = [g for r, g in dispatched_gpus(out, 0) if r < joined]
    assert alone and all(g == 4 for g in alone)
    # the killed round was planned again, rescaled again (its first round after the restart
    # may train nothing while the node's warm server starts)
    again = [g for r, g in dispatched_gpus(out, 0) if r == killed_round]
    assert len(again) == 2 and again[1] < 4
    # when job 1 ran, job 0 ran on fewer GPUs in the same round
    shared = {e["round"] for e in runs[1]}
    shrunk = [e for e in first if e["round"] in shared]
    assert shrunk and all(e["gpus"] < 4 for e in shrunk)
    # (whether job 0 grows again once job 1 is done is AFS's call on the rates measured at
    # each count: here four emulated GPUs sharing two cores are often no faster than two at one
    # total batch; the node-loss test below checks a growth)
    # AFS keeps a job's total batch (16), split over its GPUs
    assert {e["batch_size"] for rs in runs.values() for e in rs} == {16}
    assert all(e["local_bsz"] * e["gpus"] == e["batch_size"] for rs in runs.values() for e in rs)
    # the worker measured every elastic round: step time, sync time and gradient norms
    for e in first:
        assert 0 < e["sync_time"] < e["step_time"]
        assert len(e["replica_sqnorms"]) == e["gpus"] and e["mean_sqnorm"] > 0
    audit(out, {0: 240, 1: 60})


def test_a_node_lost_under_a_gang_forces_a_rescale_and_progress_stays_exact(tmp_path):
    # Local nodes a (one emulated GPU) and b (four): job 0 alone runs as a 4-rank gang on b;
    # b leaves at 7 s (its processes SIGKILLed, the gang preempted), so AFS shrinks job 0 onto
    # a's one GPU, and grows it again once b is back at 12 s (the ResNet at batch 64 is
    # faster on more GPUs). The leave must fall inside a running round, not between two: with
    # 8-s rounds it falls inside the first one whenever that round starts before 7 s, however
    # long the start takes. The job outlasts the test on any machine: the run is stopped
    # (Ctrl-C) once a round of the grown job has closed.
    cluster = tmp_path / "two.yaml"
    nodes = [("a", 1), ("b", 4)]
    cluster.write_text(
        yaml.safe_dump(
            {
                "name": "two",
                "provider": "local",
                "nodes": [{"name": n, "gpus": {"v100": g}, "speed_factor": 0.25} for n, g in nodes],
            }
        )
    )
    stream = tmp_path / "stream.csv"
    stream.write_text("time,node,event\n0,a,join\n0,b,join\n7,b,leave\n12,b,join\n")
    jobs = write_elastic_jobs(tmp_path / "jobs.yaml", [("IC", ENDLESS, 0.0, 64)])
    out = tmp_path / "run"
    extra = ("--policy", "afs", "--round", "8", "--node-stream", str(stream))
    proc = start(*run_argv(out, jobs, *extra, cluster=str(cluster)))

    def lost_round() -> int | None:
        return next(
            (
                e["round"]
                for e in events(out)
                if e["event"] == "failure" and e["kind"] == "preempted"
            ),
            None,
        )

    def grown_round_closed() -> bool:
        lost = lost_round()
        if lost is None:
            return False
        after = [(r, g) for r, g in dispatched_gpus(out, 0) if r > lost]
        shrunk = next((i for i, (_, g) in enumerate(after) if g == 1), None)
        closed = closed_rounds(out)
        return shrunk is not None and any(g > 1 and r in closed for r, g in after[shrunk + 1 :])

    try:
        wait_for(grown_round_closed, HANG_S, "job 0 shrunk, grown again and a round closed", proc)
        stop_cleanly(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
    ev = events(out)
    assert [e["node"] for e in ev if e["event"] == "node-leave"] == ["b"]
    lost = [e for e in ev if e["event"] == "failure" and e["kind"] == "preempted"]
    assert lost and all(e["job"] == 0 for e in lost)
    seen = dispatched_gpus(out, 0)
    spans = [g for _, g in seen]
    assert spans[0] == 4  # the gang on b
    assert lost[0]["round"] == seen[0][0]  # lost in its first round, wherever the start put it
    after = seen.index(next(s for s in seen if s[0] > lost[0]["round"]))
    assert spans[after] == 1 and max(spans[after + 1 :]) > 1  # shrunk onto a, grown again
    audit_stopped(out)


def test_sia_moves_an_elastic_job_to_another_gpu_type_and_count_with_exact_progress(tmp_path):
    # local-hetero-elastic: two emulated V100s (vbox) and one T4 at half their speed (tbox).
    # Sia's first decision (from its bootstrapped estimates, before any measurement) gives the
    # two short jobs a V100 each and the long job the T4; the short jobs need 60 steps at twice
    # the long job's speed (speed_factor scales each step's compute, so the order holds on any
    # machine), and once they are done Sia moves the long job onto both V100s: another GPU type
    # and another GPU count, by checkpoint-restart, with no step lost or counted twice.
    steps = [("MM", 120, 0.0, 16), ("MM", 60, 0.0, 16), ("MM", 60, 0.0, 16)]
    jobs = write_elastic_jobs(tmp_path / "jobs.yaml", steps)
    doc = yaml.safe_load(jobs.read_text())
    for row in doc["jobs"]:
        row["max_gpus"] = 2
    jobs.write_text(yaml.safe_dump(doc))
    out = tmp_path / "run"
    proc = run_to_end(
        out, jobs, "--policy", "sia", "--round", "3", cluster=HETERO_ELASTIC, timeout=300
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    runs = trained_rounds(out)
    assert [(e["node"], e["gpus"]) for e in runs[0][:1]] == [("tbox", 1)]
    assert {(e["node"], e["gpus"]) for j in (1, 2) for e in runs[j]} == {("vbox", 1)}
    moved = [e for e in runs[0] if e["round"] > max(e["round"] for j in (1, 2) for e in runs[j])]
    assert moved and {(e["node"], e["gpus"]) for e in moved} == {("vbox", 2)}
    for e in moved:  # a 2-GPU gang measures its synchronisation and each replica's gradient
        assert 0 < e["sync_time"] < e["step_time"] and len(e["replica_sqnorms"]) == 2
    audit(out, {0: 120, 1: 60, 2: 60})
