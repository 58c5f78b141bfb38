"""The real round loop: decide, dispatch every (copy, node) concurrently, collect, hand the
results to the Job Tracker, feed measured throughputs to the online estimator, repeat.

Crash safety: the plan of round r is journalled before dispatch; the Job Tracker's
``close_round(r)`` is the commit point of its steps; then the journal records the timings. On
start-up (``hadar run --resume``) a round the tracker closed but the journal did not is
finalised from the tracker's reports; a round the tracker did not close is aborted (its partial
reports withdrawn) and planned again as a new attempt, so no completed step is lost and none is
counted twice. Worker files of different attempts never collide (``r<round>-a<attempt>/``).

Faults that would otherwise stall a run (``hadar/runtime/faults.py``): every job's checkpoint is
verified against its recorded sha256 at the start of each round (a damaged one is quarantined
and the job rolled back) and again as it is sent; a job with no progress for ``stall_rounds``
rounds is given up (the others go on), a whole run without progress stops with one line and the
likely cause; a full, read-only or unwritable run or node directory stops it with one line.
"""

from __future__ import annotations

import contextlib
import math
import shutil
import signal
import sqlite3
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from estimators.online import OnlineThroughput
from hadar.clusters import load_cluster
from hadar.core.cluster import Cluster
from hadar.core.errors import InputError, UnreachableNodeError
from hadar.core.jobs import Job
from hadar.core.node_stream import NodeEvent, NodeStream, load_node_stream
from hadar.core.safe_paths import refuse_links
from hadar.loop import Decision, RoundLoop
from hadar.policy import Assignment, Policy, RoundContext
from hadar.policy_options import policy_with_options
from hadar.runtime import elastic
from hadar.runtime.config import (
    RunConfig,
    RuntimeKnobs,
    check_run_jobs,
    load_config,
    save_config,
)
from hadar.runtime.dispatch import (
    CopyOutcome,
    CopyTask,
    evaluate_checkpoint,
    run_copy,
    stop_warm_servers,
)
from hadar.runtime.faults import (
    RunStalledError,
    likely_cause,
    node_resource_error,
    placement_nodes,
    repeated_failures,
    resource_error,
    run_stalled,
    stalled_jobs,
)
from hadar.runtime.gpu_binding import bind, binding_from_plan, devices_of, eval_env
from hadar.runtime.gpu_inventory import (
    GpuMismatchError,
    GpuReport,
    NodeGpus,
    gpu_report,
    number_nodes,
)
from hadar.runtime.history import copy_records, rebuild, statuses
from hadar.runtime.identity import check_tracker_jobs, cluster_digest
from hadar.runtime.journal import EventLog, Journal, check_state_files
from hadar.runtime.node_stream import PREEMPTED, LeaveWatcher, kill_processes_in, next_join
from hadar.scenario import load_table, throughput_for
from hadar.workloads import load_workload, validate_workload
from nodes.provider import NodeProvider, make_provider
from nodes.spec import JobSpec, parse_spec
from nodes.transport import provider_kind
from tracker import ids
from tracker.crashpoints import crash_point
from tracker.errors import ReportRejected
from tracker.tracker import JobTracker, Quarantine, Rollback

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
"""Signals that stop a run as Ctrl-C does: after the round in flight, state saved."""


class StopRequested(Exception):
    """Ctrl-C, SIGTERM or SIGHUP: the run stopped cleanly after saving its state."""


