"""One node-stream replay of a reproduction (a picklable cell for :func:`hadar.sweep.run_cells`):
Trainers of BFTrainer's Table 2 on a generated stream of one machine's idle nodes
(``hadar.simulator.malleable``), shared by ``reproduce bftrainer`` and ``reproduce malletrain``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hadar import sweep

TRAINERS = 300
"""Trainers queued at time 0 (more than any run finishes: the pool never runs dry)."""


@dataclass(frozen=True)
class ReplayCell:
    system: str
    kind: str
    """``hpo`` (all ShuffleNet) or ``nas`` (Table 2's models in turn)."""
    nodes: int
    hours: float
    seed: int
    preset: str = "summit"
    checkpoint_s: float | None = None
    """None: a leave loses no work (BFTrainer's model); else ``ReplayConfig.checkpoint_s``."""


def run_replay(cell: ReplayCell) -> dict[str, Any]:
    """Throughput (samples/s), Trainers completed and BFTrainer's U of one replay."""
    from hadar.simulator.malleable import ReplayConfig, replay, utilisation_efficiency
    from hadar.workloads.malleable import trainer_workload
    from hadar.workloads.node_streams import PRESETS, generate_stream

    names = [f"n{i:05d}" for i in range(cell.nodes)]
    stream = generate_stream(names, cell.hours, cell.seed, PRESETS[cell.preset])
    jobs = trainer_workload(cell.kind, TRAINERS)
    result = replay(
        stream, names, jobs, ReplayConfig(system=cell.system, checkpoint_s=cell.checkpoint_s)
    )
    return {
        "throughput": result.throughput,
        "completed": result.completed,
        "utilisation": utilisation_efficiency(result, jobs),
        "mean_idle_nodes": result.idle_node_s / (result.hours * 3600),
        "rescale_node_h_per_h": result.lost_rescale_node_s / 3600 / result.hours,
        "preempt_node_h_per_h": result.lost_preempt_node_s / 3600 / result.hours,
        "lost_work_share": result.lost_work / (result.samples + result.lost_work)
        if result.samples + result.lost_work > 0
        else 0.0,
    }


def run_replays(
    cells: Sequence[ReplayCell], workers: int | None
) -> dict[ReplayCell, dict[str, Any]]:
    """Every cell's figures (``workers`` processes)."""
    out = sweep.run_cells(run_replay, list(cells), sweep.default_workers(len(cells), workers))
    return dict(zip(cells, out, strict=True))
