"""Nodes joining and leaving mid-run (``SimConfig.node_stream`` / ``--node-stream``) and the
BFTrainer, FreeTrain and MalleTrain policies on the round loop."""

from __future__ import annotations

import pytest

from hadar.core.cluster import Cluster, Node
from hadar.core.jobs import Job
from hadar.core.node_stream import NodeEvent, build_stream
from hadar.policy import make_policy
from hadar.simulator import SimConfig, simulate
from tests.hadar.helpers import TABLE, context

CLUSTER = Cluster("four", tuple(Node(f"n{i}", {"v100": 2}) for i in range(4)))
STREAM = build_stream(
    [
        NodeEvent(0, "n0", "join"),
        NodeEvent(0, "n1", "join"),
        NodeEvent(0, "n2", "join"),
        NodeEvent(500, "n3", "join"),
        NodeEvent(700, "n0", "leave"),
        NodeEvent(1500, "n0", "join"),
    ],
    end=2000,
)


def elastic_jobs(n: int = 3, steps: float = 100_000) -> list[Job]:
    return [Job(i, "ResNet-18 (batch size 64)", 2, steps, min_gpus=2, max_gpus=8) for i in range(n)]


@pytest.mark.parametrize("policy", ["bftrainer", "freetrain", "malletrain", "hadar", "hadare"])
def test_rounds_follow_the_stream(policy: str) -> None:
    cfg = SimConfig(round_s=360, restart_penalty_s=10, node_stream=STREAM)
    r = simulate(CLUSTER, elastic_jobs(), make_policy(policy), TABLE, cfg)
    starts = [x.time for x in r.rounds]
    assert 500 in starts and 700 in starts  # a round ends at every event
    assert all(j.finish is not None for j in r.jobs)
    # nothing runs on a node before it joins or while it is gone
    assert not [p for p in r.placements if p.node == "n3" and p.time < 500]
    assert not [p for p in r.placements if p.node == "n0" and 700 <= p.time < 1500]
    assert r.config["node_stream"] == STREAM.source


def test_a_leave_preempts_and_costs_a_restart() -> None:
    cfg = SimConfig(round_s=360, restart_penalty_s=10, node_stream=STREAM)
    r = simulate(CLUSTER, elastic_jobs(1, 200_000), make_policy("bftrainer"), TABLE, cfg)
    on_n0 = {p.job_id for p in r.placements if p.node == "n0" and p.time < 700}
    assert on_n0 == {0}
    assert r.jobs[0].restarts >= 1  # it lost n0 at 700 without warning


def test_no_node_up_waits_for_the_next_join() -> None:
    late = build_stream([NodeEvent(1000, "n1", "join")], end=1000)
    cfg = SimConfig(round_s=360, node_stream=late)
    r = simulate(CLUSTER, elastic_jobs(1, 5_000), make_policy("bftrainer"), TABLE, cfg)
    assert r.rounds[0].time == 1000
    assert {p.node for p in r.placements} == {"n1"}


def test_bftrainer_plans_whole_nodes_within_each_jobs_range() -> None:
    jobs = elastic_jobs(2)
    plan = make_policy("bftrainer").decide(context(CLUSTER, jobs))
    used = [n for a in plan.assignments for n in a.placement]
    assert len(used) == len(set(used))  # a node runs one Trainer
    for a in plan.assignments:
        assert all(per == {"v100": 2} for per in a.placement.values())  # whole nodes
        assert 2 <= a.num_gpus <= 8
    assert plan.info["milp_status"] == "optimal"


def test_malletrain_profiles_top_scale_first_then_down() -> None:
    jobs = elastic_jobs(1)
    policy = make_policy("malletrain")
    ctx = context(CLUSTER, jobs)
    first = policy.decide(ctx)
    (a,) = first.assignments
    top = len(a.placement)
    assert top == 2  # profile_scales up to half the pool: 1, 2 -> start at the top
    assert policy.state()["profile"] == {"0": [2, 1]}
    # the next round measures what ran and scales down (inverse order: no second scale-up)
    ctx2 = context(CLUSTER, jobs, current={(0, 0): a.placement})
    second = policy.decide(ctx2)
    assert len(second.assignments[0].placement) == 1
    assert policy.state()["measured"] == {
        "0": {"2": pytest.approx(TABLE.rate(jobs[0], a.placement, CLUSTER))}
    }
    # a restored policy decides the same
    again = make_policy("malletrain")
    again.restore(policy.state())
    assert again.state() == policy.state()


def test_waiting_for_the_pool_to_grow_is_not_a_stall() -> None:
    """A 4-GPU rigid job on a pool of one 2-GPU node: no stall error while joins are ahead; once
    the stream has ended with too few nodes, the usual 'cannot place' error."""
    from hadar.simulator.engine import SimulationLimitError

    rigid = [Job(0, "ResNet-18 (batch size 64)", 4, 5_000)]
    grows = build_stream([NodeEvent(0, "n0", "join"), NodeEvent(600, "n1", "join")], end=600)
    cfg = SimConfig(round_s=10, stall_rounds=5, node_stream=grows)
    r = simulate(CLUSTER, rigid, make_policy("hadar"), TABLE, cfg)
    assert r.jobs[0].start is not None and r.jobs[0].start >= 600
    never = build_stream([NodeEvent(0, "n0", "join")], end=60)
    with pytest.raises(SimulationLimitError, match="cannot place"):
        simulate(
            CLUSTER,
            rigid,
            make_policy("hadar"),
            TABLE,
            SimConfig(round_s=10, stall_rounds=5, node_stream=never),
        )


def test_a_stopped_simulation_carries_its_run_up_to_the_stop() -> None:
    """The 'cannot place' error holds the run until the stop: the job that fit has finished, the
    gang the last pool cannot hold has not, and the stop time is that of the last idle round."""
    from hadar.simulator.engine import SimulationLimitError

    jobs = [
        Job(0, "ResNet-18 (batch size 64)", 1, 500),
        Job(1, "ResNet-18 (batch size 64)", 4, 500),
    ]
    never = build_stream([NodeEvent(0, "n0", "join")], end=60)
    with pytest.raises(SimulationLimitError, match="cannot place job.s. 1") as err:
        simulate(
            CLUSTER,
            jobs,
            make_policy("hadar"),
            TABLE,
            SimConfig(round_s=10, stall_rounds=5, node_stream=never),
        )
    partial, at = err.value.partial, err.value.stopped_at_s
    assert partial is not None and at is not None
    assert [j.finish is not None for j in partial.jobs] == [True, False]
    assert partial.jobs[0].finish is not None and partial.jobs[0].finish <= at
    assert len(partial.rounds) >= 5 and partial.rounds[-1].time == at


def test_a_round_limit_reached_through_a_dense_stream_names_the_stream() -> None:
    """Events a millisecond apart cut every round short: the limit's message named the workload
    ("shorten the workload") instead of the stream that made the rounds."""
    from hadar.simulator.engine import SimulationLimitError

    flicker = build_stream(
        [NodeEvent(i / 1000, "n1", "leave" if i % 2 else "join") for i in range(400)]
        + [NodeEvent(0, "n0", "join")],
        end=1,
    )
    jobs = [Job(0, "ResNet-18 (batch size 64)", 2, 1e9)]
    cfg = SimConfig(round_s=360, node_stream=flicker, max_rounds=100)
    with pytest.raises(SimulationLimitError) as err:
        simulate(CLUSTER, jobs, make_policy("hadar"), TABLE, cfg)
    message = str(err.value)
    assert "after 100 rounds, 100 of them cut short by the node stream" in message, message
    assert "thin the stream or raise the limit" in message and "workload" not in message
