"""Gavel-compatible mode: run any policy the way Gavel's own simulator runs its policies.

Gavel's simulator (``scheduler.py`` in Gavel, simulation mode) differs from our default
harness in four ways, each reproduced here:

* no checkpoint-restart penalty (``restart_penalty_s = 0``);
* a round ends when its longest scheduled run ends (``round_end = "longest-job"``), at most
  ``round_s`` (360 s) after it started;
* a multi-GPU job always runs at its *consolidated* W-GPU throughput, however its GPUs are
  spread over nodes (:class:`ConsolidatedThroughput`);
* Gavel's own policies recompute their allocation at most every 1,920 s
  (``minimum_time_between_allocation_resets``, :func:`policy_options`).

Utilisation in Gavel's sense (mean over GPUs of busy time / elapsed time) is the summary key
``gpu_util_gavel``. docs/baselines.md lists every difference between the two modes.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from typing import Any

import numpy as np

from estimators.throughput import EstimatedCell, ThroughputModel
from hadar.core.cluster import Cluster
from hadar.core.jobs import Job
from hadar.policy import Policy, find_policy_info
from hadar.simulator.engine import SimConfig

GAVEL_ROUND_S = 360.0
"""Gavel's ``time_per_iteration``."""
GAVEL_REALLOCATION_INTERVAL_S = 1920.0
"""Gavel's ``minimum_time_between_allocation_resets``."""


def sim_config(round_s: float = GAVEL_ROUND_S, **overrides: Any) -> SimConfig:
    """The simulator preset: no restart penalty, rounds end with their longest run."""
    return SimConfig(round_s=round_s, restart_penalty_s=0.0, round_end="longest-job", **overrides)


def policy_options(policy: str) -> dict[str, Any]:
    """Constructor options that put ``policy`` in Gavel-compatible mode (Gavel's own policies,
    those that declare ``PolicyInfo.gavel_native``)."""
    info = find_policy_info(policy)
    if info is not None and info.gavel_native:
        return {"reallocation_interval": GAVEL_REALLOCATION_INTERVAL_S}
    return {}


def setup(
    policy: str,
    throughput: ThroughputModel,
    round_s: float = GAVEL_ROUND_S,
    options: Mapping[str, str] | None = None,
    **config: Any,
) -> tuple[Policy, SimConfig, ThroughputModel]:
    """Policy (with ``--policy-opt`` ``options``), simulator config and throughput model of a
    Gavel-compatible run of ``policy``."""
    from hadar.policy_options import policy_with_options

    return (
        policy_with_options(policy, options, **policy_options(policy)),
        sim_config(round_s, **config),
        ConsolidatedThroughput(throughput),
    )


class ConsolidatedThroughput(ThroughputModel):
    """Wraps a model so that every placement runs at the consolidated rate (Gavel's simulator)."""

    def __init__(self, base: ThroughputModel) -> None:
        self.base = base

    def rate_class(self, job: Job) -> Hashable:
        return self.base.rate_class(job)

    def cell_rates(self, job: Job, cluster: Cluster) -> tuple[np.ndarray, np.ndarray]:
        cons, _ = self.base.cell_rates(job, cluster)
        return cons, cons

    def estimated_cells(self, jobs: Iterable[Job], cluster: Cluster) -> list[EstimatedCell]:
        return [c for c in self.base.estimated_cells(jobs, cluster) if c.placement != "multi-node"]

    def reference_job_types(self) -> list[tuple[str, int]]:
        return self.base.reference_job_types()

    def describe(self, job: Job, cluster: Cluster) -> str:
        return f"{self.base.describe(job, cluster)}, consolidated rates only (Gavel-compatible)"
