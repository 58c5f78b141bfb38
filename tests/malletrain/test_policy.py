"""malletrain/policy.py on the round loop: a profiling Trainer that loses nodes between rounds
goes on at its next scale with the survivors, keeping what it measured, and only below that
scale is profiled again from the top. The simulator drops a placement a node left from the next
round's ``current`` (hadar/simulator/engine.py), as these contexts do."""

from __future__ import annotations

from hadar.core.cluster import Cluster, Node
from hadar.core.jobs import Job, Placement
from hadar.policy import Policy, make_policy
from tests.hadar.helpers import context

NODES = tuple(Node(f"n{i}", {"v100": 2}) for i in range(8))
JOB = Job(0, "ResNet-18 (batch size 64)", 2, 100_000, min_gpus=2, max_gpus=16)  # 1-8 nodes


def _without(gone: set[str]) -> Cluster:
    return Cluster("left", tuple(n for n in NODES if n.name not in gone))


def _measured_at_4() -> tuple[Policy, Placement]:
    """Round 1 profiles at 4 nodes (half the pool; scales 4, 2, 1), round 2 measures it and
    goes down to 2."""
    policy = make_policy("malletrain")
    (first,) = policy.decide(context(Cluster("eight", NODES), [JOB])).assignments
    assert len(first.placement) == 4 and policy.state()["profile"] == {"0": [4, 2, 1]}
    plan = policy.decide(context(Cluster("eight", NODES), [JOB], current={(0, 0): first.placement}))
    (second,) = plan.assignments
    assert len(second.placement) == 2 and list(policy.state()["measured"]["0"]) == ["4"]
    return policy, second.placement


def test_a_leave_above_the_next_scale_keeps_the_measurements() -> None:
    policy, ran = _measured_at_4()
    gone = min(ran)  # one of its 2 nodes leaves: 1 still holds the next scale
    (a,) = policy.decide(context(_without({gone}), [JOB])).assignments
    assert list(a.placement) == [n for n in sorted(ran) if n != gone]
    state = policy.state()
    assert state["profile"] == {"0": [1]}  # the measurement at 2 is lost, on at 1
    assert list(state["measured"]["0"]) == ["4"]
    # a restored policy remembers where it was
    again = make_policy("malletrain")
    again.restore(state)
    assert again.state() == state


def test_a_leave_below_the_next_scale_profiles_again_from_the_top() -> None:
    policy, ran = _measured_at_4()
    policy.decide(context(_without(set(ran)), [JOB]))  # both its nodes leave
    state = policy.state()
    assert "0" not in state["measured"]  # started again: 6 nodes up, half of them is 3
    assert state["profile"] == {"0": [3, 2, 1]}
