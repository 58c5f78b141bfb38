"""Refills (``Assignment.after``): a run that starts mid-round on the GPUs another job's run left.
The simulator starts it when that run stops, books the GPU time of both, writes the refill in
``placements.csv``; plans that break the rules are refused, as are refills on a driver that
cannot start a run mid-round. ``hadar run``'s side: ``tests/hadar/runtime/test_refill_dispatch.py``."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from estimators.throughput import GavelThroughputTable, TableKey
from hadar.core.cluster import Cluster, Node
from hadar.core.jobs import Job
from hadar.loop import PolicyError, validate_plan
from hadar.policy import Assignment, Policy, PolicyInfo, RoundContext, RoundPlan
from hadar.runtime.config import RuntimeKnobs
from hadar.runtime.coordinator import Coordinator
from hadar.simulator import SimConfig, simulate
from hadar.simulator.engine import SimulatorExecutor
from hadar.simulator.output import result_frames
from hadare.policy import HadarEConfig

ROUND = 360.0
TABLE = GavelThroughputTable({TableKey("A", "v100", 1, True): 1.0}, "one type, 1 step/s")
CLUSTER = Cluster("two", (Node("a", {"v100": 1}), Node("b", {"v100": 1})))
A = {"a": {"v100": 1}}
B = {"b": {"v100": 1}}


class _Planned(Policy):
    """Plays ``plans(round index, unfinished job ids)``."""

    name = "refill-test"
    info = PolicyInfo(title="refill test", colour="#123456")

    def __init__(self, plans: Callable[[int, set[int]], list[Assignment]]) -> None:
        self.plans = plans

    def decide(self, ctx: RoundContext) -> RoundPlan:
        return RoundPlan(tuple(self.plans(ctx.round_index, {s.job_id for s in ctx.jobs})))


def _simulate(jobs: list[Job], plans: Callable[[int, set[int]], list[Assignment]]):
    return simulate(CLUSTER, jobs, _Planned(plans), TABLE, SimConfig(round_s=ROUND))


def test_a_refill_starts_when_the_run_it_follows_stops_and_both_are_booked():
    jobs = [Job(0, "A", 1, 100.0), Job(1, "A", 1, 1_000.0)]

    def plans(r: int, left: set[int]) -> list[Assignment]:
        if r == 0:  # job 0 finishes 100 s in; job 1's second copy takes node a from then on
            return [Assignment(0, A), Assignment(1, B, copy=2), Assignment(1, A, copy=1, after=0)]
        return [Assignment(1, B, copy=2)]

    result = _simulate(jobs, plans)
    finish = {j.job_id: j.finish for j in result.jobs}
    assert finish[0] == pytest.approx(100.0)
    # round 0: 360 steps on b and 260 on a (100 s to 360 s; job 1 had not started, so no
    # restart penalty); round 1: the 380 left on b, where it ran alone before (no penalty)
    assert finish[1] == pytest.approx(ROUND + 380.0)
    first = result.rounds[0]
    assert first.busy_node_seconds == pytest.approx(2 * ROUND)  # a: 0-100 and 100-360; b: all
    assert first.busy_gpu_seconds == pytest.approx(2 * ROUND)
    placements = result_frames(result)["placements"]
    refill = placements[(placements["round"] == 0) & (placements["job"] == 1)]
    after = dict(zip(refill["node"], refill["after"].fillna(-1).astype(int), strict=True))
    assert after == {"a": 0, "b": -1}


def test_a_refill_after_a_run_that_never_stops_never_runs():
    jobs = [Job(0, "A", 1, 1_000.0), Job(1, "A", 1, 500.0)]

    def plans(r: int, left: set[int]) -> list[Assignment]:
        if r == 0:  # job 0 holds node a for the whole round: the refill never gets it
            return [Assignment(0, A), Assignment(1, A, copy=1, after=0)]
        return [Assignment(j, A if j == 0 else B) for j in sorted(left)]

    result = _simulate(jobs, plans)
    one = next(j for j in result.jobs if j.job_id == 1)
    assert one.queueing_delay == pytest.approx(ROUND)  # it did not start in round 0
    assert one.finish == pytest.approx(ROUND + 500.0)
    assert result.rounds[0].busy_node_seconds == pytest.approx(ROUND)


@pytest.mark.parametrize(
    ("plan", "message"),
    [
        ([Assignment(0, A), Assignment(1, B, copy=1, after=0)], "does not run on"),
        ([Assignment(0, A), Assignment(1, A, after=0)], "only a copy on one node"),
        (
            [
                Assignment(0, A),
                Assignment(1, A, copy=1, after=0),
                Assignment(2, A, copy=1, after=0),
            ],
            "does not run on",
        ),
        (
            [
                Assignment(0, A),
                Assignment(1, B),
                Assignment(1, A, copy=1, after=0),
                Assignment(2, B, copy=1, after=1),
            ],
            "has a refill itself",
        ),
    ],
    ids=["other-node", "not-a-copy", "two-on-one-gpu", "chained"],
)
def test_plans_breaking_the_refill_rules_are_refused(plan, message):
    jobs = [Job(0, "A", 1, 100.0), Job(1, "A", 1, 1_000.0), Job(2, "A", 1, 1_000.0)]
    with pytest.raises(PolicyError, match=message):
        _simulate(jobs, lambda r, left: plan)


def test_both_drivers_play_refills_and_one_that_cannot_refuses_them():
    assert SimulatorExecutor.plays_refills and Coordinator.plays_refills
    assert HadarEConfig().refill  # in both: the same policy, no knob a driver fixes
    assert "refill" not in RuntimeKnobs().fixed_for("hadare")
    jobs = [Job(0, "A", 1, 100.0), Job(1, "A", 1, 1_000.0)]
    executor = SimulatorExecutor(CLUSTER, jobs, "refill-test", TABLE, SimConfig(round_s=ROUND))
    executor.admit_arrivals()
    ctx = executor.context(0)
    plan = RoundPlan((Assignment(0, A), Assignment(1, A, copy=1, after=0)))
    validate_plan(plan, ctx)  # a driver that plays refills takes it
    with pytest.raises(PolicyError, match="cannot start"):
        validate_plan(plan, ctx, refills=False)
