from dataclasses import replace

import pytest

from hadar.core.cluster import Cluster, Node
from hadar.core.jobs import Job
from hadar.policy import Assignment, Policy, RoundContext, RoundPlan
from hadar.scheduler import HadarPolicy
from hadar.simulator import SimConfig, simulate
from hadar.simulator.engine import PolicyError
from hadar.simulator.metrics import summarize
from hadar.workloads.philly import PhillyOptions, generate
from tests.hadar.helpers import TABLE

JT = "ResNet-18 (batch size 64)"
RATE = TABLE.lookup(JT, "v100", 1)
TWO_V100 = Cluster("two", (Node("a", {"v100": 1}), Node("b", {"v100": 1})))


class Scripted(Policy):
    """Places every job on the node ``nodes[round % len(nodes)]`` (a test policy)."""

    name = "scripted"

    def __init__(self, nodes, copies=None):
        self.nodes, self.copies = nodes, copies

    def decide(self, ctx: RoundContext) -> RoundPlan:
        if self.copies:
            st = ctx.jobs[0]
            return RoundPlan(
                tuple(
                    Assignment(st.job_id, {n: {"v100": 1}}, copy=i + 1, step_budget=b)
                    for i, (n, b) in enumerate(self.copies(st.remaining_steps))
                )
            )
        node = self.nodes[ctx.round_index % len(self.nodes)]
        return RoundPlan(tuple(Assignment(s.job_id, {node: {"v100": 1}}) for s in ctx.jobs[:1]))


def test_job_finishing_mid_round_and_gru_by_hand():
    job = Job(0, JT, 1, RATE * 500)
    res = simulate(Cluster("one", (Node("a", {"v100": 1}),)), [job], Scripted(["a"]), TABLE)
    assert res.jobs[0].finish == pytest.approx(500.0)
    s = summarize(res)
    assert s["ttd_s"] == pytest.approx(500.0) and s["gru"] == pytest.approx(1.0)
    assert res.jobs[0].restarts == 0


def test_restart_penalty_is_paid_when_the_placement_changes():
    job = Job(0, JT, 1, RATE * 700)
    moving = simulate(TWO_V100, [job], Scripted(["a", "b"]), TABLE, SimConfig(restart_penalty_s=10))
    staying = simulate(TWO_V100, [job], Scripted(["a"]), TABLE, SimConfig(restart_penalty_s=10))
    assert staying.jobs[0].finish == pytest.approx(700.0)
    assert moving.jobs[0].finish == pytest.approx(710.0)
    assert moving.jobs[0].restarts == 1 and staying.jobs[0].restarts == 0
    # GPU time during the penalty is held (busy) but does no work
    assert summarize(moving)["gru"] < 1.0


def test_copies_split_steps_and_the_job_ends_when_the_last_copy_ends():
    job = Job(0, JT, 1, RATE * 400)
    steps = SimConfig(fork_progress="steps")  # the paper's accounting: every copy's steps count
    # two equal copies each take half the remaining steps: the job ends after 200 s
    halves = Scripted([], copies=lambda rem: [("a", rem / 2), ("b", rem / 2)])
    res = simulate(TWO_V100, [job], halves, TABLE, steps)
    assert res.jobs[0].finish == pytest.approx(200.0)
    assert res.jobs[0].step_sum == pytest.approx(job.total_steps)
    # uneven split: the busier copy decides
    res2 = simulate(
        TWO_V100,
        [job],
        Scripted([], copies=lambda rem: [("a", rem * 0.75), ("b", rem * 0.25)]),
        TABLE,
        steps,
    )
    assert res2.jobs[0].finish == pytest.approx(300.0)
    # goodput accounting (the default): ResNet-18 borrows CIFAR-10's noise scale, so two copies
    # at batch 64 progress as one job at 128 would, and the job needs longer
    bounded = simulate(TWO_V100, [job], halves, TABLE)
    assert bounded.jobs[0].finish > 200.0
    assert bounded.jobs[0].step_sum > job.total_steps


def test_arrivals_wait_for_the_next_round_and_idle_gaps_are_skipped():
    jobs = [Job(0, JT, 1, RATE * 100), Job(1, JT, 1, RATE * 100, arrival=10_000.0)]
    res = simulate(Cluster("one", (Node("a", {"v100": 1}),)), jobs, Scripted(["a"]), TABLE)
    assert res.jobs[1].start == pytest.approx(10_000.0) and res.jobs[1].finish == pytest.approx(
        10_100.0
    )
    assert summarize(res)["gru"] == pytest.approx(
        1.0
    )  # the idle gap has no jobs, so it does not count


def test_invalid_plans_are_rejected():
    class Greedy(Policy):
        name = "greedy"

        def decide(self, ctx):
            return RoundPlan(tuple(Assignment(s.job_id, {"a": {"v100": 1}}) for s in ctx.jobs))

    jobs = [Job(0, JT, 1, 1e4), Job(1, JT, 1, 1e4)]
    with pytest.raises(PolicyError, match="capacity"):
        simulate(TWO_V100, jobs, Greedy(), TABLE)

    class WrongGang(Policy):
        name = "wrong"

        def decide(self, ctx):
            return RoundPlan((Assignment(0, {"a": {"v100": 1}}),))

    with pytest.raises(PolicyError, match="gang"):
        simulate(TWO_V100, [Job(0, JT, 2, 1e4)], WrongGang(), TABLE)


