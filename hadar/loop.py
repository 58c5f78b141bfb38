"""The one round loop shared by the simulator and real clusters (the Blox lesson).

Every round goes through the same seven steps, in this order::

    arrivals -> prepare -> context -> decide -> validate -> execute -> record

The loop owns the order, the policy call, plan validation and the policy's state; an
:class:`Executor` supplies the rest. Two executors implement it: the simulator's progress
model (``hadar/simulator/engine.py``) and the real cluster's dispatch + Job Tracker
(``hadar/runtime/coordinator.py``). A plan that breaks the cluster's rules (capacity, gangs,
unknown jobs or nodes, two copies of a job on one node) is a :class:`PolicyError` raised before
anything is executed.

The policy's own state (:meth:`Policy.state`, JSON) is taken after every decision and handed to
the executor with the plan when the executor keeps it (``keeps_policy_state``), so a real run
persists it with the round's plan and a resumed run restores it (:meth:`Policy.restore`) before
its first decision: it decides as an uninterrupted run would have. The simulator does not keep it
(nothing resumes a simulation), and the loop then does not take it: a Pollux policy's state holds
every job's profile, and taking it each round was half of a Pollux simulation's CPU.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any, Generic, Protocol, TypeVar

import numpy as np

from estimators.throughput import ThroughputModel
from hadar.core.cluster import Cluster
from hadar.core.collector import cyclic_gc_paused
from hadar.core.errors import HadarError
from hadar.core.jobs import Job
from hadar.core.threads import one_blas_thread
from hadar.policy import Policy, RoundContext, RoundPlan

Outcome = TypeVar("Outcome")


class PolicyError(HadarError):
    """A policy returned an impossible plan (a bug in the policy, never a user error)."""


@dataclass(frozen=True)
class Decision:
    """One round's decision: what the policy saw, what it planned, how long it took, and its
    state after deciding (what a resumed run restores)."""

    ctx: RoundContext
    plan: RoundPlan
    decision_s: float
    policy_state: dict[str, Any]
    """Empty unless the executor keeps it (:attr:`Executor.keeps_policy_state`)."""


class Executor(Protocol[Outcome]):
    """The backend of the round loop: where jobs arrive, run and are recorded."""

    plays_refills: bool
    """Whether it can start a run mid-round when the run it follows stops
    (:attr:`Assignment.after`); a plan with a refill is refused by one that cannot."""

    keeps_policy_state: bool
    """Whether it persists the policy's state with every round (a real run's journal, to resume
    from); for one that does not, :attr:`Decision.policy_state` is empty."""

    def finished(self) -> bool:
        """Whether every job is done (or given up): the loop stops."""
        ...

    def admit_arrivals(self) -> None:
        """Make jobs that have arrived visible; wait (idle gap) while none has and more will."""
        ...

    def prepare(self, index: int) -> None:
        """Side effects due before round ``index`` is seen: a real run probes its nodes and
        verifies checkpoints here (the simulator has none)."""
        ...

    def context(self, index: int) -> RoundContext:
        """The context of round ``index``: arrived unfinished jobs, nodes up, last placements.
        No side effects: it reports what :meth:`prepare` and earlier rounds established."""
        ...

    def execute(self, decision: Decision) -> Outcome:
        """Run the validated plan for one round (a real run first journals the plan and the
        policy state)."""
        ...

    def record(self, decision: Decision, outcome: Outcome) -> None:
        """Book the round's results (records, journal, progress checks)."""
        ...


