"""Gavel-compatible mode: the simulator preset, consolidated throughputs, Gavel's interval."""

from __future__ import annotations

import json

import pytest

from hadar.cli import main
from hadar.core.cluster import Cluster, Node
from hadar.simulator import simulate
from hadar.simulator.gavel_mode import (
    GAVEL_REALLOCATION_INTERVAL_S,
    ConsolidatedThroughput,
    policy_options,
    setup,
    sim_config,
)
from tests.baselines.helpers import R18, TABLE, job


def test_preset_and_options():
    cfg = sim_config()
    assert (cfg.round_s, cfg.restart_penalty_s, cfg.round_end) == (360.0, 0.0, "longest-job")
    assert (
        policy_options("gavel")
        == {"reallocation_interval": 1920.0}
        == policy_options("gavel-makespan")
    )
    assert policy_options("hadar") == {} == policy_options("tiresias")
    policy, _, _ = setup("gavel", TABLE)
    assert policy.config.reallocation_interval == GAVEL_REALLOCATION_INTERVAL_S


def test_multi_node_placements_run_at_the_consolidated_rate():
    cluster = Cluster("c", (Node("a", {"v100": 2}), Node("b", {"v100": 2})))
    j = job(0, gpus=4)
    spread = {"a": {"v100": 2}, "b": {"v100": 2}}
    consolidated = TABLE.lookup(R18, "v100", 4, True)
    assert TABLE.rate(j, spread, cluster) < consolidated  # our default: unconsolidated figure
    assert ConsolidatedThroughput(TABLE).rate(j, spread, cluster) == pytest.approx(consolidated)


def test_rounds_end_with_their_longest_job_and_no_restart_penalty():
    cluster = Cluster("c", (Node("a", {"v100": 2}),))
    jobs = [
        job(0, steps=24.09 * 100),
        job(1, steps=24.09 * 1000),
        job(2, steps=24.09 * 50, arrival=10.0),
    ]
    policy, cfg, tp = setup("gavel", TABLE)
    res = simulate(cluster, jobs, policy, tp, cfg)
    assert res.rounds[0].duration == pytest.approx(360.0)
    # Job 1 alone at the end: its last round ends when it does, before 360 s.
    assert res.rounds[-1].duration < 360.0
    assert res.jobs[1].finish == pytest.approx(res.rounds[-1].time + res.rounds[-1].duration)
    # Moves cost nothing: total time equals steps / rate for a job that ran alone on one GPU.
    assert all(r.duration <= 360.0 for r in res.rounds)


def test_gavel_policy_reallocates_at_most_every_1920_s_in_compatible_mode():
    cluster = Cluster("c", (Node("a", {"v100": 2}), Node("b", {"k80": 2})))
    jobs = [job(i, steps=24.09 * (400 + 300 * i), arrival=250.0 * i) for i in range(8)]
    policy, cfg, tp = setup("gavel", TABLE)
    res = simulate(cluster, jobs, policy, tp, cfg)
    solves = [r for r in res.rounds if r.info.get("lp_solved")]
    prev_running = {
        r.index: res.rounds[i - 1].running_jobs if i else 0 for i, r in enumerate(res.rounds)
    }
    last = 0.0
    for r in solves:
        if last > 0.0 and prev_running[r.index] > 0:
            assert r.time - last >= 1920.0 - 1e-6, (r.time, last)
        last = r.time
    assert len(solves) >= 2


def test_simulate_cli_gavel_compatible(tmp_path, capsys):
    out = tmp_path / "run"
    code = main(
        [
            "simulate",
            "--policy",
            "gavel",
            "--workload",
            "philly-24",
            "--gavel-compatible",
            "--out",
            str(out),
            "--no-progress",
        ]
    )
    assert code == 0
    summary = json.loads((out / "summary.json").read_text())
    assert (
        summary["config"]["restart_penalty_s"] == 0.0
        and summary["config"]["round_end"] == "longest-job"
    )
    assert 0 < summary["gpu_util_gavel"] <= 1
