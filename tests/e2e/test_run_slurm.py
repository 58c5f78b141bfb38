"""``hadar run`` on the real local Slurm (scripts/slurm-local): every node a Slurm allocation,
released at the end, on SIGTERM and by ``--resume`` after a crash; the live idle-node stream
``--node-stream slurm:idle`` yields a node within one round when a Slurm job takes it back,
with no step lost or counted twice; a request Slurm refuses is one line, exit 2."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.runlib import (
    events,
    hadar,
    run_argv,
    start,
    start_run,
    wait_for,
    worker_pids,
    write_jobs,
)
from tests.faults.campaign import RunFigures, account
from tests.fixtures.processes import HANG_S
from tests.fixtures.slurm import CLUSTER_FILE, LocalSlurm

pytestmark = [pytest.mark.slurm, pytest.mark.slow]
CLUSTER = str(CLUSTER_FILE)


def _hadar_jobs(slurm: LocalSlurm) -> list[tuple[str, str, str, str]]:
    return [j for j in slurm.squeue() if j[3].startswith("hadar.")]


def _allocation_on(slurm: LocalSlurm, node: str) -> str:
    """The id of the run's running allocation on Slurm node ``node``."""
    out = slurm.cmd("squeue", "-h", "-t", "RUNNING", "-w", node, "-o", "%i|%j").stdout
    ids = [
        i for i, _, name in (ln.partition("|") for ln in out.split()) if name.startswith("hadar.")
    ]
    assert len(ids) == 1, out
    return ids[0]


def _ended_at(slurm: LocalSlurm, job_id: str, proc: subprocess.Popen[str]) -> float:
    """When Slurm ended job ``job_id`` (its EndTime, whole seconds), waited for: Slurm keeps an
    ended job for MinJobAge (30 s in scripts/slurm-local) only."""
    fields: list[str] = []

    def ended() -> bool:
        fields[:] = slurm.cmd(
            "squeue", "-h", "-t", "all", "-j", job_id, "-o", "%T|%e"
        ).stdout.split("|")
        return fields[0] not in {"", "PENDING", "CONFIGURING", "RUNNING"}

    wait_for(ended, HANG_S, f"Slurm to end allocation {job_id}", proc)
    return datetime.fromisoformat(fields[1].strip()).timestamp()


def _round_starts(ev: list[dict[str, Any]]) -> list[float]:
    """When each round started: its first dispatch (Slurm was asked just before)."""
    starts: dict[int, float] = {}
    for e in ev:
        if e["event"] == "dispatch":
            starts[e["round"]] = min(starts.get(e["round"], e["t"]), e["t"])
    return sorted(starts.values())


def _audit(out: Path, steps: dict[str, int], finished: bool = True) -> RunFigures:
    """No step lost or counted twice; every job trained to its target when ``finished``."""
    figures = RunFigures(targets=dict(enumerate(steps.values())))
    account(out, figures)
    if finished:
        assert figures.tracker_steps == dict(enumerate(steps.values()))
    assert figures.checkpoint_steps == figures.tracker_steps
    assert figures.steps_lost == 0 and figures.steps_double_counted == 0
    assert figures.round_mismatches == 0
    return figures


def test_live_stream_yields_a_node_slurm_takes_back_within_one_round(
    slurm: LocalSlurm, tmp_path: Path
) -> None:
    round_s, hold_s = 15.0, 20
    # more steps than any machine trains before the test stops the run (a fast machine trained
    # 4,800 MM steps in one round: 3,000 could end the run before the node was taken back)
    steps = {"MM": 1_000_000}
    jobs = write_jobs(tmp_path / "jobs.yaml", steps)
    out = tmp_path / "run"
    proc = start_run(
        out, jobs, cluster=CLUSTER, round_s=f"{round_s:g}", extra=("--node-stream", "slurm:idle")
    )
    # once n2 trains a copy of round 1, a job of the default partition takes n2 back (Slurm
    # preempts the run's allocation there)
    wait_for(
        lambda: any(
            e["event"] == "dispatch" and e["round"] >= 1 and e["node"] == "n2" for e in events(out)
        ),
        300,
        "a copy on n2 in round 1",
        proc,
    )
    # the copy is training there (not only dispatched) when Slurm takes the node back
    wait_for(lambda: worker_pids(out, "n2"), HANG_S, "the round's copy training on n2", proc)
    allocation = _allocation_on(slurm, "n2")
    submitted = time.time()
    slurm.cmd(
        "sbatch",
        "-p",
        "debug",
        "-w",
        "n2",
        "--gres=gpu:v100:1",
        "-J",
        "reclaim",
        "--output=/dev/null",
        "--wrap",
        f"sleep {hold_s}",
    )
    taken = _ended_at(slurm, allocation, proc)  # Slurm preempted the run's allocation on n2
    # the run goes on past the reclaiming job's hold, then SIGTERM stops it (state saved)
    wait_for(
        lambda: any(e["event"] == "dispatch" and e["t"] > submitted + hold_s for e in events(out)),
        HANG_S,
        "a round after the reclaiming job's hold",
        proc,
    )
    proc.send_signal(signal.SIGTERM)
    output, _ = proc.communicate(timeout=HANG_S)
    assert proc.returncode == 128 + signal.SIGTERM, output
    ev = events(out)
    leaves = [e for e in ev if e["event"] == "node-leave"]
    assert [e["node"] for e in leaves] == ["n2"], leaves
    # yielded within one round of Slurm taking n2, counted in the run's own rounds (a loaded
    # machine stretches rounds and Slurm's preemption alike): Slurm is asked at every round's
    # start, so at most one round starts between the preemption and the leave
    starts = _round_starts(ev)
    assert submitted < leaves[0]["t"], (submitted, leaves)
    assert len([s for s in starts if taken < s < leaves[0]["t"]]) <= 1, (taken, leaves, starts)
    # the copy n2 was training was preempted, never reported
    preempted = [e for e in ev if e["event"] == "failure" and e["kind"] == "preempted"]
    assert preempted and all(e["node"] == "n2" for e in preempted)
    # n2 got no work while the reclaiming job held it
    assert not [
        e
        for e in ev
        if e["event"] == "dispatch"
        and e["node"] == "n2"
        and leaves[0]["t"] < e["t"] < submitted + hold_s
    ]
    figures = _audit(out, steps, finished=False)
    assert 0 < figures.tracker_steps[0] < steps["MM"]
    assert _hadar_jobs(slurm) == []  # every allocation released at the end