@dataclass
class ClusterViews:
    """The last round's canonical cluster, kept while the cluster is the same object and the
    throughput model the same one that does not learn: its type figures
    (:func:`measured_type_figures`, every reference job's rates on every node) were 5 % of a
    Hadar simulation of philly-480, computed again each round."""

    last: tuple[Cluster, ThroughputModel, Cluster] | None = None

    def canonical(self, cluster: Cluster, throughput: ThroughputModel) -> Cluster:
        """``cluster`` in canonical order, its types ranked by ``throughput``'s figures."""
        last = self.last
        if last is not None and last[0] is cluster and last[1] is throughput:
            return last[2]
        figures = measured_type_figures(throughput, cluster)
        ranked = replace(cluster, type_figures=figures) if figures else cluster
        canonical = ranked.canonical
        self.last = None if throughput.learns else (cluster, throughput, canonical)
        return canonical


@dataclass
class RoundLoop(Generic[Outcome]):
    """Drives ``policy`` over ``executor`` one round at a time."""

    policy: Policy
    executor: Executor[Outcome]
    views: ClusterViews = field(default_factory=ClusterViews)
    """The canonical cluster each round's policy view uses, kept while nothing it depends on
    changed."""

    def play_round(self, index: int) -> Decision:
        """Arrivals, prepare, context, decide, validate, execute, record: one round."""
        self.executor.admit_arrivals()
        self.executor.prepare(index)
        ctx = self.executor.context(index)
        t0 = time.perf_counter()
        with one_blas_thread(), cyclic_gc_paused():  # (hadar/core/threads.py, collector.py)
            plan = self.policy.decide(policy_view(ctx, self.views))
        decision_s = time.perf_counter() - t0
        state = self.policy.state() if self.executor.keeps_policy_state else {}
        decision = Decision(ctx, plan, decision_s, state)
        try:
            validate_plan(plan, ctx, refills=self.executor.plays_refills)
        except PolicyError as exc:
            raise PolicyError(
                f"policy {self.policy.name}, round {index}: {exc}; nothing was run "
                f"(a bug in the policy)"
            ) from None
        outcome = self.executor.execute(decision)
        self.executor.record(decision, outcome)
        return decision

    def run(self, first_index: int = 0, max_rounds: int | None = None) -> int:
        """Play rounds from ``first_index`` until the executor is finished (or ``max_rounds``
        rounds were played); returns the next round's index."""
        index = first_index
        with one_blas_thread():  # the executor's own arrays are small too
            while not self.executor.finished() and (
                max_rounds is None or index - first_index < max_rounds
            ):
                self.play_round(index)
                index += 1
        return index


def policy_view(ctx: RoundContext, views: ClusterViews | None = None) -> RoundContext:
    """The context a policy decides on: the cluster's nodes and GPU types in an order given by
    their figures (:attr:`Cluster.canonical`), so that no decision depends on what a node or GPU
    is called or where it is declared. Placements name nodes and types, so the plan applies to
    the cluster as declared. ``views`` keeps the last canonical cluster between rounds."""
    canonical = (views or ClusterViews()).canonical(ctx.cluster, ctx.throughput)
    return ctx if canonical is ctx.cluster else replace(ctx, cluster=canonical)


def measured_type_figures(
    throughput: ThroughputModel, cluster: Cluster
) -> dict[str, tuple[float, ...]]:
    """Per GPU type, what the throughput model says of it: the mean over the model's one-GPU job
    types of its best rate on that type relative to the best type, then those rates. Types rank
    by these numbers before their datasheet figures, so a measured table ranks a GPU by what was
    measured on it whatever it is called (tests/harness/test_measured_data_fidelity.py)."""
    refs = sorted({t for t, n in throughput.reference_job_types() if n == 1})
    if not refs or len(cluster.gpu_types) < 2:
        return {}
    rows = []
    for i, job_type in enumerate(refs):
        cons, _ = throughput.cell_rates(Job(i, job_type, 1, 1.0), cluster)
        rows.append(np.nan_to_num(np.asarray(cons, dtype=float).max(axis=0)))
    rates = np.array(rows)  # [job type, GPU type]
    best = rates.max(axis=1, keepdims=True)
    relative = np.divide(rates, best, out=np.zeros_like(rates), where=best > 0).mean(axis=0)
    return {
        k: (round(float(relative[j]), 12), *(round(float(r), 12) for r in rates[:, j]))
        for j, k in enumerate(cluster.gpu_types)
    }


