"""A real run's utilisation counts training only (worker start-up is reported apart), and its
node chart names each job in a legend."""

from __future__ import annotations

from typing import Any

import pytest

from hadar.runtime.outputs import ROUND_COLUMNS, nodes_figure, round_use


def _copy(job: int, node: str, wall_s: float, train_s: float, steps: int, kind: str = "ok") -> dict:
    return {
        "job": job,
        "copy": 0,
        "node": node,
        "placement": {node: {"t4": 1}},
        "kind": kind,
        "steps": steps,
        "train_s": train_s,
        "wall_s": wall_s,
    }


def test_a_round_that_trained_nothing_is_not_busy_and_its_start_up_is_reported_apart() -> None:
    """A resumed round whose copy spent 28 of 30 s starting and trained 0 steps: CRU 0 (it was
    0.93 when start-up counted as busy), start-up 28 node-seconds."""
    use = round_use([_copy(0, "a", wall_s=28.0, train_s=0.0, steps=0)], duration=30.0)
    assert use["busy_node_seconds"] == 0.0 and use["busy_gpu_seconds"] == 0.0
    assert (use["busy_nodes"], use["busy_gpus"]) == (0, 0)
    assert use["startup_node_seconds"] == pytest.approx(28.0)
    assert use["startup_gpu_seconds"] == pytest.approx(28.0)


def test_training_is_busy_start_up_and_failed_copies_are_not() -> None:
    copies = [
        _copy(0, "a", wall_s=30.0, train_s=20.0, steps=100),
        _copy(1, "b", wall_s=12.0, train_s=9.0, steps=40, kind="timeout"),  # counted nothing
        _copy(2, "c", wall_s=50.0, train_s=45.0, steps=10),  # capped at the round's length
    ]
    use = round_use(copies, duration=40.0)
    assert use["busy_node_seconds"] == pytest.approx(20.0 + 0.0 + 40.0)
    assert use["startup_node_seconds"] == pytest.approx(10.0 + 12.0 + 0.0)
    assert (use["busy_nodes"], use["busy_gpus"]) == (2, 2)
    assert use["spans"]["a"] == {"job": 0, "held": 30.0, "train": 20.0, "steps": 100, "ok": True}
    assert {"startup_cru", "startup_gru", "startup_node_seconds"} <= set(ROUND_COLUMNS)


def _round(index: int, spans: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return {"round": index, "time": 30.0 * index, "spans": spans}


def test_the_node_chart_names_every_job_and_what_its_bars_mean(tmp_path) -> None:
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    span = {"held": 30.0, "train": 20.0, "steps": 5, "ok": True}
    rounds = [
        _round(0, {"a": {**span, "job": 0}, "b": {**span, "job": 2}}),
        _round(1, {"a": {**span, "job": 1}, "b": {**span, "job": 2, "ok": False}}),
    ]
    jobs = [{"id": 0, "type": "MM"}, {"id": 1, "type": "LT"}, {"id": 2, "type": "WR"}]
    fig = nodes_figure("hadare", rounds, jobs)
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert labels == ["J0: MM", "J1: LT", "J2: WR", "worker start-up", "training", "failed copy"]
    assert nodes_figure("hadare", [], jobs) is None
