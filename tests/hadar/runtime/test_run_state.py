"""The coordinator's in-memory bookkeeping (hadar/runtime/run_state.py) against the whole-history
computations it replaces: ``ProgressWatch`` keeps only the recent rounds yet finds what the
progress checks find over every round, and ``RunState`` books a job's service as the history
did."""

from __future__ import annotations

import random
from typing import Any

from hadar.core.jobs import Job
from hadar.runtime.faults import placement_nodes, repeated_failures, run_stalled, stalled_jobs
from hadar.runtime.journal import RoundRow
from hadar.runtime.run_state import ProgressWatch, RunState

KINDS = ("ok", "ok", "ok", "timeout", "worker-error", "withheld")


def _round(rng: random.Random) -> list[dict[str, Any]]:
    copies = []
    for job in rng.sample(range(6), rng.randint(0, 4)):
        node = rng.choice(["a", "b", "c"])
        kind = rng.choice(KINDS)
        copies.append(
            {
                "job": job,
                "copy": 0,
                "node": node,
                "placement": {node: {"v100": 1}},
                "kind": kind,
                "steps": rng.choice([0, 5]) if kind == "ok" else 0,
            }
        )
    return copies


def test_progress_watch_finds_what_the_whole_history_shows() -> None:
    rng, n = random.Random(7), 3
    history: list[list[dict[str, Any]]] = []
    watch = ProgressWatch(n)
    found = 0
    for _ in range(400):
        copies = _round(rng)
        history.append(copies)
        watch.add(copies)
        assert watch.run_stalled() == run_stalled(history, n)
        latest_jobs = {c["job"] for c in copies}
        expected_jobs = {j: v for j, v in stalled_jobs(history, n).items() if j in latest_jobs}
        assert watch.stalled_jobs() == expected_jobs
        latest_pairs = {
            (c["job"], placement_nodes(c["placement"])) for c in copies if c["kind"] != "withheld"
        }
        expected_pairs = {
            k: v for k, v in repeated_failures(history, n).items() if k in latest_pairs
        }
        assert watch.repeated_failures() == expected_pairs
        found += len(expected_jobs) + len(expected_pairs)
    assert found > 0  # the sequence does exercise stalled jobs and repeated failures
    assert len(watch.busy) <= n and all(len(d) <= n for d in watch.by_job.values())


def test_run_state_books_service_first_start_finish_and_placements() -> None:
    jobs = {0: Job(0, "IC", 2, 100.0), 1: Job(1, "LM", 1, 100.0, arrival=5.0)}
    state = RunState(jobs, started_at=1000.0)
    both = {"n1": {"v100": 1}, "n2": {"k80": 1}}
    row0 = RoundRow(0, 0, "closed", [{"job": 0}], 1010.0, 1040.0, 0.1, {})
    state.commit(
        row0,
        [
            {"job": 0, "copy": 0, "kind": "ok", "steps": 0, "wall_s": 30.0, "placement": both},
            {"job": 1, "copy": 0, "kind": "timeout", "steps": 0, "wall_s": 30.0, "placement": {}},
        ],
        completed=[],
    )
    row1 = RoundRow(1, 0, "closed", [{"job": 0}, {"job": 1}], 1040.0, 1070.0, 0.1, {})
    state.commit(
        row1,
        [
            {"job": 0, "copy": 0, "kind": "ok", "steps": 4, "wall_s": 20.0, "placement": both},
            {
                "job": 1,
                "copy": 0,
                "kind": "ok",
                "steps": 3,
                "wall_s": 10.0,
                "placement": {"n3": {"v100": 1}},
            },
        ],
        completed=[1],
    )
    s0, s1 = state.service[0], state.service[1]
    assert (s0.attained, s0.time_on_type, s0.rounds) == (100.0, {"v100": 50.0, "k80": 50.0}, 2)
    assert s0.first_start == 40.0 and s0.finish is None  # its first round trained no step
    assert (s1.attained, s1.rounds, s1.first_start, s1.finish) == (10.0, 1, 40.0, 70.0)
    assert state.current == {(0, 0): both}  # the finished job's placement is dropped
    assert state.last_plan == [{"job": 0}, {"job": 1}]
    statuses = state.statuses({0: 40}, complete={1}, skip=set(), now=100.0)
    assert [(s.job_id, s.remaining_steps, s.attained_service) for s in statuses] == [
        (0, 60.0, 100.0)
    ]
    assert state.statuses({}, complete=set(), skip={0}, now=1.0) == []  # job 1 not yet arrived