class Coordinator:
    """Drives one run directory to completion (or until stopped)."""

    def __init__(
        self,
        rundir: Path,
        cfg: RunConfig,
        *,
        provider_options: dict[str, Any] | None = None,
        knobs: RuntimeKnobs | None = None,
        view: Any = None,
    ) -> None:
        self.rundir = rundir
        self.cfg = cfg
        self.knobs = knobs or cfg.knobs
        self.provider_options = dict(provider_options or {})
        self.view = view
        self.cluster = load_cluster(cfg.cluster)
        self._cluster_mtime = _mtime(cfg.cluster)
        table = load_table(None)
        self.jobs: list[Job] = load_workload(cfg.workload, table, seed=cfg.seed, size=cfg.size)
        self.specs = {j.job_id: _job_spec(j, cfg.workload) for j in self.jobs}
        self.by_id = {j.job_id: j for j in self.jobs}
        prior = throughput_for(self.jobs, self.cluster, table)
        validate_workload(self.jobs, self.cluster, prior, source=cfg.workload, table=table)
        check_run_jobs(self.jobs, cfg.workload, cfg.max_job_count)
        self.throughput = OnlineThroughput(prior)
        self.estimated_cells = prior.estimated_cells(self.jobs, self.cluster)
        self.policy: Policy = _make_policy(cfg.policy, cfg.policy_options, self.knobs)
        stream = self._load_stream()  # bad input is refused before anything is written
        refuse_links(rundir, "the run directory")  # before anything is written there
        rundir.mkdir(parents=True, exist_ok=True)
        self.events = EventLog(rundir / "events.jsonl")
        self.journal = Journal(rundir / "journal.sqlite")
        self.tracker = JobTracker.open(
            rundir / "tracker.sqlite",
            rundir / "checkpoints",
            max_job_count=cfg.max_job_count,
            averaging="steps",
            keep_checkpoints=cfg.keep_checkpoints,
        )
        check_state_files(self.journal, self.tracker.last_closed_round(), rundir / "tracker.sqlite")
        registered = self.tracker.jobs()
        check_tracker_jobs(
            [(s.job_id, s.target_steps, s.model, s.size) for s in registered],
            self.jobs,
            str(rundir / "tracker.sqlite"),
            cfg.workload,
        )
        known = {s.job_id for s in registered}
        for j in self.jobs:
            if j.job_id not in known:
                spec = self.specs[j.job_id]
                self.tracker.register_job(
                    j.job_id, int(j.total_steps), model=spec.model, size=spec.size
                )
        self.provider: NodeProvider = make_provider(
            self.cluster, cfg.run_id, **self._provider_kwargs()
        )
        self.leaves: LeaveWatcher | None = None if stream is None else self._leave_watcher(stream)
        self._stop = threading.Event()
        self._abandon = threading.Event()
        self.stop_signal: int = signal.SIGINT
        """The signal that stopped the run (exit status 128 + it)."""
        self._gpus: dict[str, NodeGpus] = {}
        """Each probed node's numbered GPUs (hadar/runtime/gpu_inventory.py), this process's."""
        self._preflight_done = False
        self.failed: dict[int, str] = {}
        """Jobs given up this session (no progress for ``stall_rounds`` rounds): job -> cause."""
        self.withheld: dict[tuple[int, tuple[str, ...]], str] = {}
        """(job, nodes) not dispatched again this session: its copy there failed the same way
        ``stall_rounds`` rounds in a row -> why."""
        self._first_round = 0
        self._eval_tried: set[int] = set()
        self._round_start: tuple[float, list[Any]] = (0.0, [])
        """The wall-clock start and the journal rows of the round being played."""

    # -- set-up and recovery ------------------------------------------------------------------
    def _provider_kwargs(self) -> dict[str, Any]:
        opts = dict(self.provider_options)
        if _shares_machine(self.cluster):
            opts.setdefault("base_dir", str(self.rundir / "nodes"))
        return opts

    def preflight(self) -> None:
        """Probe the nodes and number their GPUs before any round is dispatched: a node whose
        GPUs do not match the cluster file is bad input (GpuMismatchError, one line)."""
        if not self._preflight_done:
            last_closed = self.tracker.last_closed_round()
            self._available_cluster(0 if last_closed is None else last_closed + 1)

    def recover(self) -> int:
        """Reconcile journal and tracker after a restart; returns the next round number."""
        last_closed = self.tracker.last_closed_round()
        next_round = 0 if last_closed is None else last_closed + 1
        for row in self.journal.rounds():
            if row.status != "planned":
                continue
            if last_closed is not None and row.round <= last_closed:
                self.journal.close_round(row.round, time.time(), {"recovered": True})
                self.events.emit(
                    "recovered", round=row.round, note="closed by the tracker before the restart"
                )
            else:
                for rep in self.tracker.reports(row.round):
                    self.tracker.withdraw_report(row.round, rep.copy_id)
                self.journal.abort_round(row.round, time.time())
                self._drop_incoming(row.round, row.attempt)
                self.events.emit(
                    "aborted",
                    round=row.round,
                    attempt=row.attempt,
                    note="coordinator restarted mid-round; the round is planned again",
                )
                next_round = row.round
        for row in self.journal.rounds():
            if row.status == "closed":
                for c in copy_records(row, self.tracker):
                    self._observe(c["job"], c["node"], c["steps"], c["train_s"], c["placement"])
                    if c.get("iterations"):
                        self.throughput.observe_iterations(
                            c["job"], elastic.IterationSample.from_json(c["iterations"])
                        )
        return next_round

    # -- the loop ---------------------------------------------------------------------------
    def run(self) -> None:
        """Run rounds until every job is complete (or given up), then score the finished models.
        Raises StopRequested after a clean Ctrl-C, RunStalledError when the run or a job made
        no progress, RunResourceError when a directory is full, read-only or not writable."""
        main = threading.current_thread() is threading.main_thread()
        prev = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS} if main else {}
        prev = {sig: h for sig, h in prev.items() if h is not signal.SIG_IGN}  # nohup stays so
        for sig in prev:
            signal.signal(sig, self._on_stop_signal)
        finished = False
        if self.leaves is not None:
            self.leaves.start()
        try:
            try:
                finished = self._run_rounds()
            except (OSError, sqlite3.OperationalError) as exc:
                err = resource_error(exc, self.rundir, [self.rundir / "tracker.sqlite"])
                if err is None:
                    raise
                raise err from None
        finally:
            if self.leaves is not None:
                self.leaves.stop()
            for sig, handler in prev.items():
                signal.signal(sig, handler)
            self._shutdown(clean_nodes=finished and not self.failed)
        if self.failed:
            lines = "; ".join(f"job {j}: {cause}" for j, cause in sorted(self.failed.items()))
            raise RunStalledError(
                f"{len(self.failed)} job(s) made no progress in {self.cfg.stall_rounds} rounds in a row and were "
                f"given up ({lines}); the other jobs finished; retry them with: hadar run --resume {self.rundir}"
            )

    def _run_rounds(self) -> bool:
        self.preflight()
        r = self.recover()
        self._first_round = r
        self.events.emit(
            "start",
            round=r,
            policy=self.cfg.policy,
            cluster=self.cluster.name,
            jobs=len(self.jobs),
            estimated_cells=[asdict(c) for c in self.estimated_cells],
            arrivals={j.job_id: j.arrival for j in self.jobs if j.arrival},
            job_types={j.job_id: [j.job_type, j.num_gpus] for j in self.jobs},
        )
        self._restore_policy_state()
        loop = RoundLoop(self.policy, self)
        while True:
            r = loop.run(first_index=r)
            if self._evaluate_pending(r):
                break  # else a finished job's checkpoint was damaged: it was rolled back and trains again
        self.events.emit("finish", rounds=r)
        return True

    def _all_done(self) -> bool:
        return all(self.tracker.is_complete(j.job_id) or j.job_id in self.failed for j in self.jobs)

    def _restore_policy_state(self) -> None:
        """Hand the policy the state it had after the last committed round's decision (saved
        with that round's plan), so a resumed run decides as an uninterrupted one would."""
        closed = [row for row in self.journal.rounds() if row.status == "closed"]
        if closed and closed[-1].policy_state:
            self.policy.restore(closed[-1].policy_state)

    # -- the round loop's executor (hadar/loop.py) ---------------------------------------------
    def finished(self) -> bool:
        return self._all_done()

    def _waiting_jobs(self) -> list[Job]:
        return [
            j
            for j in self.jobs
            if j.job_id not in self.failed and not self.tracker.is_complete(j.job_id)
        ]

    def admit_arrivals(self) -> None:
        """Jobs arrive at their ``arrival`` second, counted from the run's start (``started_at``
        in run.json, so a resumed run keeps the clock); while none of the unfinished jobs has
        arrived the coordinator waits, records no round and dispatches nothing."""
        announced = False
        while True:
            if self._stop.is_set():
                raise StopRequested()
            now = time.time() - self.cfg.started_at
            waiting = self._waiting_jobs()
            first = min((j.arrival for j in waiting), default=now)
            if first <= now:
                return
            if not announced:
                self.events.emit(
                    "waiting",
                    next_arrival_s=first,
                    now_s=round(now, 3),
                    jobs=[j.job_id for j in waiting if j.arrival == first],
                )
                if self.view is not None:
                    self.view.note(f"no job has arrived yet; the next arrives at {first:g} s")
                announced = True
            time.sleep(min(1.0, first - now))

    def context(self, index: int) -> RoundContext:
        t_start = time.time()
        cluster = self._available_cluster(index)
        for j in self.jobs:
            if j.job_id not in self.failed and not self.tracker.is_complete(j.job_id):
                self._verified_checkpoint(j.job_id, index)
        rows = self.journal.rounds()
        hist, current = rebuild(self.jobs, rows, self.tracker, self.cfg.started_at)
        now = t_start - self.cfg.started_at
        active = [
            s
            for s in statuses(self.jobs, hist, self.tracker)
            if s.job.job_id not in self.failed and s.job.arrival <= now
        ]
        up = set(cluster.node_names)
        current = {k: p for k, p in current.items() if set(p) <= up}  # nodes that left or are down
        self._round_start = (t_start, rows)
        return RoundContext(
            now=now,
            round_index=index,
            round_length=self.cfg.slot_s,
            cluster=cluster,
            jobs=tuple(active),
            current=current,
            throughput=self.throughput,
            restart_penalty=self.knobs.restart_penalty_s,
        )

    def execute(self, decision: Decision) -> tuple[int, list[dict[str, Any]]]:
        """Journal the plan and the policy state, dispatch, collect, let the tracker close the
        round (its commit point), journal the timings; returns (attempt, the copies' outcomes)."""
        return self._round(decision)

    def record(self, decision: Decision, outcome: tuple[int, list[dict[str, Any]]]) -> None:
        """After a committed round: drop its fetched files, check disks and progress, score
        the jobs it finished."""
        (attempt, copies), r = outcome, decision.ctx.round_index
        self._drop_incoming(r, attempt)
        if self.view is not None:
            self.view.end_round(r, self.tracker.progress())
        err = node_resource_error(copies, self.provider.workdir, self.rundir)
        if err is not None:
            raise err
        self._check_progress(r)
        self._evaluate_pending(r, decision.ctx.cluster)

    def _shutdown(self, clean_nodes: bool) -> None:
        """Stop the nodes' warm servers, delete their work directories after a completed run
        (unless ``keep_node_dirs``), release connections and databases. Best effort."""
        nodes = list(self.cluster.node_names)
        with contextlib.suppress(Exception):
            if self.cfg.warm_workers:
                stop_warm_servers(self.provider, nodes)
        if clean_nodes:
            with contextlib.suppress(Exception):
                shutil.rmtree(self.rundir / "incoming", ignore_errors=True)
            if not self.cfg.keep_node_dirs:
                for node in nodes:
                    with contextlib.suppress(Exception):
                        self.provider.remove_workdir(node)
                with contextlib.suppress(OSError):
                    local_root = self.rundir / "nodes"
                    for d in sorted(local_root.rglob("*"), reverse=True):
                        d.rmdir()  # empty folders the local provider left; a file stops it
                    local_root.rmdir()
        self.close()

    def close(self) -> None:
        """Release the provider's connections and the databases (best effort: each is tried)."""
        for close in (self.provider.close, self.tracker.close, self.journal.close):
            with contextlib.suppress(Exception):
                close()

    def _on_stop_signal(self, signum: int, _frame: object) -> None:
        """SIGINT (Ctrl-C), SIGTERM, SIGHUP: the first stops the run after the round in flight
        (state saved); a second abandons that round (KeyboardInterrupt)."""
        if self._stop.is_set():
            self._abandon.set()
            raise KeyboardInterrupt
        self.stop_signal = signum
        self._stop.set()
        if self.view is not None:
            name = signal.Signals(signum).name
            self.view.note(f"{name}: stopping after this round (Ctrl-C again to abandon it)")

    def _round(self, decision: Decision) -> tuple[int, list[dict[str, Any]]]:
        ctx, plan, decision_s = decision.ctx, decision.plan, decision.decision_s
        r, cluster = ctx.round_index, ctx.cluster
        t_start, rows = self._round_start
        attempt = self._attempt(r)
        last = next((row for row in reversed(rows) if row.status == "closed"), None)
        withheld = [
            a for a in plan.assignments if (a.job_id, placement_nodes(a.placement)) in self.withheld
        ]
        kept = [a for a in plan.assignments if a not in withheld]
        gpus = bind(
            [((a.job_id, a.copy), a.placement) for a in kept],
            self._gpus,
            binding_from_plan(last.plan) if last else {},
        )
        tasks = [self._task(a, r, attempt, gpus[(a.job_id, a.copy)]) for a in kept]
        self.journal.plan_round(
            r,
            attempt,
            [_plan_row(t) for t in tasks],
            t_start,
            decision_s,
            policy_state=decision.policy_state,
        )
        if self.tracker.current_round() != r:
            self.tracker.open_round(r)
        for t in tasks:
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
            )
        if self.view is not None:
            self.view.start_round(r, ctx, tasks)
        t1 = time.time()
        outcomes = self._dispatch(tasks, r, attempt)
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
        for o in outcomes:
            kind, sample = o.kind, None
            if o.ok:
                try:
                    self.tracker.report(
                        r,
                        o.task.tracker_copy,
                        o.task.node,
                        o.steps_done,
                        o.wall_seconds,
                        *o.written(),
                    )
                    self._observe(
                        o.task.job.job_id,
                        o.task.node,
                        o.steps_done,
                        o.train_seconds,
                        o.task.placement,
                    )
                    sample = elastic.sample_of(r, o.task.placement, o.steps_done, o.measured)
                    if sample is not None:
                        self.throughput.observe_iterations(o.task.job.job_id, sample)
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
                except ReportRejected as exc:
                    kind = "mismatched-checkpoint"
                    o = replace(o, kind=kind, error=str(exc))
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
                    self.journal.set_node(o.task.node, False, r, o.error)
                    self.events.emit("node-down", round=r, node=o.task.node, error=o.error)
            copies.append(
                {
                    "job": o.task.job.job_id,
                    "copy": o.task.copy,
                    "node": o.task.node,
                    "placement": o.task.placement,
                    "kind": kind,
                    "steps": o.steps_done if o.ok else 0,
                    "error": None if o.ok else (o.error or "")[:300],
                    "train_s": o.train_seconds if o.ok else 0.0,
                    "wall_s": o.wall_seconds if o.ok else min(time.time() - t1, self.cfg.slot_s),
                    **({"iterations": sample.to_json()} if sample is not None and o.ok else {}),
                }
            )
            if self.view is not None:
                self.view.copy_done(o)
        t_close = time.time()
        summary = self.tracker.close_round(r)
        t_end = time.time()
        for q in summary.quarantined:
            self._log_quarantine(q, r)
        for job_id, res in summary.jobs.items():
            self.events.emit(
                "aggregation",
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
            # everything of the round that is not a worker running: decide, stage, fetch, average
            "coordination_s": max(0.0, (t_end - t_start) - longest_worker),
            # everything of the round that is not training (adds worker start-up and saving)
            "overhead_s": (t_end - t_start) - max((c["train_s"] for c in copies), default=0.0),
        }
        self.journal.close_round(r, t_end, timings)
        return attempt, copies

    def _check_progress(self, r: int) -> None:
        """Give up jobs without progress for ``stall_rounds`` rounds; stop a run without any."""
        n = self.cfg.stall_rounds
        rounds = [
            copy_records(row, self.tracker)
            for row in self.journal.rounds()
            if row.status == "closed" and row.round >= self._first_round
        ]
        stuck = run_stalled(rounds, n)
        if stuck is not None:
            cause = likely_cause(stuck, self.cfg.slot_s, self.cfg.warm_workers)
            self.events.emit("stalled", round=r, rounds=n, cause=cause)
            raise RunStalledError(
                f"{self.rundir}: no job made progress in {n} rounds in a row; likely cause: "
                f"{cause}. State saved; fix it and continue with: hadar run --resume {self.rundir}"
            )
        for job, copies in stalled_jobs(rounds, n).items():
            if job in self.failed or self.tracker.is_complete(job):
                continue
            cause = likely_cause(copies, self.cfg.slot_s, self.cfg.warm_workers)
            self.failed[job] = cause
            self.events.emit(
                "job-failed",
                round=r,
                job=job,
                rounds=n,
                cause=cause,
                note="not dispatched again in this session; the other jobs go on",
            )
            if self.view is not None:
                self.view.note(f"job {job} given up after {n} rounds without progress: {cause}")
        for (job, nodes), copies in repeated_failures(rounds, n).items():
            if (job, nodes) in self.withheld or job in self.failed or self.tracker.is_complete(job):
                continue
            kind, cause = (
                copies[-1].get("kind"),
                likely_cause(copies, self.cfg.slot_s, self.cfg.warm_workers),
            )
            self.withheld[(job, nodes)] = (
                f"job {job} failed on {'+'.join(nodes)} ({kind}) {n} rounds in a row: {cause}"
            )
            self.events.emit(
                "copy-withheld",
                round=r,
                job=job,
                nodes=list(nodes),
                rounds=n,
                kind=kind,
                cause=cause,
                note="not dispatched on these nodes again in this session; the job goes on elsewhere",
            )
            if self.view is not None:
                self.view.note(self.withheld[(job, nodes)] + "; not dispatched there again")

    def _drop_incoming(self, r: int, attempt: int) -> None:
        """Delete a finished round's fetched copy checkpoints (the tracker has consolidated them)."""
        shutil.rmtree(self.rundir / "incoming" / f"r{r:04d}-a{attempt}", ignore_errors=True)

    def _verified_checkpoint(self, job_id: int, r: int | None) -> Any:
        """The job's checkpoint checked against its recorded sha256, rolled back if damaged."""
        ref, rb = self.tracker.verified_checkpoint(job_id)
        if rb is not None:
            self._log_rollback(rb, r)
        return ref

    def _log_quarantine(self, q: Quarantine, r: int | None) -> None:
        self.events.emit(
            "quarantine",
            round=r,
            job=q.job_id,
            path=str(q.path),
            moved_to=None if q.moved_to is None else str(q.moved_to),
            reason=q.reason,
        )

    def _log_rollback(self, rb: Rollback, r: int | None) -> None:
        for q in rb.quarantined:
            self._log_quarantine(q, r)
        to = (
            "its initial state"
            if rb.checkpoint is None
            else f"checkpoint of round {rb.checkpoint.round}"
        )
        self.events.emit(
            "rollback",
            round=r,
            job=rb.job_id,
            from_steps=rb.from_steps,
            to_steps=rb.to_steps,
            steps_removed=rb.from_steps - rb.to_steps,
            reopened=rb.reopened,
            checkpoint=None if rb.checkpoint is None else str(rb.checkpoint.path),
            note=f"damaged checkpoint quarantined; job {rb.job_id} continues from {to}",
        )
        if self.view is not None:
            self.view.note(
                f"job {rb.job_id}: damaged checkpoint quarantined, rolled back from "
                f"{rb.from_steps} to {rb.to_steps} steps ({to})"
            )

    def _attempt(self, r: int) -> int:
        row = self.journal.round(r)
        return 0 if row is None else row.attempt + 1

    def _task(
        self, a: Assignment, r: int, attempt: int, gpus: dict[str, dict[str, tuple[int, ...]]]
    ) -> CopyTask:
        job = self.by_id[a.job_id]
        # A forked copy's tracker id follows its node's position in the whole cluster file, so it
        # stays the same while other nodes go down or come back; an unforked job is copy 1.
        idx = self.cluster.node_index[min(a.placement)] + 1 if a.copy > 0 else 1
        tracker_copy = ids.copy_id(job.job_id, idx, self.cfg.max_job_count)
        self.tracker.register_copies(job.job_id, max(idx, 1))
        state = self.tracker.job_state(job.job_id)
        budget = (
            state.remaining_steps
            if a.step_budget is None
            else min(a.step_budget, state.remaining_steps)
        )
        ckpt = self.tracker.latest_checkpoint(job.job_id)  # verified at the start of the round
        return CopyTask(
            round=r,
            attempt=attempt,
            job=job,
            copy=a.copy,
            tracker_copy=tracker_copy,
            placement=a.placement,
            steps=max(1, math.ceil(budget)),
            deadline_s=self.cfg.slot_s,
            timeout_s=self.cfg.slot_s + self.cfg.grace_s,
            checkpoint_in=ckpt.path if ckpt else None,
            checkpoint_sha256=ckpt.sha256 if ckpt else None,
            data_stream=idx,
            threads=self.cfg.threads,
            gpus=gpus,
            devices=devices_of(gpus, self._gpus),
            warm=self.cfg.warm_workers,
            spec=(
                elastic.round_spec(job, a.batch_size, a.num_gpus, self.throughput.iterations(job))
                if job.is_elastic
                else None
            ),
            measure=job.is_elastic,
        )

    def _dispatch(self, tasks: list[CopyTask], r: int, attempt: int) -> list[CopyOutcome]:
        if not tasks:
            time.sleep(min(1.0, self.cfg.slot_s))
            return []
        local = self.rundir / "incoming" / f"r{r:04d}-a{attempt}"
        with ThreadPoolExecutor(max_workers=len(tasks)) as pool:
            return list(pool.map(lambda t: self._run_copy(t, local), tasks))

    def _run_copy(self, task: CopyTask, local: Path) -> CopyOutcome:
        """One copy; with a node stream, a copy whose node is not up when it starts, or leaves
        before it returns, is preempted: nothing it did is reported (its steps are lost)."""
        if self.leaves is None:
            return run_copy(self.provider, task, local)
        nodes, t0 = placement_nodes(task.placement), self.leaves.now()
        gone = [n for n in nodes if self.leaves.left_since(n, t0)]
        outcome = None if gone else run_copy(self.provider, task, local)
        gone = gone or [n for n in nodes if self.leaves.left_since(n, t0)]
        if outcome is not None and not gone:
            return outcome
        return CopyOutcome(
            task,
            PREEMPTED,
            error=f"node {'+'.join(gone)} left the pool (node stream): the copy's worker was "
            "killed and its steps of this round are lost",
        )

    def _load_stream(self) -> NodeStream | None:
        """The checked ``--node-stream`` (None without one). Nodes vanish by having their
        processes killed, so a stream needs nodes that run on this machine."""
        if self.cfg.node_stream is None:
            return None
        stream = load_node_stream(self.cfg.node_stream, self.cluster.node_names, self.cfg.cluster)
        if not _shares_machine(self.cluster):
            raise InputError(
                f"--node-stream {self.cfg.node_stream}: real runs replay a node stream on local "
                f"nodes only (cluster {self.cluster.name} uses the {self.cluster.provider} provider)"
            )
        return stream

    def _leave_watcher(self, stream: NodeStream) -> LeaveWatcher:
        """The watcher that kills a node's processes when the stream says it leaves."""

        def vanish(node: str) -> list[int]:
            return kill_processes_in(Path(self.provider.workdir(node)))

        def on_leave(event: NodeEvent, killed: list[int]) -> None:
            self.events.emit("node-leave", node=event.node, at_s=event.time, killed=len(killed))

        return LeaveWatcher(stream, self.cfg.started_at, vanish, on_leave)

    def _stream_nodes(self, r: int) -> set[str]:
        """The nodes the stream has up now; while none is, wait for the next join."""
        assert self.leaves is not None
        stream, names = self.leaves.stream, self.cluster.node_names
        while not (up := set(stream.available(names, self.leaves.now()))):
            at = next_join(stream, names, self.leaves.now())
            if at is None:
                raise UnreachableNodeError(
                    f"{self.cfg.node_stream}: no node of cluster {self.cluster.name} is up "
                    "from here to the stream's end"
                )
            self.events.emit("waiting", round=r, next_join_s=at, note="no node is up")
            while self.leaves.now() < at:
                if self._stop.is_set():
                    raise StopRequested()
                time.sleep(min(0.5, at - self.leaves.now()))
        return up

    def _observe(self, job_id: int, node: str, steps: int, train_s: float, placement: Any) -> None:
        """A measured rate, at the GPU count it ran on (an elastic job's varies)."""
        if steps > 0 and train_s > 0 and job_id in self.by_id:
            gpus = sum(sum(per.values()) for per in placement.values())
            self.throughput.observe(self.by_id[job_id], node, gpus, steps / train_s)

    def _available_cluster(self, r: int) -> Cluster:
        """Nodes that are up this round: re-read the cluster file (joins and leaves), ask the
        provider (reclaimed cloud instances drop out), re-probe nodes marked down."""
        mtime = _mtime(self.cfg.cluster)
        if mtime != self._cluster_mtime:
            new = load_cluster(self.cfg.cluster)
            self.events.emit("cluster-changed", round=r, nodes=list(new.node_names))
            # a node declared differently is probed and numbered again
            self._gpus = {
                n: g
                for n, g in self._gpus.items()
                if n in new.node_index
                and n in self.cluster.node_index
                and new.node(n) == self.cluster.node(n)
            }
            self.cluster, self._cluster_mtime = new, mtime
            self._record_cluster_digest()
            self.provider.close()
            self.provider = make_provider(self.cluster, self.cfg.run_id, **self._provider_kwargs())
        offered = {n.name for n in self.provider.nodes()} & set(self.cluster.node_names)
        if self.leaves is not None:
            offered &= self._stream_nodes(r)
        states = self.journal.node_states()
        up = []
        probed: dict[str, GpuReport] = {}
        for name in self.cluster.node_names:
            if name not in offered:
                continue
            known = states.get(name)
            if (
                known is None
                or (known[0] and name not in self._gpus)
                or (not known[0] and (r - known[1]) % self.cfg.probe_every == 0)
            ):
                health = self.provider.check(name, timeout_s=min(30.0, self.cfg.slot_s))
                self.journal.set_node(name, health.reachable, r, health.error)
                if known is not None and health.reachable:
                    self.events.emit("node-up", round=r, node=name)
                if known is None and not health.reachable:
                    self.events.emit("node-down", round=r, node=name, error=health.error)
                if health.reachable:
                    up.append(name)
                    probed[name] = gpu_report(health.details)
            elif known[0]:
                up.append(name)
        rejected = self._number_gpus(probed, r)
        up = [n for n in up if n not in rejected]
        if not up:
            states = self.journal.node_states()
            reasons = "; ".join(
                _down_reason(n, states.get(n), self.cluster.provider)
                for n in self.cluster.node_names
            )
            raise UnreachableNodeError(
                f"{self.cfg.cluster}: no node of cluster {self.cluster.name} is reachable: "
                f"{reasons}"
            )
        return self.cluster.subset(up)

    def _number_gpus(self, probed: dict[str, GpuReport], r: int) -> set[str]:
        """Number the GPUs of the nodes just probed (a thin hook: gpu_inventory does the work).
        Before the first round a mismatch is bad input; later it leaves the node down. Returns
        the nodes left out."""
        numbered, problems = number_nodes(
            [self.cluster.node(n) for n in probed],
            probed,
            shared_machine=_shares_machine(self.cluster),
            numbered={n: g for n, g in self._gpus.items() if n not in probed},
        )
        if problems and not self._preflight_done:
            raise GpuMismatchError(next(iter(problems.values())))
        self._preflight_done = True
        for name, why in problems.items():
            self.journal.set_node(name, False, r, why)
            self.events.emit("node-down", round=r, node=name, error=why)
        for name, g in numbered.items():
            self._gpus[name] = g
            self.events.emit("gpus", round=r, node=name, **g.as_dict())
        return set(problems)

    def _record_cluster_digest(self) -> None:
        """A cluster file change seen during the run is part of the run: record its digest in
        run.json so ``--resume`` accepts it."""
        if not (self.rundir / "run.json").is_file():
            return
        cfg = load_config(self.rundir)
        if cfg.identity is not None:
            identity = cfg.identity.model_copy(
                update={"cluster_sha256": cluster_digest(cfg.cluster)}
            )
            save_config(cfg.model_copy(update={"identity": identity}), self.rundir)

    def _evaluate_pending(self, r: int, cluster: Cluster | None = None) -> bool:
        """Score every finished job not yet scored (also after a restart: an interrupted
        evaluation is redone). Returns False if a finished job's checkpoint was damaged and the
        job rolled back to train again."""
        if not self.cfg.evaluate:
            return True
        scored = {
            e.get("job")
            for e in self.events.read()
            if e.get("event") == "evaluation" and e.get("metric")
        }
        pending = [
            j.job_id
            for j in self.jobs
            if j.job_id not in scored
            and j.job_id not in self._eval_tried
            and self.tracker.is_complete(j.job_id)
        ]
        all_good = True
        for job_id in pending:
            ckpt = self._verified_checkpoint(job_id, r)
            if not self.tracker.is_complete(job_id):
                all_good = False
                continue
            if ckpt is None:
                continue
            cluster = cluster or self._available_cluster(r)
            self._eval_tried.add(job_id)
            node = cluster.node_names[0]
            metric = evaluate_checkpoint(
                self.provider,
                node,
                self.by_id[job_id],
                ckpt.path,
                ckpt.sha256,
                self.rundir / "incoming" / "eval",
                timeout_s=max(60.0, self.cfg.slot_s * 4),
                warm=self.cfg.warm_workers,
                env=eval_env(self._gpus.get(node)),
            )
            crash_point("evaluate:computed")
            self.events.emit("evaluation", job=job_id, node=node, metric=metric)
            crash_point("evaluate:scored")
        return all_good