def _strip(res):
    return (res.jobs, tuple(replace(r, decision_seconds=0.0) for r in res.rounds), res.placements)


def test_simulation_is_deterministic_for_a_seed():
    cluster = Cluster(
        "c", tuple(Node(f"n{i}", {t: 4}) for i, t in enumerate(["v100", "p100", "k80"] * 2))
    )
    jobs = generate(TABLE, PhillyOptions(num_jobs=60, seed=3))
    a = simulate(cluster, jobs, HadarPolicy(), TABLE)
    b = simulate(cluster, generate(TABLE, PhillyOptions(num_jobs=60, seed=3)), HadarPolicy(), TABLE)
    assert _strip(a) == _strip(b)
    other = generate(TABLE, PhillyOptions(num_jobs=60, seed=4))
    assert [j.job_type for j in other] != [j.job_type for j in jobs]


def test_every_job_of_the_paper_workload_completes():
    from hadar.clusters import load_cluster

    jobs = generate(TABLE, PhillyOptions())
    assert len(jobs) == 480 and all(j.arrival == 0 for j in jobs)
    res = simulate(load_cluster("sim-60gpu"), jobs, HadarPolicy(), TABLE)
    s = summarize(res)
    assert s["completed"] == 480
    assert all(j.finish is not None and j.finish > 0 for j in res.jobs)
    assert 0 < s["gru"] <= 1.0


def test_time_to_reach_ignores_runs_whose_cap_ended_at_the_breakpoint():
    """Nine copies whose budgets run out at the same moment (rate x time a rounding error short
    of the cap) and a tenth that started later: the job finishes when the tenth has done the
    rest, not as if the nine were still running."""
    from hadar.round_progress import Run, steps_by, time_to_reach

    fast = Run(10.0, 4.426088263367452, 1439.1958554634261)
    slow = Run(10.0, 2.4026681703106223, 781.2564655306031)
    late = Run(20.0, 2.4026681703106223, 781.2564655306031)
    runs = [fast] * 5 + [late] + [slow] * 4
    target = 11102.261604970146
    t = time_to_reach(runs, target, 360.0)
    assert t is not None and steps_by(runs, t) >= target - 1e-6
    assert t == pytest.approx(late.stop_time())


def _scan_time_to_reach(runs, target, horizon):
    """``time_to_reach`` as it was written first: a scan of every breakpoint from 0."""
    from hadar.round_progress import reach_slack, steps_by

    if target <= 0:
        return 0.0
    slack = reach_slack(target)
    if steps_by(runs, horizon) < target - slack:
        return None
    points = sorted(
        {0.0, horizon, *(r.start for r in runs), *(min(r.stop_time(), horizon) for r in runs)}
    )
    prev = 0.0
    for t in points:
        if t > horizon:
            break
        if steps_by(runs, t) >= target - slack:
            done_lo = steps_by(runs, prev)
            slope = sum(r.rate for r in runs if r.start <= prev < r.stop_time())
            return prev if slope <= 0 else min(t, prev + (target - done_lo) / slope)
        prev = t
    return horizon


def test_time_to_reach_bisects_to_the_scan_s_answer_bit_for_bit() -> None:
    """The breakpoint search by bisection returns exactly what a scan from 0 returns, on random
    runs (staggered starts, caps that end mid-round, targets on and between breakpoints)."""
    import random

    from hadar.round_progress import Run, steps_by, time_to_reach

    rng = random.Random(7)
    for _ in range(3000):
        runs = [
            Run(
                rng.choice([0.0, 10.0, rng.uniform(0, 400)]),
                rng.choice([0.0, rng.uniform(0.1, 50)]),
                rng.choice([rng.uniform(0, 5000), 1e9]),
            )
            for _ in range(rng.randint(1, 12))
        ]
        horizon = rng.choice([360.0, 90.0])
        total = steps_by(runs, horizon)
        target = rng.choice(
            [total, total * rng.uniform(0, 1.2), steps_by(runs, rng.uniform(0, horizon))]
        )
        assert time_to_reach(runs, target, horizon) == _scan_time_to_reach(runs, target, horizon)


def test_a_run_finishes_when_its_cap_is_reached_even_where_rate_x_time_rounds_short() -> None:
    from hadar.round_progress import Run, time_to_reach

    # 49,708,544 samples at 2.717e6/s: rate x (cap / rate) is 7e-9 short of the cap in floats
    run = Run(0.0, 2717191.740159044, 49708544.0)
    assert run.rate * (run.cap / run.rate) < run.cap
    finish = time_to_reach([run], run.cap, 60.0)
    assert finish == pytest.approx(run.cap / run.rate)  # not the round's end
    late = Run(5.0, 2717191.740159044, 49708544.0)  # after a restart
    assert time_to_reach([late], late.cap, 60.0) == pytest.approx(5.0 + late.cap / late.rate)
