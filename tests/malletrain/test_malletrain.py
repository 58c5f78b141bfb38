"""MalleTrain's JPA pieces, FreeTrain's guess, and the event-driven replay of Trainers."""

from __future__ import annotations

from dataclasses import replace

import pytest

from hadar.core.node_stream import NodeEvent, build_stream
from hadar.simulator.malleable import ReplayConfig, replay
from hadar.workloads.malleable import MalleableJob, table2_points, trainer_workload
from hadar.workloads.node_streams import PRESETS, generate_stream
from malletrain.jpa import (
    admit_batch,
    can_profile,
    extrapolated,
    freetrain_guess,
    profile_cost,
    profile_scales,
    profile_schedule,
)


def test_inverse_order_needs_one_scale_up() -> None:
    scales = profile_scales(1, 64, 20)
    assert scales == (1, 2, 4, 8, 16, 20)
    assert profile_schedule(scales) == (20, 16, 8, 4, 2, 1)
    inverse, ascending = profile_cost((1, 2, 4, 8), r_up=20.0, r_dw=5.0)
    assert (inverse, ascending) == (35.0, 80.0)  # 1 up + 3 downs against 4 ups
    assert profile_scales(4, 8, 3) == ()  # the pool cannot hold the minimum


def test_batch_admission_and_guess() -> None:
    assert admit_batch(7, [1, 2, 3, 4, 5], 10) == ((1, 2, 3), (4, 5))
    assert admit_batch(10, [1], 10) == ((), (1,))
    assert freetrain_guess([2.0, 4.0], 8) == ((1, 3.0), (8, 24.0))


def test_replay_matches_a_hand_computed_run() -> None:
    """One ShuffleNet Trainer, 4 nodes up all hour: it starts on 4 nodes (10.0k samples/s),
    pauses R_up = 20 s, and needs 1e6 / 1e4 = 100 s more: done at 120 s."""
    stream = build_stream([NodeEvent(0, f"n{i}", "join") for i in range(4)], end=3600)
    job = MalleableJob(0, "ShuffleNet", table2_points("ShuffleNet", 4), 1e6, n_max=4)
    r = replay(stream, [f"n{i}" for i in range(4)], [job], ReplayConfig(system="bftrainer"))
    assert r.completed == 1
    assert r.samples == pytest.approx(1e6)
    assert r.lost_rescale_node_s == pytest.approx(20.0 * 4)
    assert r.lost_preempt_node_s == 0.0


@pytest.mark.parametrize("system", ["bftrainer", "freetrain", "malletrain"])
def test_replay_on_a_churning_stream(system: str) -> None:
    nodes = [f"n{i}" for i in range(24)]
    # the whole machine's event rates on 24 nodes (machine_nodes=0): a churning stream
    churning = replace(PRESETS["summit"], idle_share=0.4, machine_nodes=0)
    stream = generate_stream(nodes, 0.4, seed=2, machine=churning)
    jobs = trainer_workload("nas", 4, samples=2e7)  # long enough to finish profiling
    r = replay(stream, nodes, jobs, ReplayConfig(system=system))
    if system == "malletrain":
        again = replay(stream, nodes, jobs, ReplayConfig(system=system))
        assert replace(r, solve_seconds=0.0) == replace(again, solve_seconds=0.0)  # deterministic
    assert 0 < r.samples <= sum(j.samples for j in jobs) + 1e-6
    assert r.lost_preempt_node_s > 0  # nodes left under running Trainers
    if system == "malletrain":
        assert r.profiled > 0


def test_jpa_queues_a_job_its_largest_scale_does_not_fit() -> None:
    assert can_profile(8, 5, 3) and can_profile(8, 8, 0)
    assert not can_profile(8, 5, 2)  # back to the queue, not profiled on fewer nodes
    assert not can_profile(0, 5, 5)


def test_jpa_extrapolates_linearly_beyond_the_measured_scales() -> None:
    assert extrapolated([(1, 10.0), (2, 18.0)], 6) == ((1, 10.0), (2, 18.0), (6, 50.0))
    assert extrapolated([(4, 40.0)], 8) == ((4, 40.0), (8, 80.0))  # one point: proportional
    assert extrapolated([(1, 10.0), (2, 9.0)], 4)[-1] == (4, 9.0)  # never downwards
    assert extrapolated([(1, 10.0), (4, 30.0)], 4) == ((1, 10.0), (4, 30.0))


def test_a_profiling_run_preempted_above_its_next_scale_goes_on() -> None:
    """Profiling 8 -> 4 -> 2 -> 1 with 4 measured; 8 nodes lose 3 during the measurement at 8:
    5 still hold the next scale, so JPA goes on at 4 keeping what it measured; below the next
    scale it starts again from the top later (nodes back to the pool, measurements dropped)."""
    from hadar.simulator.malleable import _profile_preempted, _Run

    job = MalleableJob(0, "ShuffleNet", table2_points("ShuffleNet", 8), 1e8, n_max=8)
    run = _Run(job, nodes=[f"n{i}" for i in range(5)], paused_until=100.0)
    run.profile, run.measured = [8, 4, 2, 1], {16: 1.0}
    _profile_preempted(run, 60.0)
    assert (run.profile, len(run.nodes), run.step_end, run.measured) == (
        [4, 2, 1],
        4,
        160.0,
        {16: 1.0},
    )
    run.nodes = run.nodes[:1]  # below the next scale (2)
    _profile_preempted(run, 60.0)
    assert (run.profile, run.nodes, run.step_end, run.measured) == ([], [], None, {})
