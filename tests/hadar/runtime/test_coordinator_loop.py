"""The real run goes through the one round loop (hadar/loop.py): a job is invisible to the
policy until its ``arrival`` second (counted from the run's start), every plan is validated
before anything is dispatched, and the policy's state is journalled with each round's plan and
restored when the run resumes. Real coordinator, real local nodes, real training."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import yaml

from hadar.core.errors import InputError
from hadar.core.io import STAGING_PREFIX
from hadar.loop import PolicyError
from hadar.outputs_schema import JOB_COLUMNS, ROUND_COLUMNS, SUMMARY_KEYS
from hadar.policy import Assignment, Policy, RoundContext, RoundPlan
from hadar.runtime.config import RunConfig, RuntimeKnobs, save_config
from hadar.runtime.coordinator import Coordinator, StopRequested
from hadar.runtime.journal import Journal
from hadar.runtime.outputs import collect, write_report
from tests.e2e.runlib import LOCAL_3
from tests.hadar.runtime.stopping_view import StopAfterRound

pytestmark = pytest.mark.slow

ARRIVAL_S = 6.0


def _jobs(path: Path, arrivals: list[float], steps: int = 200) -> Path:
    jobs = [
        {
            "id": i,
            "type": "MM",
            "gpus": 1,
            "steps": steps,
            "arrival": a,
            "spec": {
                "model": "MM",
                "size": "tiny",
                "data": "synthetic",
                "batch_size": 16,
                "lr": 0.001,
                "seed": i,
            },
        }
        for i, a in enumerate(arrivals)
    ]
    path.write_text(yaml.safe_dump({"jobs": jobs}))
    return path


def _coordinator(
    tmp: Path, arrivals: list[float], policy: str = "gavel", steps: int = 200
) -> Coordinator:
    cfg = RunConfig(
        run_id=f"loop-{policy}",
        cluster=LOCAL_3,
        workload=str(_jobs(tmp / "jobs.yaml", arrivals, steps)),
        policy=policy,
        round_s=2.0,
        grace_s=30.0,
        evaluate=False,
        started_at=time.time(),
    )
    return Coordinator(tmp / "run", cfg, knobs=RuntimeKnobs(0.0, 0.0))


def _events(tmp: Path) -> list[dict]:
    return [json.loads(line) for line in (tmp / "run" / "events.jsonl").read_text().splitlines()]


def test_a_job_is_not_scheduled_before_its_arrival(tmp_path):
    c = _coordinator(tmp_path, [0.0, ARRIVAL_S])
    c.run()
    rows = Journal(tmp_path / "run" / "state.sqlite").rounds()
    started = {r.round: r.started - c.cfg.started_at for r in rows if r.status == "closed"}
    dispatched = [(e["round"], e["job"]) for e in _events(tmp_path) if e["event"] == "dispatch"]
    first = {job: min(r for r, j in dispatched if j == job) for job in (0, 1)}
    # job 1 is placed only in a round that started after its arrival, job 0 ran before that
    assert started[first[1]] >= ARRIVAL_S
    assert first[0] < first[1] and all(
        started[r] < ARRIVAL_S for r, j in dispatched if r < first[1]
    )
    done = {
        j: sum(
            e["steps_added"]
            for e in _events(tmp_path)
            if e["event"] == "aggregation" and e["job"] == j
        )
        for j in (0, 1)
    }
    assert done == {0: 200, 1: 200}
    save_config(c.cfg, tmp_path / "run")  # what `hadar run` writes before the first round
    _, _, jobs, summary = collect(tmp_path / "run")
    assert summary["cluster"] == "local-3node" and summary["cluster_file"] == LOCAL_3
    by_id = {j["id"]: j for j in jobs}
    assert by_id[1]["arrival"] == ARRIVAL_S and by_id[0]["arrival"] == 0.0
    assert by_id[1]["jct"] == pytest.approx(by_id[1]["finish"] - ARRIVAL_S)
    assert (
        by_id[1]["queueing_delay"] == pytest.approx(by_id[1]["start"] - ARRIVAL_S)
        and by_id[1]["queueing_delay"] >= 0
    )
    assert by_id[0]["jct"] == pytest.approx(by_id[0]["finish"])
    # one schema with a simulation: the common columns first, every common summary key
    write_report(tmp_path / "run")
    for name, common in (("jobs", JOB_COLUMNS), ("rounds", ROUND_COLUMNS)):
        header = (tmp_path / "run" / f"{name}.csv").read_text().splitlines()[0].split(",")
        assert header[: len(common)] == common, name
    assert set(SUMMARY_KEYS) <= set(summary)
    assert by_id[0]["type"] and by_id[0]["gpus"] == 1
    # the report is one save: a file it cannot replace leaves every previous one as it was
    run = tmp_path / "run"
    written = (run / "rounds.csv").read_bytes()
    (run / "rounds.csv").write_text("the previous report\n")
    (run / "summary.json").unlink()
    (run / "summary.json").mkdir()
    with pytest.raises(InputError, match="summary.json"):
        write_report(run)
    assert (run / "rounds.csv").read_text() == "the previous report\n"
    (run / "summary.json").rmdir()
    write_report(run)
    assert (run / "rounds.csv").read_bytes() == written
    assert not [p for p in run.iterdir() if p.name.startswith(STAGING_PREFIX)]
    # restarts, recounted from the events: a round in which a job that had run before runs on
    # other nodes than in the previous round (or after a round without it)
    results = [
        (e["round"], e["job"], e["node"]) for e in _events(tmp_path) if e["event"] == "result"
    ]
    rounds_run = sorted({r for r, _, _ in results})
    for job in (0, 1):
        nodes = {r: {n for rr, j, n in results if rr == r and j == job} for r in rounds_run}
        ran = [r for r in rounds_run if nodes[r]]
        moved = sum(
            1 for r in ran[1:] if nodes[r] != nodes.get(rounds_run[rounds_run.index(r) - 1], set())
        )
        assert by_id[job]["restarts"] == moved, (job, nodes)
    # one GPU per node on local-3node: GPU-seconds and node-seconds agree
    assert summary["gru"] == pytest.approx(summary["cru"]) and 0 < summary["cru"] <= 1


def test_nothing_runs_and_no_round_is_recorded_before_the_first_arrival(tmp_path):
    c = _coordinator(tmp_path, [ARRIVAL_S / 2], steps=20)
    c.run()
    ev = _events(tmp_path)
    waiting = [e for e in ev if e["event"] == "waiting"]
    assert (
        len(waiting) == 1
        and waiting[0]["next_arrival_s"] == ARRIVAL_S / 2
        and waiting[0]["jobs"] == [0]
    )
    rows = Journal(tmp_path / "run" / "state.sqlite").rounds()
    assert rows[0].round == 0 and rows[0].started - c.cfg.started_at >= ARRIVAL_S / 2


class _OverCapacity(Policy):
    """A buggy policy: puts every job on the first node, whatever its capacity."""

    name = "over-capacity"

    def decide(self, ctx: RoundContext) -> RoundPlan:
        node = ctx.cluster.node_names[0]
        gtype = next(iter(ctx.cluster.node(node).gpus))
        return RoundPlan(tuple(Assignment(s.job_id, {node: {gtype: 1}}) for s in ctx.jobs))


def test_an_impossible_plan_is_one_error_and_nothing_is_dispatched(tmp_path):
    c = _coordinator(tmp_path, [0.0, 0.0])
    c.policy = _OverCapacity()
    with pytest.raises(
        PolicyError,
        match=r"policy over-capacity, round 0: plan exceeds GPU capacity; nothing was run",
    ):
        c.run()
    assert not [e for e in _events(tmp_path) if e["event"] == "dispatch"]
    assert Journal(tmp_path / "run" / "state.sqlite").rounds() == []


def test_the_policy_state_is_journalled_each_round_and_restored_on_resume(tmp_path):
    c = _coordinator(tmp_path, [0.0, 0.0, 0.0, 0.0], steps=400)
    stop_after = 2

    c.view = StopAfterRound(c, lambda r: r + 1 >= stop_after)  # as Ctrl-C does
    with pytest.raises(StopRequested):
        c.run()
    rows = [r for r in Journal(tmp_path / "run" / "state.sqlite").rounds() if r.status == "closed"]
    assert len(rows) == stop_after
    saved = rows[-1].policy_state
    assert saved["x"] and set(saved["x"]) == {
        "0",
        "1",
        "2",
        "3",
    }  # Gavel's allocation, job ids as keys
    assert saved == json.loads(json.dumps(c.policy.state()))
    resumed = Coordinator(tmp_path / "run", c.cfg, knobs=RuntimeKnobs(0.0, 0.0))
    try:
        resumed._restore_policy_state()
        assert resumed.policy.state() == saved
    finally:
        resumed.close()
