"""The simulation loop: rounds of ``round_s`` seconds, arrivals, checkpoint-restart
penalties, jobs finishing mid-round, and the bookkeeping policies see in the next round.

Semantics (also in docs/hadar.md, section Simulator):

* A round starts, arrived unfinished jobs are offered to the policy, its plan is validated
  (capacity, gang size, known jobs, at most one copy of a job per node) and run.
* A run whose placement differs from the same (job, copy)'s placement last round pays
  ``restart_penalty_s`` seconds (checkpoint-restart), unless the job has done no step yet or the
  policy decided it explicitly (``Assignment.restart``).
  ``Assignment.overhead_s`` is paid every round (e.g. HadarE's aggregation). A job with its
  own ``restart_s`` (Pollux's applications) pays that instead of ``restart_penalty_s``.
* A run progresses at ``throughput.run_rate`` (steps/s; for a Pollux job its goodput at its
  progress so far and the round's batch size, docs/elastic.md). With ``fork_progress="goodput"``
  a job's copies running together progress at most as one job at their combined batch.
* A job finishes at the exact moment its steps reach the target; its GPUs stay idle for the
  rest of the round (``round_end="round"``) or the round ends when its longest run ends
  (``round_end="longest-job"``, Gavel's simulator), unless a refill (``Assignment.after``)
  follows it there: that run starts when the run it follows stops, then pays its penalty and
  overhead.
* GPU busy time counts from when a run gets its GPUs (the round start, or a refill's start)
  until it stops (finished, budget spent or slot over), penalties included: the GPU is held.
* Jobs arriving during a round wait for the next round; an idle cluster starts a round at the
  next arrival. Rounds are numbered consecutively (0, 1, 2, ...): an idle gap between two rounds
  is visible in their times, never as a missing round index, and does not count against
  ``max_rounds`` (which bounds decision rounds).
* A simulation stops with :class:`SimulationLimitError` (a one-line error, exit code 2) when
  simulated time reaches ``horizon_s`` or ``max_rounds`` rounds have run with jobs unfinished,
  instead of running for ever (e.g. a job of 1e30 steps), and when the policy leaves the cluster
  idle for ``stall_rounds`` rounds while jobs wait (it cannot place them).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace

from estimators.throughput import RunRate, ThroughputModel
from hadar.core.cluster import Cluster
from hadar.core.defaults import DEFAULT_HORIZON_S, FORK_PROGRESS, SIMULATED
from hadar.core.errors import HadarError, InputError
from hadar.core.job_service import JobService
from hadar.core.jobs import Job, JobStatus, Placement
from hadar.core.node_stream import NodeStream
from hadar.core.text import duration_text
from hadar.loop import Decision, PolicyError, RoundLoop, validate_plan
from hadar.policy import Assignment, Policy, RoundContext, RoundPlan, forget_memos
from hadar.reference_rates import best_achievable_rate, equal_share_rate
from hadar.round_progress import book_job_round, play_plan
from hadar.simulator.records import JobRecord, PlacementRecord, RoundRecord, SimulationResult

__all__ = [
    "DEFAULT_HORIZON_S",
    "PolicyError",
    "SimConfig",
    "SimulationLimitError",
    "SimulatorExecutor",
    "simulate",
    "validate_plan",
]
"""``PolicyError`` and ``validate_plan`` live in ``hadar.loop`` (shared with real runs)."""


class SimulationLimitError(InputError):
    """The workload did not finish within the simulation's horizon or round limit, or the
    policy cannot place it on the cluster. ``partial`` (set by :func:`simulate`) is the run up
    to the stop: the jobs finished by then, the rounds played (a stall's idle rounds included)."""

    partial: SimulationResult | None = None
    stopped_at_s: float | None = None
    """Simulated time of the stop."""


@dataclass(frozen=True)
class SimConfig:
    round_s: float = SIMULATED.round_s
    restart_penalty_s: float = SIMULATED.restart_penalty_s
    round_end: str = "round"
    """``round``: every round lasts ``round_s``; ``longest-job``: a round ends when its longest
    run ends (Gavel's simulator)."""
    max_rounds: int = 200_000
    horizon_s: float = DEFAULT_HORIZON_S
    """Simulated time (from 0) by which every job must have finished, else an error."""
    stall_rounds: int = 2_000
    """Give up (error) after this many consecutive rounds with jobs waiting and nothing running."""
    progress: bool = False
    fork_progress: str = FORK_PROGRESS[0]
    """How a job's copies running in the same round (HadarE's forks) progress, for jobs with
    efficiency data: ``goodput`` (at most as one job at their combined batch: each copy's
    samples count at the combined batch's statistical efficiency) or ``steps`` (each copy's own
    progress counts in full, the Hadar paper's accounting). docs/elastic.md."""
    node_stream: NodeStream | None = None
    """Nodes joining and leaving (``--node-stream``, docs/node-streams.md): each round sees only
    the nodes up at its start and ends at the next event, so a leave preempts what runs on the
    node without warning (its run stops there and pays the restart when it resumes)."""

    def __post_init__(self) -> None:
        if not 0 < self.round_s < float("inf"):
            raise ValueError("round_s must be positive and finite")
        if not 0 < self.horizon_s < float("inf"):
            raise ValueError("horizon_s must be positive and finite")
        if not 0 <= self.restart_penalty_s < float("inf"):
            raise ValueError("restart_penalty_s must be >= 0")
        if self.round_end not in ("round", "longest-job"):
            raise ValueError("round_end must be 'round' or 'longest-job'")
        if self.fork_progress not in FORK_PROGRESS:
            raise ValueError(f"fork_progress must be one of {', '.join(FORK_PROGRESS)}")


@dataclass
class _JobState(JobService):
    """A simulated job: the shared per-job bookkeeping plus the simulator's own progress."""

    job: Job = field(kw_only=True)
    remaining: float = field(kw_only=True)
    restarts: int = 0
    step_sum: float = 0.0
    """Progress as the steps accounting credits it (each copy's own progress in full)."""

    def policy_status(self) -> JobStatus:
        return self.status(self.job, self.remaining)


def simulate(
    cluster: Cluster,
    jobs: Sequence[Job],
    policy: Policy,
    throughput: ThroughputModel,
    config: SimConfig | None = None,
) -> SimulationResult:
    """Run ``jobs`` on ``cluster`` under ``policy`` until every job has finished."""
    cfg = config or SimConfig()
    forget_memos()  # this run's decision times owe nothing to an earlier run in this process
    executor = SimulatorExecutor(cluster, jobs, policy.name, throughput, cfg)
    progress = _Progress(len(jobs)) if cfg.progress else None
    executor.progress = progress
    try:
        RoundLoop(policy, executor).run()
    except SimulationLimitError as exc:
        exc.partial, exc.stopped_at_s = executor.result(), executor.now
        raise
    finally:
        if progress:
            progress.close()
    return executor.result()


class SimulatorExecutor:
    """The simulator's backend of the round loop (``hadar/loop.py``): arrivals on a simulated
    clock, the progress model, and the records a :class:`SimulationResult` is made of. It keeps
    no policy state (nothing resumes a simulation)."""

    plays_refills = True
    keeps_policy_state = False

    def __init__(
        self,
        cluster: Cluster,
        jobs: Sequence[Job],
        policy_name: str,
        throughput: ThroughputModel,
        cfg: SimConfig,
    ) -> None:
        self.cluster, self.throughput, self.cfg, self.policy_name = (
            cluster,
            throughput,
            cfg,
            policy_name,
        )
        self.jobs = tuple(jobs)
        self.states = {j.job_id: _JobState(job=j, remaining=float(j.total_steps)) for j in jobs}
        if len(self.states) != len(jobs):
            raise HadarError("workload has duplicate job ids")
        self.pending = sorted(jobs, key=lambda j: (j.arrival, j.job_id))
        self.arrived: list[int] = []
        self.current: dict[tuple[int, int], Placement] = {}
        self.rounds: list[RoundRecord] = []
        self.placements: list[PlacementRecord] = []
        self.gpu_busy: dict[str, float] = {}
        self.now = self.pending[0].arrival if self.pending else 0.0
        self.stall = 0
        self.cut_rounds = 0
        """Rounds a node-stream event cut shorter than the round length."""
        self.progress: _Progress | None = None

    def _active(self) -> list[int]:
        return [i for i in self.arrived if self.states[i].finish is None]

    def finished(self) -> bool:
        return all(s.finish is not None for s in self.states.values())

    def admit_arrivals(self) -> None:
        while True:
            while self.pending and self.pending[0].arrival <= self.now:
                self.arrived.append(self.pending.pop(0).job_id)
            if self._active() or not self.pending:
                break
            self.now = self.pending[
                0
            ].arrival  # an idle gap: no round is recorded and none is counted
            self.current = {}
        self._skip_empty_pool()

    def prepare(self, index: int) -> None:
        """Nothing to do before a simulated round's context (no nodes to probe)."""

    def _skip_empty_pool(self) -> None:
        """With a node stream, wait (no round) while no node is up and one will join."""
        stream = self.cfg.node_stream
        if stream is None:
            return
        while not stream.available(self.cluster.node_names, self.now):
            following = stream.next_time(self.now)
            if following is None:
                if self.finished():
                    return
                raise SimulationLimitError(
                    f"simulation of {self.policy_name} stopped at {self.now / 3600:,.1f} h: the node "
                    f"stream {stream.source} ends with no node up and jobs unfinished"
                )
            self.now = following
            self.current = {}

    def _round_view(self) -> tuple[Cluster, float, dict[tuple[int, int], Placement]]:
        """The nodes up now, this round's length (cut at the next stream event) and last
        round's placements on nodes that are still up."""
        stream = self.cfg.node_stream
        if stream is None:
            return self.cluster, self.cfg.round_s, self.current
        up = stream.available(self.cluster.node_names, self.now)
        following = stream.next_time(self.now)
        length = self.cfg.round_s
        if following is not None:
            length = min(length, following - self.now)
        upset = set(up)
        current = {k: p for k, p in self.current.items() if all(n in upset for n in p)}
        return self.cluster.subset(up), length, current

    def context(self, index: int) -> RoundContext:
        cfg, states = self.cfg, self.states
        if index >= cfg.max_rounds or self.now >= cfg.horizon_s:
            unfinished = sum(1 for s in states.values() if s.finish is None)
            limit = (
                f"{cfg.max_rounds} rounds"
                if index >= cfg.max_rounds
                else f"the horizon of {duration_text(cfg.horizon_s)} of simulated time (--horizon)"
            )
            stream = cfg.node_stream
            if stream is not None and index >= cfg.max_rounds and 2 * self.cut_rounds > index:
                raise SimulationLimitError(
                    f"simulation of {self.policy_name} stopped at {duration_text(self.now)}: "
                    f"{unfinished} of {len(states)} jobs unfinished after {limit}, "
                    f"{self.cut_rounds:,} of them cut short by the node stream {stream.source} "
                    "(its events come closer together than a round); thin the stream or raise "
                    "the limit"
                )
            raise SimulationLimitError(
                f"simulation of {self.policy_name} stopped at {duration_text(self.now)}: {unfinished} of "
                f"{len(states)} jobs unfinished after {limit}; shorten the workload or raise the limit"
            )
        cluster, length, current = self._round_view()
        if length < cfg.round_s:
            self.cut_rounds += 1
        return RoundContext(
            now=self.now,
            round_index=index,
            round_s=length,
            cluster=cluster,
            jobs=tuple(
                states[i].policy_status()
                for i in sorted(self._active(), key=lambda i: (states[i].job.arrival, i))
            ),
            current=current,
            throughput=self.throughput,
            restart_penalty_s=cfg.restart_penalty_s,
            fork_progress=cfg.fork_progress,
            nodes_may_change=cfg.node_stream is not None,
        )

    def execute(
        self, decision: Decision
    ) -> tuple[RoundRecord, dict[tuple[int, int], Placement], float]:
        return _run_round(
            decision.plan, decision.ctx, self.states, self.cfg, self.placements, self.gpu_busy
        )

    def record(
        self,
        decision: Decision,
        outcome: tuple[RoundRecord, dict[tuple[int, int], Placement], float],
    ) -> None:
        record, new_current, _ = outcome
        if self.pending and self.pending[0].arrival < self.now + record.duration:
            record = replace(record, active_seconds=record.duration)  # a job arrived meanwhile
        self.rounds.append(
            RoundRecord(**{**asdict(record), "decision_seconds": decision.decision_s})
        )
        if self.progress:
            self.progress.update(
                sum(1 for s in self.states.values() if s.finish is not None), self.now
            )
        stream = self.cfg.node_stream
        more_nodes_ahead = stream is not None and stream.next_time(self.now) is not None
        # while a node stream still has events ahead the pool may yet fit the waiting jobs
        self.stall = self.stall + 1 if not decision.plan.assignments and not more_nodes_ahead else 0
        if self.stall >= self.cfg.stall_rounds:
            active = [s.job_id for s in decision.ctx.jobs]
            waiting = ", ".join(str(i) for i in active[:5]) + (", ..." if len(active) > 5 else "")
            why = (
                "e.g. a gang larger than the GPUs of any one type, for a policy that runs a job on "
                "one GPU type"
            )
            if stream is not None:
                present, total = decision.ctx.cluster.total_gpus, self.cluster.total_gpus
                why = f"the node stream ended with {present} of {total} GPUs present; {why}"
            raise SimulationLimitError(
                f"policy {self.policy_name} cannot place job(s) {waiting} on cluster {self.cluster.name}: it "
                f"scheduled nothing for {self.stall} rounds on an idle cluster ({why})"
            )
        self.current = new_current
        self.now += record.duration

    def result(self) -> SimulationResult:
        cfg, cluster, throughput = self.cfg, self.cluster, self.throughput
        return SimulationResult(
            policy=self.policy_name,
            cluster=cluster.name,
            total_gpus=cluster.total_gpus,
            total_nodes=len(cluster.nodes),
            jobs=tuple(
                _job_record(s, cluster, throughput)
                for s in sorted(self.states.values(), key=lambda s: s.job.job_id)
            ),
            rounds=tuple(self.rounds),
            placements=tuple(self.placements),
            config={
                **{
                    k: v
                    for k, v in asdict(replace(cfg, node_stream=None)).items()
                    if k not in ("progress", "node_stream")
                },
                "node_stream": cfg.node_stream.source if cfg.node_stream else None,
            },
            gpu_busy_seconds=self.gpu_busy,
            estimated_cells=tuple(throughput.estimated_cells(self.jobs, cluster)),
        )


def _job_record(s: _JobState, cluster: Cluster, throughput: ThroughputModel) -> JobRecord:
    cons, unc = throughput.cell_rates(s.job, cluster)
    return JobRecord(
        s.job.job_id,
        s.job.job_type,
        s.job.num_gpus,
        s.job.arrival,
        s.first_start,
        s.finish,
        s.restarts,
        total_steps=float(s.job.total_steps),
        step_sum=s.step_sum,
        best_rate=best_achievable_rate(cons, unc, cluster.capacity, s.job.num_gpus),
        equal_share_rate=equal_share_rate(cons, cluster.capacity),
    )


def _run_round(
    plan: RoundPlan,
    ctx: RoundContext,
    states: dict[int, _JobState],
    cfg: SimConfig,
    placements: list[PlacementRecord],
    gpu_busy: dict[str, float],
) -> tuple[RoundRecord, dict[tuple[int, int], Placement], float]:
    round_s = ctx.round_s
    by_job: dict[int, list[Assignment]] = {}
    for a in plan.assignments:
        by_job.setdefault(a.job_id, []).append(a)
    stops: list[tuple[Assignment, float, float]] = []  # (run, got its GPUs, stopped)
    restarted: set[int] = set()
    speeds: dict[tuple[int, int], RunRate] = {}
    played = play_plan(
        plan.assignments,
        {j: (states[j].job, states[j].remaining) for j in by_job},
        ctx.current,
        ctx.throughput,
        ctx.cluster,
        round_s,
        cfg.restart_penalty_s,
        cfg.fork_progress,
    )
    for job_id, outcome in played.items():
        assigns = by_job[job_id]
        st = states[job_id]
        for a, run_rate in zip(assigns, outcome.rates, strict=True):
            speeds[a.run_key] = run_rate
        if outcome.restarted:
            restarted.add(job_id)
        end = outcome.end
        st.step_sum += sum(
            r.steps_by(end) * c for r, c in zip(outcome.runs, outcome.step_credit, strict=True)
        )
        stops.extend(zip(assigns, outcome.free_at, outcome.stops(), strict=True))
        st.remaining = book_job_round(st, outcome, ctx.now)
    for job_id in restarted:
        states[job_id].restarts += 1
    if cfg.round_end == "longest-job" and stops:
        duration = max(s for _, _, s in stops)
        duration = round_s if duration <= 0 else min(round_s, duration)
    else:
        duration = round_s
    busy_seconds = 0.0
    node_held: dict[str, list[tuple[float, float]]] = {}
    for a, got, stop in stops:
        held = max(0.0, min(stop, duration) - got)
        busy_seconds += a.num_gpus * held
        for node, per in a.placement.items():
            node_held.setdefault(node, []).append((got, got + held))
            speed = speeds[a.run_key]
            for gtype, count in per.items():
                placements.append(
                    PlacementRecord(
                        ctx.round_index,
                        ctx.now,
                        a.job_id,
                        a.copy,
                        node,
                        gtype,
                        count,
                        gpus=a.num_gpus,
                        batch_size=speed.batch_size,
                        throughput=speed.throughput,
                        efficiency=speed.efficiency,
                        goodput=speed.rate if speed.efficiency is not None else None,
                        estimated=speed.estimated,
                        after=a.after,
                    )
                )
                key = f"{node}/{gtype}"
                gpu_busy[key] = gpu_busy.get(key, 0.0) + count * held
    active_ids = {s.job_id for s in ctx.jobs}
    unfinished_end = [states[i].finish for i in active_ids]
    if all(f is not None for f in unfinished_end) and unfinished_end:
        active_seconds = min(duration, max(f - ctx.now for f in unfinished_end))  # type: ignore[operator]
    else:
        active_seconds = duration
    running = len(by_job)
    elastic = [v for v in speeds.values() if v.efficiency is not None and v.throughput]
    samples = sum(v.throughput or 0.0 for v in elastic)
    record = RoundRecord(
        index=ctx.round_index,
        time=ctx.now,
        duration=duration,
        busy_gpus=sum(a.num_gpus for a in plan.assignments),
        busy_gpu_seconds=busy_seconds,
        active_seconds=active_seconds,
        busy_nodes=len(node_held),
        busy_node_seconds=sum(_covered(spans) for spans in node_held.values()),
        running_jobs=running,
        queued_jobs=len(ctx.jobs) - running,
        decision_seconds=0.0,
        info=dict(plan.info),
        goodput=sum(v.rate for v in elastic) if elastic else None,
        efficiency=(
            sum((v.throughput or 0.0) * (v.efficiency or 0.0) for v in elastic) / samples
            if samples > 0
            else None
        ),
    )
    new_current = {
        a.run_key: a.placement for a in plan.assignments if states[a.job_id].finish is None
    }
    return record, new_current, busy_seconds


def _covered(spans: list[tuple[float, float]]) -> float:
    """Seconds covered by the union of ``(start, end)`` spans."""
    total, reach = 0.0, float("-inf")
    for start, end in sorted(spans):
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total


class _Progress:
    """A rich progress bar over completed jobs (only for long interactive runs)."""

    def __init__(self, total: int) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        self._p = Progress(
            TextColumn("simulating"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[t]}"),
            TimeElapsedColumn(),
            transient=True,
        )
        self._task = self._p.add_task("jobs", total=total, t="")
        self._p.start()

    def update(self, completed: int, now: float) -> None:
        self._p.update(self._task, completed=completed, t=f"t={now / 3600:.1f} h")

    def close(self) -> None:
        self._p.stop()
