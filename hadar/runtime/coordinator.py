"""The real round loop: decide, dispatch every (copy, node) concurrently, collect, hand the
results to the Job Tracker, feed measured throughputs to the online estimator, repeat.

Crash safety: the run's state is one SQLite file, ``state.sqlite`` (the Job Tracker's tables,
the journal's and the events'). The plan of round r is journalled before dispatch; the round's
commit point is ONE transaction: the tracker opens the round, takes every copy's report and
closes it (its steps and consolidated checkpoints), the journal records the timings and the
round's events are written. On start-up (``hadar run --resume``) a round that did not commit is
aborted (its partial reports withdrawn) and planned again as a new attempt, so no completed step
is lost and none is counted twice. Worker files of different attempts never collide
(``r<round>-a<attempt>/``). ``events.jsonl`` is an output, never read back.

Faults that would otherwise stall a run (``hadar/runtime/faults.py``): every job's checkpoint is
verified against its recorded sha256 at the start of each round (a damaged one is quarantined
and the job rolled back) and again as it is sent; a job with no progress for ``stall_rounds``
rounds is given up (the others go on), a whole run without progress stops with one line and the
likely cause; a full, read-only or unwritable run or node directory stops it with one line.

The coordinator is the round loop's executor (``hadar/loop.py``) made of parts with one job
each: :class:`~hadar.runtime.node_manager.NodeManager` (which nodes are up, the provider, GPU
numbering, the node stream), :class:`~hadar.runtime.round_executor.RoundExecutor` (one round from
plan to commit point), :class:`~hadar.runtime.bookkeeping.RoundBook` (what the run keeps from
committed rounds and the progress checks, a round's bookkeeping top-down in one module),
:class:`~hadar.runtime.evaluator.Evaluator` and its checkpoint guard. The coordinator itself
sets the run up, recovers it after a crash and handles signals.
"""

from __future__ import annotations

import contextlib
import signal
import sqlite3
import threading
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from estimators.online import OnlineThroughput
from hadar.core.cluster import Cluster
from hadar.core.defaults import REAL_RUN_FORK_PROGRESS
from hadar.core.jobs import Job
from hadar.core.safe_paths import refuse_links, remove_tree
from hadar.core.state_db import reading_state
from hadar.loop import Decision, RoundLoop
from hadar.policy import Policy, RoundContext
from hadar.providers.base import NodeProvider, make_provider
from hadar.runtime.bookkeeping import RoundBook
from hadar.runtime.config import RunConfig, RuntimeKnobs
from hadar.runtime.evaluator import CheckpointGuard, Evaluator
from hadar.runtime.faults import (
    RunStalledError,
    node_resource_error,
    resource_error,
)
from hadar.runtime.gpu_inventory import NodeGpus
from hadar.runtime.history import copy_records
from hadar.runtime.identity import check_tracker_jobs
from hadar.runtime.journal import EventLog, Journal, check_state_files
from hadar.runtime.node_manager import (
    NodeManager,
    ProviderFactory,
    StopRequested,
    shares_machine,
)
from hadar.runtime.node_stream import LeaveWatcher
from hadar.runtime.round_executor import RoundExecutor, RoundResult
from hadar.runtime.run_inputs import RunInputs, accept_run_inputs
from hadar.runtime.slurm_stream import SlurmWatcher
from hadar.runtime.state_file import EVENTS_FILE, open_run_state
from tracker.tracker import JobTracker

__all__ = ["STOP_SIGNALS", "Coordinator", "StopRequested"]

_shares_machine = shares_machine
"""Kept under its earlier name (hadar/runtime/node_manager.py has it now)."""

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
"""Signals that stop a run as Ctrl-C does: after the round in flight, state saved."""


