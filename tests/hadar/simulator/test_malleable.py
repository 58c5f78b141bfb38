"""hadar/simulator/malleable.py: how a node leaving a running Trainer is charged."""

from __future__ import annotations

import pytest

from hadar.core.node_stream import NodeEvent, build_stream
from hadar.simulator.malleable import ReplayConfig, replay
from hadar.workloads.malleable import MalleableJob, table2_points

NODES = [f"n{i}" for i in range(5)]
# 4 nodes from 0 s, a fifth joins at 250 s, n0 leaves without warning at 400 s, end at 1000 s
STREAM = build_stream(
    [NodeEvent(0, f"n{i}", "join") for i in range(4)]
    + [NodeEvent(250, "n4", "join"), NodeEvent(400, "n0", "leave")],
    end=1000,
)
# ShuffleNet (BFTrainer Table 2): 10.0k samples/s on 4 nodes, 12.6k on 5; never finishes here
JOB = MalleableJob(0, "ShuffleNet", table2_points("ShuffleNet", 8), 1e9, n_max=5)


def test_a_leave_costs_only_the_forced_scale_down_by_default() -> None:
    """BFTrainer's model: start on 4 (R_up 20 s), up to 5 at 250 s (R_up 20 s), down to 4 at
    400 s by the leave (R_dw 5 s); the work done before the leave is kept."""
    r = replay(STREAM, NODES, [JOB], ReplayConfig())
    assert r.samples == pytest.approx(230 * 10_000 + 130 * 12_600 + 595 * 10_000)
    assert r.lost_work == 0.0
    assert r.lost_rescale_node_s == pytest.approx(20 * 4 + 20 * 5)
    assert r.lost_preempt_node_s == pytest.approx(5 * 4)


def test_a_leave_loses_the_work_since_the_last_checkpoint() -> None:
    """Checkpoints every 100 s of work; the scale-up at 250 s checkpoints first, so at 400 s the
    Trainer has worked 130 s since (270-400 s on 5 nodes) and loses the last 30 s of it."""
    r = replay(STREAM, NODES, [JOB], ReplayConfig(checkpoint_s=100.0))
    lost = 30 * 12_600
    assert r.lost_work == pytest.approx(lost)
    assert r.samples == pytest.approx(230 * 10_000 + 130 * 12_600 + 595 * 10_000 - lost)
    # the interval is seconds of work: one longer than any stretch loses all of it since 250 s
    long = replay(STREAM, NODES, [JOB], ReplayConfig(checkpoint_s=1000.0))
    assert long.lost_work == pytest.approx(130 * 12_600)


def test_checkpoint_interval_must_be_positive() -> None:
    with pytest.raises(ValueError, match="checkpoint_s"):
        ReplayConfig(checkpoint_s=0.0)
