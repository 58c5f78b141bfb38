"""Policy state survives a restart: for every registered policy, a run interrupted after k
rounds, whose policy is rebuilt from scratch and handed the state the loop persisted (through
JSON, as a real run stores it), makes exactly the decisions of an uninterrupted run."""

from __future__ import annotations

import json

import pytest

from hadar.core.jobs import Job
from hadar.loop import RoundLoop
from hadar.policy import POLICY_REGISTRY, Policy, make_policy
from hadar.simulator.engine import SimConfig, SimulatorExecutor
from tests.hadar.helpers import TABLE, RecordingExecutor, small_cluster

TYPES = [
    "ResNet-18 (batch size 64)",
    "ResNet-50 (batch size 64)",
    "Transformer (batch size 64)",
    "LM (batch size 20)",
    "Recommendation (batch size 2048)",
    "CycleGAN",
]


def _jobs() -> list[Job]:
    """Twelve jobs of six types and 1 or 2 GPUs arriving over an hour on an 8-GPU cluster:
    enough contention that who ran recently (Gavel's bookkeeping) decides who runs next."""
    jobs = []
    for i in range(12):
        jt, gpus = TYPES[i % len(TYPES)], (2, 1, 2, 2, 1, 1)[i % 6]
        rate = TABLE.lookup(jt, "v100", gpus)
        jobs.append(Job(i, jt, gpus, rate * 360 * (3 + i % 5), arrival=300.0 * (i // 2)))
    return jobs


def _executor() -> RecordingExecutor:
    cfg = SimConfig(round_s=360.0, restart_penalty_s=10.0)
    return RecordingExecutor(SimulatorExecutor(small_cluster(), _jobs(), "test", TABLE, cfg))


def _decisions(name: str, interrupt_at: int | None, restore: bool = True) -> list:
    ex = _executor()
    policy: Policy = make_policy(name)
    index = 0
    if interrupt_at is not None:
        index = RoundLoop(policy, ex).run(max_rounds=interrupt_at)
        persisted = json.loads(
            json.dumps(ex.decisions[-1].policy_state)
        )  # what a real run's journal holds
        policy = make_policy(name)
        if restore:
            policy.restore(persisted)
    RoundLoop(policy, ex).run(first_index=index)
    return [(d.ctx.round_index, d.plan.assignments) for d in ex.decisions]


@pytest.mark.parametrize("name", sorted(POLICY_REGISTRY))
def test_a_restored_policy_decides_as_an_uninterrupted_one(name):
    whole = _decisions(name, None)
    assert len(whole) > 12
    for k in (1, 5, 11):
        assert _decisions(name, k) == whole, (
            f"{name}: decisions differ after a restart at round {k}"
        )


STATEFUL = (
    "gavel",
    "gavel-fifo",
    "gavel-makespan",
    "themis",
    "afs",
    "afs-het",
    "afs-p",
    "pollux",
    "sia",
    "malletrain",
    "hadare",
)
"""Gavel's mechanism and the policies built on it keep their bookkeeping in their state; AFS
keeps its shares between churn events; Pollux its agents and restarts; Sia its per-type
estimates and restarts; MalleTrain its profiles;
HadarE its replay of plain Hadar."""


@pytest.mark.parametrize("name", ["gavel", "gavel-makespan", "themis", "hadare"])
def test_gavel_decisions_depend_on_the_state_a_restart_would_lose(name):
    """Without its state a rebuilt Gavel (or HadarE, without its replay of Hadar) decides
    differently: the test above can fail."""
    whole = _decisions(name, None)
    assert any(_decisions(name, k, restore=False) != whole for k in (1, 5, 11))


def test_state_is_json_and_empty_for_stateless_policies():
    for name in sorted(POLICY_REGISTRY):
        policy = make_policy(name)
        state = policy.state()
        assert json.loads(json.dumps(state)) == state
        if name not in STATEFUL:
            assert state == {}
            with pytest.raises(ValueError, match="keeps no state"):
                policy.restore({"x": 1})