class Coordinator:
    """Drives one run directory to completion (or until stopped)."""

    plays_refills = True  # a refill starts when the copy it follows returns (round_executor.py)
    keeps_policy_state = True  # journaled with each round's plan, restored on resume

    def __init__(
        self,
        rundir: Path,
        cfg: RunConfig,
        *,
        provider_options: dict[str, Any] | None = None,
        knobs: RuntimeKnobs | None = None,
        view: Any = None,
        provider_factory: ProviderFactory = make_provider,
        inputs: RunInputs | None = None,
    ) -> None:
        rundir = rundir.resolve()  # resolved once: a link planted later is refused, not followed
        self.rundir = rundir
        inputs = inputs or accept_run_inputs(cfg, knobs)  # bad input: refused before any write
        cfg, cluster, stream = inputs.cfg, inputs.cluster, inputs.stream
        self.cfg = cfg
        self.knobs = inputs.knobs
        self.jobs: list[Job] = inputs.jobs
        self.specs = inputs.specs
        self.by_id = {j.job_id: j for j in self.jobs}
        self.throughput = OnlineThroughput(inputs.prior)
        self.estimated_cells = inputs.prior.estimated_cells(self.jobs, cluster)
        self.policy: Policy = inputs.policy
        refuse_links(rundir, "the run directory")  # before anything is written there
        rundir.mkdir(parents=True, exist_ok=True)
        self.db = open_run_state(rundir)
        """The run's one state file: the tracker's, the journal's and the events' tables."""
        try:
            with reading_state(self.db.path):  # a table dropped from the file: one line
                self.tracker = JobTracker.open(  # takes the run's lock before anything is written
                    self.db,
                    rundir / "checkpoints",
                    max_job_count=cfg.max_job_count,
                    averaging="steps",
                    keep_checkpoints=cfg.keep_checkpoints,
                )
        except BaseException:
            self.db.close()
            raise
        self.journal = Journal(self.db)
        self.events = EventLog(rundir / EVENTS_FILE, self.db)
        with reading_state(self.db.path):
            self._check_and_register()
        self._stop = threading.Event()
        self._abandon = threading.Event()
        self.stop_signal: int = signal.SIGINT
        """The signal that stopped the run (exit status 128 + it)."""
        self.nodes = NodeManager(
            rundir,
            cfg,
            cluster,
            stream,
            self.journal,
            self.events,
            self._stop,
            provider_options,
            provider_factory,
        )
        self.book = RoundBook(
            rundir, cfg, self.by_id, self.throughput, self.tracker, self.events, self._note
        )
        """A round's bookkeeping: what the run keeps from committed rounds, progress checks."""
        self.state, self.failed = self.book.state, self.book.failed
        self.guard = CheckpointGuard(self.tracker, self.events, self._note)
        self.evaluator = Evaluator(
            rundir, cfg, self.jobs, self.tracker, self.events, self.nodes, self.guard
        )
        self.rounds = RoundExecutor(
            rundir,
            cfg,
            self.by_id,
            self.tracker,
            self.journal,
            self.events,
            self.nodes,
            self.book,
            self.guard,
            self.throughput,
        )
        self._up: Cluster | None = None
        """The nodes up for the round being played (found by :meth:`prepare`)."""
        self.view = view

    # -- the parts, as earlier callers name them ------------------------------------------------
    @property
    def view(self) -> Any:
        """The live view (None without one); the round executor shows rounds on it."""
        return self._view

    @view.setter
    def view(self, view: Any) -> None:
        self._view = view
        if hasattr(self, "rounds"):
            self.rounds.view = view

    def _note(self, message: str) -> None:
        if self._view is not None:
            self._view.note(message)

    @property
    def cluster(self) -> Cluster:
        return self.nodes.cluster

    @property
    def provider(self) -> NodeProvider:
        return self.nodes.provider

    @property
    def leaves(self) -> LeaveWatcher | SlurmWatcher | None:
        return self.nodes.leaves

    @property
    def _gpus(self) -> dict[str, NodeGpus]:
        return self.nodes.gpus

    def _available_cluster(self, r: int) -> Cluster:
        return self.nodes.available(r)

    # -- set-up and recovery ------------------------------------------------------------------
    def preflight(self) -> None:
        """Probe the nodes and number their GPUs before any round is dispatched: a node whose
        GPUs do not match the cluster file is bad input (GpuMismatchError, one line)."""
        if not self.nodes.preflight_done:
            last_closed = self.tracker.last_closed_round()
            self._available_cluster(0 if last_closed is None else last_closed + 1)

    def _check_and_register(self) -> None:
        """Refuse a state file that lost rounds or holds another workload's jobs; register the
        workload's jobs it does not have yet."""
        check_state_files(self.journal, self.tracker.last_closed_round(), self.db.path)
        registered = self.tracker.jobs()
        check_tracker_jobs(
            [(s.job_id, s.target_steps, s.model, s.size) for s in registered],
            self.jobs,
            str(self.db.path),
            self.cfg.workload,
        )
        known = {s.job_id for s in registered}
        for j in self.jobs:
            if j.job_id not in known:
                spec = self.specs[j.job_id]
                self.tracker.register_job(
                    j.job_id, int(j.total_steps), model=spec.model, size=spec.size
                )

    def recover(self) -> int:
        """Reconcile journal and tracker after a restart; returns the next round number (one
        line naming the state file if its rows were edited into what hadar never writes)."""
        with reading_state(self.db.path):
            return self._recover()

    def _recover(self) -> int:
        last_closed = self.tracker.last_closed_round()
        next_round = 0 if last_closed is None else last_closed + 1
        for row in list(self.journal.iter_rounds("planned")):
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
        # once per session, a batch of rows at a time: later rounds are booked as they close
        for row in self.journal.iter_rounds("closed"):
            self.book.replay(row, copy_records(row, self.tracker))
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
                err = resource_error(exc, self.rundir, [self.db.path])
                if err is None:
                    raise
                raise err from None
        finally:
            if self.leaves is not None:
                self.leaves.stop()
            for sig, handler in prev.items():
                signal.signal(sig, handler)
            self.nodes.shutdown(clean=finished and not self.failed)
            self.close()
        if self.failed:
            lines = "; ".join(f"job {j}: {cause}" for j, cause in sorted(self.failed.items()))
            raise RunStalledError(
                f"{len(self.failed)} job(s) made no progress in {self.cfg.stall_rounds} rounds in a row and were "
                f"given up ({lines}); the other jobs finished; retry them with: hadar run --resume {self.rundir}"
            )

    def _run_rounds(self) -> bool:
        self.preflight()
        r = self.recover()
        self.events.emit(
            "start",
            sync=True,
            round=r,
            policy=self.cfg.policy,
            cluster=self.cluster.name,
            jobs=len(self.jobs),
            estimated_cells=[asdict(c) for c in self.estimated_cells],
            arrivals={j.job_id: j.arrival for j in self.jobs if j.arrival},
            job_types={j.job_id: [j.job_type, j.num_gpus] for j in self.jobs},
        )
        self._restore_policy_state()
        # an evaluation a restart interrupted is redone first; later ones are each round's record
        # (a finished job whose checkpoint turns out damaged is rolled back and trains again)
        self.evaluator.evaluate_pending(r)
        r = RoundLoop(self.policy, self).run(first_index=r)
        self.events.emit("finish", sync=True, rounds=r)
        return True

    def _all_done(self) -> bool:
        complete = self.tracker.completed_jobs()
        return all(j.job_id in complete or j.job_id in self.failed for j in self.jobs)

    def nothing_to_resume(self) -> bool:
        """Every job is complete and, if the run scores its models, scored: a resumed session
        would train and evaluate nothing."""
        return self._all_done() and not self.evaluator.pending()

    def _restore_policy_state(self) -> None:
        """Hand the policy the state it had after the last committed round's decision (saved
        with that round's plan), so a resumed run decides as an uninterrupted one would."""
        with reading_state(self.db.path):  # a state edited into another shape: one line
            last = self.journal.last_closed()
            if last is not None and last.policy_state:
                self.policy.restore(last.policy_state)

    # -- the round loop's executor (hadar/loop.py) ---------------------------------------------
    def finished(self) -> bool:
        return self._all_done()

    def _waiting_jobs(self) -> list[Job]:
        complete = self.tracker.completed_jobs()
        return [j for j in self.jobs if j.job_id not in self.failed and j.job_id not in complete]

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

    def prepare(self, index: int) -> None:
        """The round's side effects before its context: find the nodes that are up (re-read
        the cluster file, probe nodes marked down) and verify every unfinished job's
        checkpoint (a damaged one is quarantined and the job rolled back)."""
        self._up = self.nodes.available(index)
        complete = self.tracker.completed_jobs()
        self.guard.verified_all(
            [
                j.job_id
                for j in self.jobs
                if j.job_id not in self.failed and j.job_id not in complete
            ],
            index,
        )

    def context(self, index: int) -> RoundContext:
        """What the policy sees: no side effects (:meth:`prepare` had them), no history
        re-read (:class:`RunState` is kept up as rounds commit)."""
        if self._up is None:
            raise RuntimeError("context() before prepare(): the round loop calls prepare first")
        cluster = self._up
        now = time.time() - self.cfg.started_at
        active = self.state.statuses(
            self.tracker.progress(), self.tracker.completed_jobs(), set(self.failed), now
        )
        up = set(cluster.node_names)
        # nodes that left or are down
        current = {k: p for k, p in self.state.current.items() if set(p) <= up}
        return RoundContext(
            now=now,
            round_index=index,
            round_s=self.cfg.round_s,
            cluster=cluster,
            jobs=tuple(active),
            current=current,
            throughput=self.throughput,
            restart_penalty_s=self.knobs.restart_penalty_s,
            fork_progress=REAL_RUN_FORK_PROGRESS,
            nodes_may_change=self.cfg.node_stream is not None,
        )

    def execute(self, decision: Decision) -> RoundResult:
        """Journal the plan and the policy state, dispatch, collect, let the tracker close the
        round (its commit point), journal the timings (the round executor), then book it."""
        result = self.rounds.play(decision)
        self.book.committed(result.row, result.copies, result.completed)
        return result

    def record(self, decision: Decision, outcome: RoundResult) -> None:
        """After a committed round: drop its fetched files, check disks and progress, score
        the jobs it finished."""
        attempt, copies, r = outcome.attempt, outcome.copies, decision.ctx.round_index
        self._drop_incoming(r, attempt)
        if self.view is not None:
            self.view.end_round(r, self.tracker.progress())
        err = node_resource_error(copies, self.provider.workdir, self.rundir)
        if err is not None:
            raise err
        self.book.check_progress(r)
        self.evaluator.evaluate_pending(r, decision.ctx.cluster)

    def close(self) -> None:
        """Release the provider's connections and the databases (best effort: each is tried)."""
        for close in (
            self.events.sync,
            self.events.close,
            self.provider.close,
            self.tracker.close,
            self.journal.close,
            self.db.close,
        ):
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

    def _drop_incoming(self, r: int, attempt: int) -> None:
        """Delete a finished round's fetched copy checkpoints (the tracker has consolidated them)."""
        with contextlib.suppress(OSError):  # best effort; a link planted there stops the run
            remove_tree(self.rundir / "incoming" / f"r{r:04d}-a{attempt}")