def _down_reason(node: str, state: tuple[bool, int, str | None] | None, provider: str) -> str:
    """Why ``node`` is down, on one line (its last health-check error names host:port)."""
    if state is None:
        return f"node {node}: not offered by the {provider} provider"
    return " ".join((state[2] or f"node {node}: down since round {state[1]}").split())


def _job_spec(job: Job, workload: str) -> JobSpec:
    """The job's training spec, validated as the worker will (before any round is dispatched)."""
    if not job.spec:
        raise InputError(
            f"{workload}: job {job.job_id}: no training spec (real runs need model, size, data, "
            f"batch_size, lr)"
        )
    return parse_spec(dict(job.spec), f"{workload}: job {job.job_id}: spec")


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
    }


def _make_policy(name: str, options: dict[str, str], knobs: RuntimeKnobs) -> Policy:
    return policy_with_options(name, options, **knobs.fixed_for(name))


def _mtime(path: str) -> float | None:
    from hadar.core.cluster_config import resolve_cluster_path

    p = resolve_cluster_path(path)
    return p.stat().st_mtime if p.exists() else None


def _shares_machine(cluster: Cluster) -> bool:
    """Whether every node of ``cluster`` is this machine (its provider's capability)."""
    kind = provider_kind(cluster.provider)
    return kind is not None and kind.shares_machine