def validate_plan(plan: RoundPlan, ctx: RoundContext, refills: bool = True) -> None:
    """Raise PolicyError unless the plan respects capacity, gangs and copy rules (and has no
    refill where the driver cannot play one)."""
    known = {s.job_id: s.job for s in ctx.jobs}
    seen: set[tuple[int, int]] = set()
    used = ctx.cluster.capacity * 0
    copy_nodes: dict[int, set[str]] = {}
    for a in plan.assignments:
        job = known.get(a.job_id)
        if job is None:
            raise PolicyError(f"plan places job {a.job_id}, which is not waiting or running")
        if a.run_key in seen:
            raise PolicyError(f"plan places job {a.job_id} copy {a.copy} twice")
        seen.add(a.run_key)
        lo, hi = job.gpu_range
        if not lo <= a.num_gpus <= hi:
            need = f"{lo}" if lo == hi else f"{lo}-{hi}"
            raise PolicyError(f"gang violated: job {a.job_id} needs {need} GPUs, got {a.num_gpus}")
        if a.batch_size is not None and (
            job.batch_range is None or not job.batch_range[0] <= a.batch_size <= job.batch_range[1]
        ):
            raise PolicyError(
                f"job {a.job_id}: batch size {a.batch_size} outside its range {job.batch_range}"
            )
        for node, per in a.placement.items():
            if node not in ctx.cluster.node_index:
                raise PolicyError(f"job {a.job_id} placed on unknown node {node!r}")
            for gtype, count in per.items():
                if count < 0 or gtype not in ctx.cluster.node(node).gpus:
                    raise PolicyError(f"job {a.job_id}: node {node} has no {gtype} GPUs")
        if a.copy:
            nodes = set(a.nodes)
            if copy_nodes.setdefault(a.job_id, set()) & nodes:
                raise PolicyError(f"two copies of job {a.job_id} share a node")
            copy_nodes[a.job_id] |= nodes
        if a.after is None:
            used = used + ctx.cluster.placement_matrix(a.placement)
    if (used > ctx.cluster.capacity).any():
        raise PolicyError("plan exceeds GPU capacity")
    if not refills and any(a.after is not None for a in plan.assignments):
        raise PolicyError("a run follows another within the round, which this driver cannot start")
    _validate_refills(plan, ctx)


def _validate_refills(plan: RoundPlan, ctx: RoundContext) -> None:
    """A refill (``Assignment.after``) is a copy on one node, within the GPUs there of a run of
    the job it follows; that job has no refill itself, and refills share no GPU."""
    refilling = {a.job_id for a in plan.assignments if a.after is not None}
    if not refilling:
        return
    held: dict[tuple[int, str], np.ndarray] = {}
    followed = {a.after for a in plan.assignments}
    for a in plan.assignments:
        if a.after is None and a.job_id in followed:
            for node in a.nodes:
                key = (a.job_id, node)
                matrix = ctx.cluster.placement_matrix(a.placement)
                held[key] = held[key] + matrix if key in held else matrix
    for a in plan.assignments:
        if a.after is None:
            continue
        what = f"job {a.job_id} copy {a.copy} follows job {a.after}"
        if not a.copy or len(a.nodes) != 1:
            raise PolicyError(f"{what}: only a copy on one node can follow another job's run")
        if a.after in refilling or a.after == a.job_id:
            raise PolicyError(f"{what}, which has a refill itself")
        room = held.get((a.after, a.nodes[0]))
        mine = ctx.cluster.placement_matrix(a.placement)
        if room is None or (mine > room).any():
            raise PolicyError(f"{what} on GPUs of node {a.nodes[0]} that job does not run on")
        held[(a.after, a.nodes[0])] = room - mine
