"""HadarE's look-ahead: a plan the never-behind rule refuses is taken when, rolled out, it
finishes the jobs sooner and never later than plain Hadar; its guide survives a restart."""

from __future__ import annotations

import json

import pytest

from hadar.api import simulate
from hadar.loop import RoundLoop
from hadar.policy import RoundContext
from hadar.scenario import load_scenario
from hadar.simulator.engine import SimConfig, SimulatorExecutor
from hadare.policy import HadarEConfig, HadarEPolicy, _Check
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


def test_no_look_ahead_on_a_cluster_of_more_nodes_than_lookahead_nodes():
    """Lab M-2 has five nodes: with ``lookahead_nodes=4`` HadarE runs as with no look-ahead
    (a rollout's round costs about the square of the nodes); with 5 it looks ahead."""
    rule_only = simulate(LAB, "M-2", policy=HadarEPolicy(HadarEConfig(lookahead_jobs=0))).summary
    capped = simulate(LAB, "M-2", policy=HadarEPolicy(HadarEConfig(lookahead_nodes=4))).summary
    at_five = simulate(LAB, "M-2", policy=HadarEPolicy(HadarEConfig(lookahead_nodes=5))).summary
    assert capped["ttd_s"] == rule_only["ttd_s"] and capped["avg_jct_s"] == rule_only["avg_jct_s"]
    assert at_five["ttd_s"] < 0.85 * capped["ttd_s"]


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


def test_the_look_ahead_judges_each_plan_with_the_refills_the_round_will_make(monkeypatch):
    """AWS M-4: a job finishing mid-round hands its node to a copy of another job (a refill).
    The rollouts play each candidate round as the round will run, refills included, and never
    with the previous round's refills; before, they left the refill out and chose a plan that
    moved the job that finishes last onto a K80."""
    seen: list[tuple[float, int, frozenset[str], dict]] = []
    now = [0.0]
    real_play = _Check.play
    real_decide = HadarEPolicy.decide

    def play(self: _Check, job_id: int, per_node: dict) -> object:
        if not self.never_behind and self.policy is policy:  # the look-ahead's rollouts
            seen.append((now[0], job_id, frozenset(per_node), dict(self.policy._refills)))
        return real_play(self, job_id, per_node)

    refilled: list[tuple[float, int, str]] = []

    policy = HadarEPolicy()

    def decide(self: HadarEPolicy, ctx: RoundContext) -> object:
        if self is not policy:  # a rollout's HadarE
            return real_decide(self, ctx)
        now[0] = ctx.now
        plan = real_decide(self, ctx)
        refilled.extend((ctx.now, j, node) for j, node in self._refills)
        return plan

    monkeypatch.setattr(_Check, "play", play)
    monkeypatch.setattr(HadarEPolicy, "decide", decide)
    simulate("cluster_configs/aws-5node.yaml", "M-4", policy=policy)
    judged = [(t, j, node) for t, j, node in refilled if any(s[0] == t for s in seen)]
    assert judged  # a round both looked ahead and refilled
    for t, j, node in judged:
        assert any(s[0] == t and s[1] == j and node in s[2] and (j, node) in s[3] for s in seen), (
            f"round at {t:g} s: job {j}'s refill on {node} was never played by a rollout"
        )
    for _, job, nodes, refills in seen:  # none left from an earlier round or another plan
        assert all(node in nodes for j, node in refills if j == job)


@pytest.mark.parametrize("cluster", ["aws-5node", "lab-5node"])
def test_the_projected_ttd_never_rises_and_is_the_ttd_the_run_reaches(cluster):
    """Each look-ahead's rollout of the plan it settles on plays this round as it runs and then
    what HadarE without look-ahead will do, so in the simulator (every job known at the start)
    the projected TTD (``projected_ttd_s``) can only fall from one round to the next, and the
    last one is the run's TTD. Before the rollouts played refills it rose on 17 of the 24
    mixes."""
    for mix in range(1, 13):
        sim = simulate(f"cluster_configs/{cluster}.yaml", f"M-{mix}", policy="hadare")
        projected = [
            r.info["projected_ttd_s"] for r in sim.records.rounds if "projected_ttd_s" in r.info
        ]
        assert projected, f"M-{mix}: no round looked ahead"
        for before, after in zip(projected, projected[1:], strict=False):
            assert after <= before * (1 + 1e-9), f"M-{mix}: projected TTD rose {before} -> {after}"
        assert sim.summary["ttd_s"] == pytest.approx(projected[-1], rel=1e-9), f"M-{mix}"


def test_plain_hadars_decisions_are_remembered_only_where_a_round_may_look_ahead():
    """The replay keeps plain Hadar's decisions for the look-ahead's rollouts, which replay
    them; a HadarE that never looks ahead keys none of them (the key is the whole state)."""
    ahead, never = HadarEPolicy(), HadarEPolicy(HadarEConfig(lookahead_jobs=0))
    simulate(LAB, "M-2", policy=ahead)
    simulate(LAB, "M-2", policy=never)
    assert ahead.replay.decisions._plans
    assert not never.replay.decisions._plans
