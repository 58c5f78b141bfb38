"""Elastic jobs on real nodes: each round's training spec at the allocation's GPU count and batch
size, and what the worker measured, filed where policies read measurements.

A rescale is a checkpoint-restart: every round starts each job's workers afresh from its last
consolidated checkpoint (``hadar/runtime/dispatch.py``), so a round at a new GPU count or batch
size is simply a round with another gang size and spec. For an elastic job (``Job.is_elastic``)
the spec's ``batch_size`` is the job's initial *total* batch M0; a round at W GPUs and total
batch M (the plan's ``Assignment.batch_size``, else M0) trains ``round(M / W)`` samples per
rank, and its learning rate is the spec's scaled by Pollux's rule for the model's optimiser
(Table 1: AdaScale's gain for SGD at the job's last measured gradient statistics, the square
root of M / M0 for Adam). The worker is asked to measure (``--measure``): step and sync times and
gradient norms come back in its result and go to the run's online throughput model
(:meth:`estimators.online.OnlineThroughput.observe_iterations`), which is the round context's
``throughput``: the path measured throughputs already take to every policy.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from estimators.iterations import IterationSample

__all__ = ["IterationSample", "event_fields", "local_batch", "round_spec", "sample_of"]
from goodput.scaling import LrRule, grad_of, lr_factor
from hadar.core.errors import InputError
from hadar.core.jobs import Job, Placement, placement_gpus

LR_RULES: Mapping[str, LrRule] = {
    "IC": "adascale",
    "LM": "adascale",
    "RS": "adascale",
    "LT": "sqrt",
    "MM": "sqrt",
}
"""The learning-rate rule of each physical workload's optimiser (SGD: AdaScale, Adam: square
root; docs/worker.md lists the optimisers)."""


def local_batch(total: int, world: int) -> int:
    """Samples per rank when ``world`` ranks train a total batch of ``total`` (at least 1)."""
    return max(1, round(total / world))


def round_spec(
    job: Job, batch_size: int | None, world: int, history: tuple[IterationSample, ...] = ()
) -> dict[str, Any]:
    """The spec an elastic job trains this round on ``world`` ranks at total batch
    ``batch_size`` (None: its initial batch): per-rank batch and scaled learning rate."""
    spec = dict(job.spec)
    m0 = int(spec["batch_size"])
    local = local_batch(batch_size or m0, world)
    grad = next(
        (g for s in reversed(history) if (g := grad_of(s, m0)) is not None),
        None,
    )
    rule = LR_RULES.get(str(spec["model"]).upper(), "sqrt")
    spec["batch_size"] = local
    spec["lr"] = float(spec["lr"]) * lr_factor(rule, grad, m0, local * world)
    return spec


def sample_of(
    round_: int, placement: Placement, steps: int, measured: Mapping[str, Any] | None
) -> IterationSample | None:
    """The worker's ``elastic`` record as an :class:`IterationSample` (None if the round trained
    no step or the record is missing or malformed: the round's steps still count)."""
    if not measured or steps < 1:
        return None
    nodes = [n for n, per in placement.items() if sum(per.values()) > 0]
    world = placement_gpus(placement)
    try:
        return IterationSample(
            round=round_,
            num_nodes=len(nodes),
            num_replicas=world,
            local_bsz=int(measured["local_bsz"]),
            steps=steps,
            step_time=float(measured["step_time"]),
            sync_time=float(measured["sync_time"]),
            replica_sqnorms=tuple(float(x) for x in measured.get("replica_sqnorms") or ()),
            mean_sqnorm=_opt(measured.get("mean_sqnorm")),
            diff_sqnorm=_opt(measured.get("diff_sqnorm")),
            dot=_opt(measured.get("dot")),
        )
    except (InputError, KeyError, TypeError, ValueError):
        return None


def _opt(v: Any) -> float | None:
    return None if v is None else float(v)


def event_fields(sample: IterationSample | None) -> dict[str, Any]:
    """What a ``result`` event says of an elastic round (nothing for other rounds)."""
    if sample is None:
        return {}
    return {
        "gpus": sample.num_replicas,
        "local_bsz": sample.local_bsz,
        "batch_size": sample.local_bsz * sample.num_replicas,
        "step_time": round(sample.step_time, 6),
        "sync_time": round(sample.sync_time, 6),
        "replica_sqnorms": [round(x, 9) for x in sample.replica_sqnorms],
        "mean_sqnorm": sample.mean_sqnorm,
        "diff_sqnorm": sample.diff_sqnorm,
        "dot": sample.dot,
    }
