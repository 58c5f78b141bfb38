"""The coordinator's round executor: one round of a real run, from a validated plan to its
commit point.

It turns the plan into copy tasks (GPU binding, checkpoints, step budgets), journals the plan and
the policy's state before anything is dispatched, runs every copy concurrently on its nodes
(:meth:`RoundExecutor.run_copy`: the node manager's, or a benchmark's fake nodes), then, in ONE
transaction of the run's state file (the round's commit point), reports each copy's work to the
Job Tracker, lets the tracker close the round, journals the timings and writes the round's
events. It keeps no state between rounds: what a round leaves for the next is booked by
:class:`~hadar.runtime.bookkeeping.RoundBook` (:mod:`hadar.runtime.bookkeeping` lists a
round's bookkeeping in the order it happens).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from estimators.online import OnlineThroughput
from hadar.core.jobs import Job
from hadar.loop import Decision
from hadar.policy import REFILL_MIN_S, Assignment
from hadar.runtime import elastic
from hadar.runtime.bookkeeping import RoundBook
from hadar.runtime.config import RunConfig
from hadar.runtime.dispatch import CopyOutcome, CopyTask
from hadar.runtime.evaluator import CheckpointGuard
from hadar.runtime.faults import placement_nodes
from hadar.runtime.gpu_binding import bind, binding_from_plan, devices_of
from hadar.runtime.journal import EventLog, Journal, RoundRow
from hadar.runtime.node_manager import NodeManager
from tracker import ids
from tracker.errors import ReportRejected
from tracker.tracker import JobState, JobTracker


@dataclass(frozen=True)
class RoundResult:
    """A committed round: its attempt, its copies' records (the journal's ``copies``), its
    journal row and the jobs it completed."""

    attempt: int
    copies: list[dict[str, Any]]
    row: RoundRow
    completed: tuple[int, ...]


class RoundExecutor:
    """Plays validated plans on the nodes, one round at a time."""

    def __init__(
        self,
        rundir: Path,
        cfg: RunConfig,
        jobs: dict[int, Job],
        tracker: JobTracker,
        journal: Journal,
        events: EventLog,
        nodes: NodeManager,
        book: RoundBook,
        guard: CheckpointGuard,
        throughput: OnlineThroughput,
    ) -> None:
        self.rundir, self.cfg, self.by_id = rundir, cfg, jobs
        self.tracker, self.journal, self.events = tracker, journal, events
        self.db = journal.db
        """The run's state file: a round's commit point is one transaction of it."""
        self.nodes, self.book, self.guard = nodes, book, guard
        self.state, self.withheld = book.state, book.withheld
        """Last round's plan; (job, nodes) not dispatched (the progress checks fill it)."""
        self.throughput = throughput
        """Measured rates and elastic jobs' step/sync/gradient samples (read for round specs)."""
        self.view: Any = None
        self.run_copy: Callable[[CopyTask, Path], CopyOutcome] = nodes.run_copy
        """Runs one copy and brings its checkpoint back (the seam for fake nodes)."""
        self._copies: dict[int, int] = {}
        """Per job, how many copies this session has registered with the tracker."""

    def play(self, decision: Decision) -> RoundResult:
        """Journal the plan and the policy state, dispatch, collect, let the tracker close the
        round (its commit point), journal the timings."""
        ctx, plan, decision_s = decision.ctx, decision.plan, decision.decision_s
        r, cluster = ctx.round_index, ctx.cluster
        t_start = ctx.now + self.cfg.started_at
        attempt = self._attempt(r)
        last_plan = self.state.last_plan
        withheld = [
            a for a in plan.assignments if (a.job_id, placement_nodes(a.placement)) in self.withheld
        ]
        kept = [a for a in plan.assignments if a not in withheld]
        owner = _followed_runs(kept)
        kept = _runnable_refills(kept, owner)
        gpus = bind(
            [((a.job_id, a.copy), a.placement) for a in kept if a.after is None],
            self.nodes.gpus,
            binding_from_plan(last_plan) if last_plan is not None else {},
        )
        gpus.update(_refill_gpus(kept, owner, gpus))
        states = self.tracker.job_states({a.job_id for a in kept})
        tasks = [
            self._task(
                a,
                r,
                attempt,
                gpus[(a.job_id, a.copy)],
                states,
                None if a.after is None else owner[(a.after, a.nodes[0])],
            )
            for a in kept
        ]
        plan_rows = [_plan_row(t) for t in tasks]
        self.journal.plan_round(
            r, attempt, plan_rows, t_start, decision_s, policy_state=decision.policy_state
        )
        for t in tasks:
            refill: dict[str, Any] = {} if t.after is None else {"after": list(t.after)}
            self.events.emit(
                "dispatch",
                round=r,
                attempt=attempt,
                job=t.job.job_id,
                copy=t.copy,
                node=t.node,
                placement=t.placement,
                steps=t.steps,
                gpus=t.gpus,
                devices=t.devices,
                **refill,
            )
        if self.view is not None:
            self.view.start_round(r, ctx, tasks)
        t1 = time.time()
        outcomes = self.dispatch(tasks, r, attempt)
        t_collect = time.time()
        copies: list[dict[str, Any]] = [
            {
                "job": a.job_id,
                "copy": a.copy,
                "node": a.nodes[0],
                "placement": a.placement,
                "kind": "withheld",
                "steps": 0,
                "error": self.withheld[(a.job_id, placement_nodes(a.placement))][:300],
                "train_s": 0.0,
                "wall_s": 0.0,
            }
            for a in withheld
        ]
        # the round's commit point, ONE transaction: the round opened, every report of it, its
        # close (steps, checkpoints), the journal's timings and the round's events (a crash
        # before it commits leaves the round planned in the journal only, which recovery aborts
        # and plans again)
        with self.db.transaction():
            if self.tracker.current_round() != r:
                self.tracker.open_round(r)
            ok = [o for o in outcomes if o.ok]
            reports = self.tracker.report_many(
                r,
                [
                    (o.task.tracker_copy, o.task.node, o.steps_done, o.wall_seconds, *o.written())
                    for o in ok
                ],
            )
            rejected = {
                id(o): res
                for o, res in zip(ok, reports, strict=True)
                if isinstance(res, ReportRejected)
            }
            copies += [self._book(o, r, t1, rejected.get(id(o))) for o in outcomes]
            t_close = time.time()
            summary = self.tracker.close_round(r)
            t_end = time.time()
            for q in summary.quarantined:
                self.guard.log_quarantine(q, r)
            for job_id, res in summary.jobs.items():
                self.events.emit(
                    "aggregation",
                    after_commit=True,  # the line says the round is committed
                    round=r,
                    job=job_id,
                    copies=len(res.copies),
                    steps_added=res.steps_added,
                    steps_total=res.steps_total,
                    completed=res.completed,
                    checkpoint=str(res.checkpoint.path) if res.checkpoint else None,
                    sha256=res.checkpoint.sha256 if res.checkpoint else None,
                )
            longest_worker = max((c["wall_s"] for c in copies if c["kind"] == "ok"), default=0.0)
            timings = {
                "copies": copies,
                "nodes_up": list(cluster.node_names),
                "gpus_up": {n.name: n.num_gpus for n in cluster.nodes},
                "decide_s": decision_s,
                "dispatch_collect_s": t_collect - t1,
                "average_s": t_end - t_close,
                # everything of the round that is not a worker running: decide, stage, fetch,
                # average
                "coordination_s": max(0.0, (t_end - t_start) - longest_worker),
                # everything of the round that is not training (adds worker start-up and saving)
                "overhead_s": (t_end - t_start) - max((c["train_s"] for c in copies), default=0.0),
            }
            self.journal.close_round(r, t_end, timings)
        row = RoundRow(
            r,
            attempt,
            "closed",
            plan_rows,
            t_start,
            t_end,
            decision_s,
            timings,
            decision.policy_state,
        )
        # the round's events are in the state file with it: events.jsonl, an output, is not
        # fsynced each round (start, finish and evaluations are)
        completed = tuple(j for j, res in summary.jobs.items() if res.completed)
        return RoundResult(attempt, copies, row, completed)

    def _book(
        self, o: CopyOutcome, r: int, t1: float, rejected: ReportRejected | None
    ) -> dict[str, Any]:
        """Book a copy the tracker took the report of (an ``ok`` one it ``rejected`` becomes a
        failure): log it and return its record (the journal's ``copies`` row)."""
        kind, sample = o.kind, None
        if o.ok and rejected is not None:
            kind = "mismatched-checkpoint"
            o = replace(o, kind=kind, error=str(rejected))
        elif o.ok:
            sample = self.book.measured(
                r,
                o.task.job.job_id,
                o.task.node,
                o.steps_done,
                o.train_seconds,
                o.task.placement,
                o.measured,
            )
            self.events.emit(
                "result",
                round=r,
                job=o.task.job.job_id,
                copy=o.task.copy,
                node=o.task.node,
                steps=o.steps_done,
                train_s=round(o.train_seconds, 3),
                wall_s=round(o.wall_seconds, 3),
                rate=round(o.rate, 3),
                loss=o.final_loss,
                **elastic.event_fields(sample),
            )
        if not o.ok:
            self.events.emit(
                "failure",
                round=r,
                job=o.task.job.job_id,
                copy=o.task.copy,
                node=o.task.node,
                kind=kind,
                error=o.error,
                note="this copy's round is lost; the job continues "
                "from its last consolidated parameters",
            )
            if kind in ("timeout", "unreachable"):
                self.nodes.mark_down(o.task.node, r, o.error)
        record: dict[str, Any] = {
            "job": o.task.job.job_id,
            "copy": o.task.copy,
            "node": o.task.node,
            "placement": o.task.placement,
            "kind": kind,
            "steps": o.steps_done if o.ok else 0,
            "error": None if o.ok else (o.error or "")[:300],
            "train_s": o.train_seconds if o.ok else 0.0,
            "wall_s": o.wall_seconds if o.ok else min(time.time() - t1, self.cfg.round_s),
        }
        if sample is not None and o.ok:
            record["iterations"] = sample.to_json()
        if self.view is not None:
            self.view.copy_done(o)
        return record

    def _attempt(self, r: int) -> int:
        row = self.journal.round(r)
        return 0 if row is None else row.attempt + 1

    def _task(
        self,
        a: Assignment,
        r: int,
        attempt: int,
        gpus: dict[str, dict[str, tuple[int, ...]]],
        states: dict[int, JobState],
        after: tuple[int, int] | None = None,
    ) -> CopyTask:
        job = self.by_id[a.job_id]
        # A forked copy's tracker id follows its node's position in the whole cluster file, so it
        # stays the same while other nodes go down or come back; an unforked job is copy 1.
        idx = self.nodes.cluster.node_index[min(a.placement)] + 1 if a.copy > 0 else 1
        tracker_copy = ids.copy_id(job.job_id, idx, self.cfg.max_job_count)
        if self._copies.get(job.job_id, 0) < idx:  # copies, once registered, stay registered
            self.tracker.register_copies(job.job_id, max(idx, 1))
            self._copies[job.job_id] = idx
        state = states[job.job_id]  # read for the round's jobs at once
        budget = (
            state.remaining_steps
            if a.step_budget is None
            else min(a.step_budget, state.remaining_steps)
        )
        ckpt = state.checkpoint  # verified at the start of the round
        return CopyTask(
            round=r,
            attempt=attempt,
            job=job,
            copy=a.copy,
            tracker_copy=tracker_copy,
            placement=a.placement,
            steps=max(1, math.ceil(budget)),
            deadline_s=self.cfg.round_s,
            timeout_s=self.cfg.round_s + self.cfg.grace_s,
            checkpoint_in=ckpt.path if ckpt else None,
            checkpoint_sha256=ckpt.sha256 if ckpt else None,
            data_stream=idx,
            threads=self.cfg.threads,
            gpus=gpus,
            devices=devices_of(gpus, self.nodes.gpus),
            warm=self.cfg.warm_workers,
            spec=(
                elastic.round_spec(job, a.batch_size, a.num_gpus, self.throughput.iterations(job))
                if job.is_elastic
                else None
            ),
            measure=job.is_elastic,
            after=after,
        )

    def dispatch(self, tasks: list[CopyTask], r: int, attempt: int) -> list[CopyOutcome]:
        """Run every task at once, a refill when the task it follows has returned (its GPUs are
        free), with what is left of the round as its deadline; a refill left with under
        ``REFILL_MIN_S`` does not run (no outcome)."""
        if not tasks:
            time.sleep(min(1.0, self.cfg.round_s))
            return []
        local = self.rundir / "incoming" / f"r{r:04d}-a{attempt}"
        t0 = time.monotonic()
        with ThreadPoolExecutor(max_workers=len(tasks)) as pool:
            futures: dict[tuple[int, int], Future[CopyOutcome | None]] = {}
            for t in sorted(tasks, key=lambda t: t.after is not None):  # followed ones first

                def run(t: CopyTask = t) -> CopyOutcome | None:
                    if t.after is not None:
                        futures[t.after].result()
                        left = self.cfg.round_s - (time.monotonic() - t0)
                        if left < REFILL_MIN_S:
                            return None
                        t = replace(t, deadline_s=left, timeout_s=left + self.cfg.grace_s)
                    return self.run_copy(t, local)

                futures[(t.job.job_id, t.copy)] = pool.submit(run)
            done = [futures[(t.job.job_id, t.copy)].result() for t in tasks]
        return [o for o in done if o is not None]