def test_allocations_are_released_on_sigterm_and_by_resume_after_a_crash(
    slurm: LocalSlurm, tmp_path: Path
) -> None:
    doc = yaml.safe_load(CLUSTER_FILE.read_text())
    doc["nodes"] = doc["nodes"][:2]  # two workers a round: light on a shared machine
    cluster = tmp_path / "slurm-2.yaml"
    cluster.write_text(yaml.safe_dump(doc))
    # more steps than any machine trains in a few 20 s rounds (a fast machine trained 4,800 in
    # the first round): the run is still going at each stop, and each stop is by a signal
    steps = {"MM": 1_000_000}
    jobs = write_jobs(tmp_path / "jobs.yaml", steps)
    out = tmp_path / "run"
    proc = start_run(out, jobs, cluster=str(cluster), round_s="20")
    wait_for(lambda: any(e["event"] == "dispatch" for e in events(out)), 300, "round 0", proc)
    assert len(_hadar_jobs(slurm)) == 2
    proc.send_signal(signal.SIGTERM)
    output, _ = proc.communicate(timeout=300)
    assert proc.returncode == 128 + signal.SIGTERM, output
    assert _hadar_jobs(slurm) == []  # SIGTERM: the run stopped and released its allocations
    # a crash (SIGKILL) leaves the allocations; --resume releases them before it goes on
    crashed = start("run", "--resume", str(out), "--no-live")
    _wait_for_a_new_round(slurm, out, crashed)
    before = {j[0] for j in _hadar_jobs(slurm)}
    os.killpg(crashed.pid, signal.SIGKILL)
    crashed.communicate(timeout=60)
    assert {j[0] for j in _hadar_jobs(slurm)} == before
    run_id = json.loads((out / "run.json").read_text())["run_id"]
    assert set((out / "nodes" / run_id / "slurm-jobs").read_text().split()) == before
    resumed = start("run", "--resume", str(out), "--no-live")
    _wait_for_a_new_round(slurm, out, resumed)
    assert not before & {j[0] for j in slurm.squeue()}  # the crashed run's allocations are gone
    resumed.send_signal(signal.SIGTERM)
    output, _ = resumed.communicate(timeout=300)
    assert resumed.returncode == 128 + signal.SIGTERM, output
    assert _hadar_jobs(slurm) == []
    figures = _audit(out, steps, finished=False)
    assert 0 < figures.tracker_steps[0] < steps["MM"]


def _wait_for_a_new_round(slurm: LocalSlurm, out: Path, proc) -> None:
    """Until ``proc`` (a resumed run) dispatches a round and holds its two allocations."""
    dispatched = len([e for e in events(out) if e["event"] == "dispatch"])
    wait_for(
        lambda: (
            len([e for e in events(out) if e["event"] == "dispatch"]) > dispatched
            and len(_hadar_jobs(slurm)) == 2
        ),
        300,
        "the resumed run's allocations",
        proc,
    )


def test_a_partition_slurm_does_not_have_is_one_line_exit_2_nothing_allocated(
    slurm: LocalSlurm, tmp_path: Path
) -> None:
    doc = yaml.safe_load(CLUSTER_FILE.read_text())
    doc["slurm"]["partition"] = "gpu-nope"
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(doc))
    jobs = write_jobs(tmp_path / "jobs.yaml", {"MM": 100})
    res = hadar(*run_argv(tmp_path / "run", jobs, cluster=str(bad)))
    assert res.returncode == 2
    assert res.stderr.strip() == (
        f"hadar: error: {bad}: slurm.partition: Slurm has no partition 'gpu-nope' (partitions: debug, idle)"
    )
    assert slurm.settled() == []
    for stream, why in [
        ("slurm:nope", "--node-stream slurm:nope: Slurm has no partition 'nope'"),
        ("slurm:", "--node-stream slurm:: name a partition (slurm:PARTITION)"),
    ]:
        res = hadar(*run_argv(tmp_path / "run2", jobs, "--node-stream", stream, cluster=CLUSTER))
        assert (res.returncode, res.stderr.strip()) == (2, f"hadar: error: {why}")
    res = hadar(
        *run_argv(
            tmp_path / "run3",
            jobs,
            "--node-stream",
            "slurm:idle",
            cluster=str(CLUSTER_FILE.parent / "local-3node.yaml"),
        )
    )
    assert res.returncode == 2 and "needs a provider: slurm cluster" in res.stderr
    assert slurm.settled() == []
