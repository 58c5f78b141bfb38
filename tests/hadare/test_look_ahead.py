"""HadarE's look-ahead: a plan the never-behind rule refuses is taken when, rolled out, it
finishes the jobs sooner and never later than plain Hadar; its guide survives a restart."""

from __future__ import annotations

import json

from hadar.api import simulate
from hadar.loop import RoundLoop
from hadar.scenario import load_scenario
from hadar.simulator.engine import SimConfig, SimulatorExecutor
from hadare.policy import HadarEConfig, HadarEPolicy
from tests.hadar.helpers import RecordingExecutor

LAB = "cluster_configs/lab-5node.yaml"


def test_the_look_ahead_lets_a_job_finish_later_when_the_ttd_gains():
    """Lab M-2: moving the short MM job to a slower GPU lets the Transformer's forks cut the
    TTD; the never-behind rule alone refuses it (MM would finish later than under Hadar)."""
    hadar = simulate(LAB, "M-2", policy="hadar").summary
    rule_only = simulate(LAB, "M-2", policy=HadarEPolicy(HadarEConfig(lookahead_jobs=0))).summary
    ahead = simulate(LAB, "M-2", policy="hadare").summary
    assert ahead["ttd_s"] < 0.85 * rule_only["ttd_s"]
    assert ahead["ttd_s"] <= hadar["ttd_s"] and ahead["avg_jct_s"] <= hadar["avg_jct_s"]


def _decisions(interrupt_at: int | None) -> tuple[list, dict]:
    cluster, jobs, table = load_scenario(LAB, "M-10")
    ex = RecordingExecutor(SimulatorExecutor(cluster, jobs, "lab", table, SimConfig(round_s=360.0)))
    policy = HadarEPolicy()
    index, persisted = 0, {}
    if interrupt_at is not None:
        index = RoundLoop(policy, ex).run(max_rounds=interrupt_at)
        persisted = json.loads(json.dumps(ex.decisions[-1].policy_state))
        policy = HadarEPolicy()
        policy.restore(persisted)
    RoundLoop(policy, ex).run(first_index=index)
    return [(d.ctx.round_index, d.plan.assignments) for d in ex.decisions], persisted


def test_a_restart_after_the_look_ahead_chose_a_guide_decides_as_before():
    whole, _ = _decisions(None)
    resumed, persisted = _decisions(2)
    assert "guide" in persisted  # the look-ahead chose a plan in the first two rounds
    assert resumed == whole