def _followed_runs(kept: list[Assignment]) -> dict[tuple[int, str], tuple[int, int]]:
    """``{(job, node): (job, copy)}`` of the runs that start with the round: what a refill
    (``Assignment.after``) on that node follows."""
    return {(a.job_id, n): a.run_key for a in kept if a.after is None for n in a.nodes}


def _runnable_refills(
    kept: list[Assignment], owner: Mapping[tuple[int, str], tuple[int, int]]
) -> list[Assignment]:
    """``kept`` without the refills whose followed run does not run this round (withheld)."""
    return [a for a in kept if a.after is None or (a.after, a.nodes[0]) in owner]


def _refill_gpus(
    kept: list[Assignment],
    owner: Mapping[tuple[int, str], tuple[int, int]],
    gpus: Mapping[tuple[int, int], Mapping[str, Mapping[str, tuple[int, ...]]]],
) -> dict[tuple[int, int], dict[str, dict[str, tuple[int, ...]]]]:
    """GPU ids for the refills: the first free ones of the run each follows on its node."""
    given: dict[tuple[tuple[int, int], str, str], int] = {}
    out: dict[tuple[int, int], dict[str, dict[str, tuple[int, ...]]]] = {}
    for a in kept:
        if a.after is None:
            continue
        node = a.nodes[0]
        before = owner[(a.after, node)]
        for gtype, count in a.placement[node].items():
            first = given.get((before, node, gtype), 0)
            ids = gpus[before][node][gtype][first : first + count]
            given[(before, node, gtype)] = first + count
            out.setdefault((a.job_id, a.copy), {}).setdefault(node, {})[gtype] = tuple(ids)
    return out


def _plan_row(t: CopyTask) -> dict[str, Any]:
    return {
        "job": t.job.job_id,
        "copy": t.copy,
        "tracker_copy": t.tracker_copy,
        "node": t.node,
        "placement": {n: dict(p) for n, p in t.placement.items()},
        "steps": t.steps,
        "gpus": t.gpus,
        "devices": t.devices,
        **({"after": list(t.after)} if t.after is not None else {}),
    }
