"""Real runs of elastic jobs (``--workload elastic-N`` on ``local-elastic``: one local node
emulating four GPUs, each GPU of a gang one worker process): between rounds a job's GPU count
and batch size change by checkpoint-restart, and progress stays exact."""

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
    tracker_progress,
    wait_for,
)
from tests.faults.campaign import RunFigures, account

pytestmark = pytest.mark.slow

ELASTIC = str(REPO / "cluster_configs" / "local-elastic.yaml")


def trained_rounds(out: Path) -> dict[int, list[dict[str, Any]]]:
    """Per job, its results that trained at least one step, in round order."""
    per: dict[int, list[dict[str, Any]]] = {}
    for e in events(out):
        if e["event"] == "result" and e["steps"] > 0:
            per.setdefault(e["job"], []).append(e)
    return {j: sorted(rs, key=lambda e: e["round"]) for j, rs in per.items()}


def assert_exact_progress(out: Path, targets: dict[int, int]) -> None:
    """Every job finished with exactly its steps: the tracker's count, the rounds' additions
    and the workers' results agree (nothing lost or counted twice across a rescale)."""
    assert tracker_progress(out) == targets
    assert steps_added(out) == targets
    results = trained_rounds(out)
    assert {j: sum(e["steps"] for e in rs) for j, rs in results.items()} == targets
    for rs in results.values():  # each round's steps start where the last one ended
        assert len({e["round"] for e in rs}) == len(rs)


