"""The one policy interface shared by the simulator and the real cluster loop.

Each round the driver (simulator or coordinator) builds a :class:`RoundContext` and calls
``policy.decide(ctx)``; the policy returns a :class:`RoundPlan`: which jobs (or HadarE copies)
run where this round (``hadar/loop.py`` is the loop around it). Policies keep no hidden state
that matters for correctness: what they need about the past is in ``ctx.jobs`` (attained
service, time per GPU type, ...) or in their explicit :meth:`Policy.state`, which the loop
persists every round and a restarted driver restores, so it gets the same decisions. Caches
are fine.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from estimators.throughput import ThroughputModel
from hadar.core.cluster import Cluster
from hadar.core.errors import InputError
from hadar.core.jobs import JobStatus, Placement


@dataclass(frozen=True)
class Assignment:
    """One job (``copy == 0``) or one HadarE copy (``copy >= 1``) placed for one round."""

    job_id: int
    placement: Placement
    copy: int = 0
    step_budget: float | None = None
    """Steps this run should do this round; None = as many as the round allows."""
    overhead_s: float = 0.0
    """Fixed seconds of this round spent on something other than training (e.g. aggregation)."""
    batch_size: int | None = None
    """Total batch size of an elastic job this round (None: the job's own batch size)."""
    restart: bool | None = None
    """Whether this run pays the checkpoint-restart penalty this round; None lets the driver
    decide (it does when the placement differs from last round's for the same job and copy)."""

    @property
    def run_key(self) -> tuple[int, int]:
        return (self.job_id, self.copy)

    @property
    def num_gpus(self) -> int:
        return sum(c for per in self.placement.values() for c in per.values())

    @property
    def nodes(self) -> tuple[str, ...]:
        return tuple(sorted(n for n, per in self.placement.items() if sum(per.values()) > 0))


@dataclass(frozen=True)
class RoundPlan:
    """A policy's decision for one round, plus free-form diagnostics (e.g. DP statistics)."""

    assignments: tuple[Assignment, ...] = ()
    info: Mapping[str, Any] = field(default_factory=dict)

    def allocation(self) -> dict[tuple[int, int], Placement]:
        """``{(job id, copy): placement}``."""
        return {a.run_key: a.placement for a in self.assignments}

    def jobs(self) -> set[int]:
        return {a.job_id for a in self.assignments}


@dataclass(frozen=True)
class RoundContext:
    """Everything a policy may look at when deciding a round."""

    now: float
    round_index: int
    round_length: float
    cluster: Cluster
    """Nodes available this round (nodes that are down are left out)."""
    jobs: Sequence[JobStatus]
    """Arrived, unfinished jobs, ordered by (arrival, job id)."""
    current: Mapping[tuple[int, int], Placement]
    """Last round's placements by (job id, copy); empty for jobs that were not running. Drivers
    leave out placements on nodes that are not in ``cluster`` any more (down or gone)."""
    throughput: ThroughputModel
    restart_penalty: float = 10.0

    def status(self, job_id: int) -> JobStatus:
        for s in self.jobs:
            if s.job_id == job_id:
                return s
        raise KeyError(job_id)


class Policy(ABC):
    """A scheduling policy. Subclasses set ``name`` and implement :meth:`decide`."""

    name: ClassVar[str] = "policy"
    config_class: ClassVar[type | None] = None
    """The frozen dataclass of the policy's knobs (``--policy-opt`` converts values by its fields)."""

    @abstractmethod
    def decide(self, ctx: RoundContext) -> RoundPlan:
        """Return the next round's placements."""

    def state(self) -> dict[str, Any]:
        """The policy's own state that later decisions depend on, as JSON-serialisable data
        (empty for a stateless policy). The round loop takes it after every decision and a
        resumed run hands it to :meth:`restore`, so it decides as an uninterrupted run would."""
        return {}

    def restore(self, state: Mapping[str, Any]) -> None:
        """Take back a :meth:`state` (after a restart, on a freshly built policy)."""
        if state:
            raise ValueError(f"policy {self.name} keeps no state, got {sorted(state)}")


POLICY_REGISTRY: dict[str, str] = {
    "hadar": "hadar.scheduler:HadarPolicy",
    "hadar-legacy": "hadar.scheduler:HadarLegacyPolicy",
    "hadare": "hadare.policy:HadarEPolicy",
    "gavel": "baselines.gavel:GavelPolicy",
    "gavel-fifo": "baselines.gavel:GavelFifoPolicy",
    "gavel-makespan": "baselines.gavel:GavelMakespanPolicy",
    "tiresias": "baselines.tiresias:TiresiasPolicy",
    "yarn-cs": "baselines.yarn_cs:YarnCapacityPolicy",
}
"""Policy names the CLI accepts, mapped to ``module:Class`` (imported on demand)."""


def policy_class(name: str) -> type[Policy]:
    """The class of a registered policy; unknown names are an InputError."""
    target = POLICY_REGISTRY.get(name)
    if target is None:
        raise InputError(
            f"--policy: unknown policy {name!r} (known: {', '.join(sorted(POLICY_REGISTRY))})"
        )
    module, _, cls = target.partition(":")
    try:
        policy_cls: type[Policy] = getattr(importlib.import_module(module), cls)
    except (ImportError, AttributeError):
        raise InputError(
            f"--policy: policy {name!r} is not available in this installation"
        ) from None
    return policy_cls


def make_policy(name: str, **options: Any) -> Policy:
    """Instantiate a registered policy by name; unknown names are an InputError."""
    return policy_class(name)(**options)