def test_afs_shrinks_a_running_job_for_a_newcomer_and_grows_it_again(tmp_path):
    out = tmp_path / "run"
    proc = run_to_end(
        out, "elastic-2", "--policy", "afs", "--round", "4", cluster=ELASTIC, timeout=300
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    runs = trained_rounds(out)
    first = runs[0]
    # job 0 trained alone on all four GPUs before job 1 arrived
    alone = [e for e in first if e["round"] < runs[1][0]["round"]]
    assert alone and alone[0]["gpus"] == 4
    # when job 1 ran, job 0 ran on fewer GPUs in the same round
    shared = {e["round"] for e in runs[1]}
    shrunk = [e for e in first if e["round"] in shared]
    assert shrunk and all(e["gpus"] < 4 for e in shrunk)
    # after job 1 finished, job 0 grew again
    grown = [e for e in first if e["round"] > max(shared)]
    assert grown and grown[0]["gpus"] > shrunk[-1]["gpus"]
    # AFS keeps a job's total batch: per-rank batch = 16 / GPUs
    assert {e["batch_size"] for rs in runs.values() for e in rs} == {16}
    assert all(e["local_bsz"] * e["gpus"] == 16 for rs in runs.values() for e in rs)
    # the worker measured every elastic round: step time, sync time and gradient norms
    for e in first:
        assert 0 < e["sync_time"] < e["step_time"]
        assert len(e["replica_sqnorms"]) == e["gpus"] and e["mean_sqnorm"] > 0
    assert_exact_progress(out, {0: 240, 1: 60})


def write_elastic_jobs(path: Path, jobs: list[tuple[str, int, float]]) -> Path:
    """A job file of elastic tiny jobs: (model, steps, arrival), 1-4 GPUs, batches 16-64."""
    rows = [
        {
            "id": i,
            "type": model,
            "gpus": 1,
            "min_gpus": 1,
            "max_gpus": 4,
            "batch_range": [16, 64],
            "steps": steps,
            "arrival": arrival,
            "spec": {
                "model": model,
                "size": "tiny",
                "data": "synthetic",
                "batch_size": 16,
                "lr": 0.001,
                "seed": i,
            },
        }
        for i, (model, steps, arrival) in enumerate(jobs)
    ]
    path.write_text(yaml.safe_dump({"jobs": rows}))
    return path


def pollux_agents(out: Path) -> dict[str, Any]:
    """The Pollux agents of the run's last committed round (its journalled policy state)."""
    from hadar.runtime.journal import Journal

    journal = Journal(out / "journal.sqlite")
    try:
        closed = [r for r in journal.rounds() if r.status == "closed"]
        return dict(closed[-1].policy_state["agents"])
    finally:
        journal.close()


def test_pollux_changes_a_jobs_batch_size_and_gpu_count_from_what_its_worker_measured(tmp_path):
    # Pollux's delta (the re-allocation delay its realloc factor assumes) is 30 s for 60 s
    # rounds; scaled to these 4 s rounds it is 2 s. 150 steps outlast one round on one GPU
    # (at most ~70 on this 2-core machine), so the job trains in two rounds or more.
    jobs = write_elastic_jobs(tmp_path / "jobs.yaml", [("MM", 150, 0.0)])
    out = tmp_path / "run"
    proc = run_to_end(
        out,
        jobs,
        "--policy",
        "pollux",
        "--round",
        "4",
        "--policy-opt",
        "delta_s=2",
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
            assert e["sync_time"] == 0 and e["diff_sqnorm"] > 0
        else:
            assert 0 < e["sync_time"] < e["step_time"] and len(e["replica_sqnorms"]) == e["gpus"]
    # the agent fitted its throughput model to those measurements (every round but the last,
    # which no decision followed) and tracks the noise scale
    agent = pollux_agents(out)["0"]
    configs = {(p["num_gpus"], p["local_bsz"]) for p in agent["points"]}
    assert {(e["gpus"], e["local_bsz"]) for e in runs[:-1]} <= configs
    assert agent["perf"] is not None and agent["grad"] is not None
    assert_exact_progress(out, {0: 150})


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


def test_coordinator_killed_in_the_middle_of_a_rescale_resumes_with_exact_progress(tmp_path):
    out = tmp_path / "run"
    proc = start(*run_argv(out, "elastic-2", "--policy", "afs", "--round", "4", cluster=ELASTIC))
    try:

        def shrink_dispatched() -> bool:  # job 0 dispatched on fewer GPUs than before, in flight
            seen = dispatched_gpus(out, 0)
            return any(b[1] < a[1] for a, b in zip(seen, seen[1:], strict=False)) and (
                seen[-1][0] not in closed_rounds(out)
            )

        wait_for(shrink_dispatched, 240, "job 0's shrink to be dispatched", proc, poll_s=0.05)
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
    ev = events(out)
    assert any(e["event"] == "aborted" and e["round"] == killed_round for e in ev)
    # the round was planned again and the job rescaled again after the restart
    again = [g for r, g in dispatched_gpus(out, 0) if r >= killed_round]
    assert len(again) >= 2 and again[1] < 4
    audit(out, {0: 240, 1: 60})


def test_a_node_lost_under_a_gang_forces_a_rescale_and_progress_stays_exact(tmp_path):
    # Local nodes a (one emulated GPU) and b (four): job 0 alone runs as a 4-rank gang on b;
    # b leaves at 9 s (its processes SIGKILLed, the gang preempted), so AFS shrinks job 0 onto
    # a's one GPU, and grows it again once b is back at 18 s.
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
    stream.write_text("time,node,event\n0,a,join\n0,b,join\n9,b,leave\n18,b,join\n")
    jobs = write_elastic_jobs(tmp_path / "jobs.yaml", [("MM", 200, 0.0)])
    out = tmp_path / "run"
    proc = run_to_end(
        out,
        jobs,
        "--policy",
        "afs",
        "--round",
        "4",
        "--node-stream",
        str(stream),
        cluster=str(cluster),
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    ev = events(out)
    assert [e["node"] for e in ev if e["event"] == "node-leave"] == ["b"]
    lost = [e for e in ev if e["event"] == "failure" and e["kind"] == "preempted"]
    assert lost and all(e["job"] == 0 for e in lost)
    seen = dispatched_gpus(out, 0)
    spans = [g for _, g in seen]
    assert spans[0] == 4  # the gang on b
    after = seen.index(next(s for s in seen if s[0] > lost[0]["round"]))
    assert spans[after] == 1 and max(spans[after + 1 :]) > 1  # shrunk onto a, grown again
    audit(out, {0: 200})
