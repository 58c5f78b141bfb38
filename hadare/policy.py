"""The HadarE policy: plain Hadar's whole round decision, then forked copies on every GPU that
decision leaves idle, with the remaining steps split by throughput; never behind plain Hadar
(each job, or with the look-ahead the TTD and average JCT).

Each round (all copies restart from the job's consolidated parameters, so nothing is pinned):

1. **Hadar's decision** — a replay of plain Hadar on its own state (``hadare/shadow.py``: its
   jobs' progress, placements and policy state as if HadarE had never forked) decides the round
   with every Hadar feature (guards, type matching, fairness bound, endgame, presets). Every job
   HadarE still has runs where that decision runs it (its primary copy, multi-node where Hadar's
   gang spans nodes); GPUs Hadar gives to jobs HadarE already finished are idle.
2. **Forked copies** — while a node has room for a job that is not on it yet and has copies
   left (``copies`` per job, default one per node), the job that would otherwise finish last
   (largest remaining steps / planned rate) gets a copy on its fastest such node, if the copy
   makes it progress more this round than without it. A job whose width and batch Hadar adapts
   (Pollux's elastic jobs) grows synchronously on one GPU type instead; it is forked last, onto
   the idle GPUs of the types it does not run on, at the batch of the largest goodput there.
3. **Step split** — a job's remaining steps are divided among its copies in proportion to their
   throughputs; a job that can finish this round keeps only its fastest copies that suffice,
   and the freed nodes go back to step 2.
4. **Refills** — the GPUs a job finishing this round leaves before the round ends go to a copy
   of a job that does not finish (the one that would finish last first), which starts there
   when the finishing job's run stops (``Assignment.after``; knob ``refill``).

**Never behind.** A job's copies are kept only if, played with the simulator's own arithmetic
(goodput accounting of forks, restart and aggregation overheads), the job stays at least as far
along as in plain Hadar's replay at every moment of the round, and a job whose copies differ
from the replay's placement ends the round ahead by at least what a restart next round can
cost it. A job that fails keeps only its primary copy. In the
simulator with fixed-length rounds, every job then finishes no later than under plain Hadar
(without the look-ahead).

**Look-ahead.** In a round with at most ``lookahead_jobs`` jobs, one of which may be forked,
on a cluster of at most ``lookahead_nodes`` nodes,
the plans the never-behind rule refused (the same base decisions, forked without it) are played
to the end of the run: this round as it will run (refills included), then HadarE without
look-ahead (a rollout, no new arrivals). One is taken if its rollout finishes the jobs sooner
than the never-behind plan's (last finish, then the sum of finishes) and no later than plain
Hadar's own run on either (the candidates include the base decisions forked by comparative
advantage, ``hadare/fork_lp.py``, and the whole cluster so forked, with no base decision);
plain Hadar from where it leaves the jobs then *guides* the never-behind rule. The never-behind
plan's rollout is exact in the simulator while no job arrives later, so the projected last
finish and sum only go down round to round: TTD and average JCT stay at most Hadar's, though a
job may finish later (a rollout cannot see later arrivals, which may then find the cluster less
ready than Hadar leaves it). Nor can it see nodes leave: where nodes come and go
(``RoundContext.nodes_may_change``, a node stream) HadarE does not look ahead, and the
never-behind rule alone holds each job to Hadar's replay (on random node streams of the
physical clusters the look-ahead left HadarE behind Hadar on 2 of 24 cells, the rule alone on
none, with the same TTD on average: ``benchmarks/hadare_churn.py``).

Copy ``i`` of a job always runs on node ``i - 1`` of the cluster file (stable copy ids for the
Job Tracker: ``job_id * max_job_count + i``; a multi-node copy takes its first node's id). A copy
pays the checkpoint-restart penalty unless it continues alone on the node where the job alone
ran last round; every round with more than one copy pays ``aggregation_overhead_s`` (parameter
averaging and distribution, a knob).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from estimators.throughput import RunRate
from hadar.core.cluster import Cluster
from hadar.core.defaults import SIMULATED
from hadar.core.jobs import Placement
from hadar.policy import (
    REFILL_MIN_S,
    Assignment,
    LineStyle,
    Policy,
    PolicyInfo,
    RoundContext,
    RoundPlan,
    register_policy,
)
from hadar.round_progress import JobRound, job_restart_s, play_job_round
from hadar.scheduler import HadarConfig, HadarPolicy
from hadar.scheduler.elastic import adapts, best_batch
from hadar.valuation import JobValuation, value_jobs
from hadare.fork_lp import ForkDemand, fork_preferences
from hadare.shadow import HadarReplay, Projection, ReplayRound, share_configurations
from hadare.step_split import CopySlot, finishing_subset, split_steps
from tracker.ids import DEFAULT_MAX_JOB_COUNT


@dataclass(frozen=True)
class HadarEConfig:
    copies: int | None = None
    """Copies per job; None = one per node of the cluster."""
    aggregation_overhead_s: float = SIMULATED.aggregation_overhead_s
    """Knob: seconds of each round every copy of a forked job spends on averaging (see
    :class:`hadar.core.defaults.DriverDefaults`); ``hadar run`` passes its own figure."""
    max_job_count: int = DEFAULT_MAX_JOB_COUNT
    lookahead_jobs: int = 16
    """Look ahead (module docstring) in rounds with at most this many jobs; 0 = never."""
    lookahead_nodes: int = 128
    """Look ahead on clusters of at most this many nodes; 0 = never. It gains up to 4 % of the
    TTD at 80 nodes, up to 2 % at 128 and under 0.5 % from 160 on, at 1-2 CPU s per decision
    there, and a rollout's round costs more than the nodes (docs/results.md, "HadarE on large
    clusters")."""
    lookahead_rounds: int = 12
    """A look-ahead that does not see plain Hadar finish every job within this many rounds
    keeps the round's never-behind plan."""
    lookahead_budget: int = 30
    """Rounds of HadarE all of a round's rollouts may play together (the never-behind plan's
    first, then the candidates in order until it is spent)."""
    fork_adapting: bool = True
    """Fork jobs whose width and batch Hadar adapts (Pollux's elastic jobs) onto GPU types
    Hadar's decision leaves idle, where the job does not already run (``_fork_adapting``)."""
    refill: bool = True
    """Give the GPUs of a job that finishes mid-round to a copy of another job for the rest of
    the round (step 4, module docstring)."""
    hadar: HadarConfig = HadarConfig()
    """The plain Hadar whose decision HadarE forks onto (``--policy-opt hadare:KNOB=...``)."""

    def __post_init__(self) -> None:
        if self.copies is not None and self.copies < 1:
            raise ValueError(f"copies must be >= 1 (got {self.copies})")
        if not self.aggregation_overhead_s >= 0:  # NaN too
            raise ValueError(
                f"aggregation_overhead_s must be >= 0 (got {self.aggregation_overhead_s:g})"
            )
        if self.max_job_count < 1:
            raise ValueError(f"max_job_count must be >= 1 (got {self.max_job_count})")
        for knob in ("lookahead_jobs", "lookahead_nodes", "lookahead_rounds", "lookahead_budget"):
            if getattr(self, knob) < 0:
                raise ValueError(f"{knob} must be >= 0 (got {getattr(self, knob)})")

    @classmethod
    def preset(cls, name: str) -> HadarEConfig:
        """HadarE over a named Hadar configuration (``default`` or ``legacy``)."""
        return cls(hadar=HadarConfig.preset(name))


@register_policy
class HadarEPolicy(Policy):
    """Hadar with job forking (HadarE)."""

    name = "hadare"
    info = PolicyInfo(
        title="HadarE",
        colour="tab:purple",
        line=LineStyle("--", "s", 1.5),  # on top of Hadar's wide solid line
        forking=True,
        defaults=frozenset({"compare-elastic", "load-sweep"}),
        rank=20,
    )
    config_class = HadarEConfig

    def __init__(self, config: HadarEConfig | None = None, **knobs: Any) -> None:
        self.config = config or HadarEConfig(**knobs)
        self._refills: dict[tuple[int, str], tuple[int, float]] = {}
        """This decision's refills: (job, node) -> (the job it follows there, when that stops)."""
        self._batches: dict[int, int | None] = {}
        """The total batch of each job in the plan being forked onto (this decision's scratch)."""
        self._planned: dict[int, Hashable] = {}
        """Each job's placement in that plan (:func:`_canonical`), where its batch applies."""
        self._adapting: dict[int, bool] = {}
        """This decision's :meth:`_adapts` answers by job."""
        self._copy_batches: dict[tuple[int, Hashable], int | None] = {}
        """This decision's batches of adapting jobs' copies off the plan (:meth:`copy_batch`)."""
        self._copy_batch_answers: dict[tuple[int, Hashable], int | None] = {}
        """:meth:`copy_batch`'s answers for the plan followed now (emptied by :meth:`_follow`)."""
        self._rates: dict[Hashable, float] = {}
        """This decision's rates of a job's copy by placement (:meth:`copy_rate`)."""
        self._keys: dict[int, tuple[Placement, Hashable]] = {}
        """This decision's placements' memo keys by identity (:meth:`placement_key`); each
        entry holds its placement, so no id is reused while the decision runs."""
        self._cells: dict[tuple[str, str, int], Placement] = {}
        """This decision's one-cell placements (:meth:`cell_placement`)."""
        self._ran_in: Mapping[tuple[int, int], Placement] | None = None
        self._ran: dict[int, frozenset[Hashable]] = {}
        """The placements each job ran in ``_ran_in`` (a context's ``current``), canonically
        (:meth:`moved`)."""
        self._moves: dict[tuple[int, int], tuple[Placement, bool]] = {}
        """:meth:`moved`'s answers for ``_ran_in`` by job and placement identity."""
        self._projected: float | None = None
        """This decision's look-ahead: the run's last finish its rollout of the chosen plan
        projects (seconds; None without a look-ahead)."""
        self.replay = HadarReplay(self.config.hadar)
        """Plain Hadar's own run: what HadarE must never trail."""
        self.guide: HadarReplay | None = None
        """Once a look-ahead chose a plan: plain Hadar from where that plan left HadarE's jobs,
        which the never-behind rule then follows instead of ``replay``."""
        self.finished: dict[int, float] = {}
        """When each job HadarE finished did, as its last round played (seconds)."""
        self._own = HadarPolicy(replace(self.config.hadar, single_node=True, endgame=False))
        share_configurations(self._own, self.replay.hadar)
        self.in_rollout = False
        """Whether this HadarE plays a look-ahead's rollout (its replay shares the deciding
        HadarE's remembered decisions, which it leaves on)."""

    def state(self) -> dict[str, Any]:
        """Plain Hadar's replay (its jobs, placements and policy state), the guide a look-ahead
        chose, the finished jobs' finishes and the state of the Hadar deciding over HadarE's
        own jobs; empty before the first round."""
        if not self.replay.jobs:
            return {}
        out: dict[str, Any] = {"replay": self.replay.state(), "own": self._own.state()}
        if self.guide is not None:
            out["guide"] = self.guide.state()
        if self.finished:
            out["finished"] = [[j, t] for j, t in sorted(self.finished.items())]
        return out

    def restore(self, state: Mapping[str, Any]) -> None:
        keys = {"replay", "own", "guide", "finished"}
        if set(state) - keys:
            raise ValueError(
                f"policy {self.name} keeps no state other than {', '.join(sorted(keys))}, "
                f"got {sorted(state)}"
            )
        self.replay = HadarReplay(self.config.hadar)
        if "replay" in state:
            self.replay.restore(state["replay"])
        self.guide = None
        if "guide" in state:
            self.guide = HadarReplay(self.config.hadar)
            self.guide.restore(state["guide"])
        self.finished = {int(j): float(t) for j, t in state.get("finished", [])}
        self._own = HadarPolicy(replace(self.config.hadar, single_node=True, endgame=False))
        if "own" in state:
            self._own.restore(state["own"])
        for replay in (self.replay, self.guide):
            if replay is not None:
                share_configurations(self._own, replay.hadar)

    def decide(self, ctx: RoundContext) -> RoundPlan:
        self._refills = {}  # last round's refills are not this round's
        self._rates = {}  # a learning model's rates may have changed since the last decision
        self._adapting, self._copy_batches, self._copy_batch_answers = {}, {}, {}
        self._keys, self._ran_in, self._cells = {}, None, {}
        self._projected = None
        # plain Hadar's decisions are remembered for the look-ahead's rollouts, which replay them;
        # in a round that cannot look ahead, remembering them (a key of the whole state) is waste
        if not self.in_rollout:  # a rollout's decisions are the look-ahead's: it remembers them
            looks_ahead = self._may_look_ahead(ctx)
            for replay_ in (self.replay, self.guide):
                if replay_ is not None:
                    replay_.decisions.enabled = looks_ahead
        if self.replay.out_of_step(ctx):
            # nodes came and went: the replay would play rounds that never ran; Hadar from here
            self.replay.resync(ctx, _primary_copies(ctx))
            self.guide = None
        hadar = self.replay.step(ctx, followed=self.guide is None)
        replay = hadar if self.guide is None else self.guide.step(ctx)
        by_id = {v.status.job_id: v for v in value_jobs(ctx, ctx.jobs)}
        check = _Check(ctx, replay, by_id, self)
        primary = {(j, 0): p for j, p in _primary_copies(ctx).items()}
        own = self._own.decide(replace(ctx, current=primary))
        plans = {"own": own, "replay": replay.plan, "fluid": RoundPlan()}
        base = "own"
        copies, forked = self._fork_onto(own, ctx, by_id, check)
        if not all(check.keeps_up(j, c) for j, c in copies.items()) or any(
            j not in copies and not check.keeps_up(j, {}) for j in by_id
        ):
            base = "replay"
            copies, forked = self._fork_onto(replay.plan, ctx, by_id, check)
        ahead = self._look_ahead(ctx, by_id, replay, plans, _Candidate(base, copies, forked), check)
        if ahead is not None:
            copies, forked = ahead.copies, ahead.forked
        self._follow(plans[base if ahead is None else ahead.base])
        copies = self._refilled(ctx, copies, by_id, check)
        assignments = [
            a
            for job_id in sorted(copies)
            for a in self.job_assignments(job_id, copies[job_id], ctx)
        ]
        for job_id, per_node in copies.items() if self.config.lookahead_jobs else ():
            # the look-ahead's bound counts the jobs HadarE finished at their finish
            outcome = check.play(job_id, per_node)
            if outcome is not None and outcome.finish_at is not None:
                self.finished[job_id] = ctx.now + outcome.finish_at
        info = dict(
            hadar.plan.info,
            forked_copies=forked,
            copies=len(assignments),
            base=base if ahead is None else f"{ahead.base}+ahead",
        )
        if self._projected is not None:
            info["projected_ttd_s"] = self._projected
        return RoundPlan(tuple(assignments), info)

    def _refilled(
        self,
        ctx: RoundContext,
        copies: Mapping[int, Mapping[str, Placement]],
        by_id: Mapping[int, JobValuation],
        check: _Check,
    ) -> dict[int, dict[str, Placement]]:
        """``copies`` with this round's refills (:meth:`_refill`, where configured), recorded in
        ``_refills`` afresh."""
        out = {j: dict(c) for j, c in copies.items()}
        self._refills = {}
        if self.config.refill:
            self._refill(ctx, out, by_id, check)
        return out

    def _refill(
        self,
        ctx: RoundContext,
        copies: dict[int, dict[str, Placement]],
        by_id: Mapping[int, JobValuation],
        check: _Check,
    ) -> None:
        """Step 4 (module docstring): the GPUs a job finishing this round leaves early go to a
        copy of a job that does not finish, the one that would finish last first, where the
        usual checks accept it. Records them in ``_refills``; mutates ``copies``."""
        cluster = ctx.cluster
        n_copies = self.config.copies or len(cluster.nodes)
        adapting = {j for j, v in by_id.items() if self._adapts(v, ctx)}  # never refilled
        freed: list[tuple[float, int, int, str, Placement]] = []
        finishing: set[int] = set()
        for job_id in sorted(copies):
            outcome = check.play(job_id, copies[job_id])
            if outcome is None or outcome.finish_at is None:
                continue
            finishing.add(job_id)
            for a, stop in zip(outcome.assignments, outcome.stops(), strict=True):
                if len(a.nodes) == 1 and stop < ctx.round_s - REFILL_MIN_S:
                    node = a.nodes[0]
                    freed.append((stop, cluster.node_index[node], job_id, node, a.placement))
        by_width: dict[int, list[tuple[int, JobValuation]]] = {}  # in by_id's order
        for j, v in by_id.items():
            if j not in adapting:
                by_width.setdefault(v.status.job.num_gpus, []).append((j, v))
        planned: dict[int, float] = {}  # each job's planned finish while its copies stay
        may_fork: dict[int, bool] = {}  # likewise, whether it may have one more copy
        runs_on: dict[Hashable, bool] = {}  # (rate class, placement): whether it can run there
        for stop, _, before, node, placement in sorted(freed):  # earliest first, node order
            width = sum(placement[node].values())
            key = self.placement_key(placement)
            order = []
            for job_id, v in by_width.get(width, []):
                job = v.status.job
                if job_id in finishing:
                    continue
                have = copies.get(job_id, {})
                if node in have:
                    continue
                may = may_fork.get(job_id)
                if may is None:
                    may = may_fork[job_id] = _may_fork(have, n_copies)
                if not may:
                    continue
                on = (ctx.throughput.rate_class(job), key)
                can = runs_on.get(on)
                if can is None:
                    can = runs_on[on] = ctx.throughput.rate(job, placement, cluster) > 0
                if not can:
                    continue
                finish = planned.get(job_id)
                if finish is None:
                    finish = planned[job_id] = _planned_finish(v, have, ctx, self)
                order.append((-finish, job_id))
            for _, job_id in sorted(order):
                have = copies.get(job_id, {})
                grown = {**have, node: placement}
                self._refills[(job_id, node)] = (before, stop)
                if check.accepts(job_id, have, grown):
                    copies[job_id] = grown
                    planned.pop(job_id, None)
                    may_fork.pop(job_id, None)
                    outcome = check.play(job_id, grown)
                    if outcome is not None and outcome.finish_at is not None:
                        finishing.add(job_id)  # its other copies' budgets cover the rest
                    break
                del self._refills[(job_id, node)]

    def _look_ahead(
        self,
        ctx: RoundContext,
        by_id: Mapping[int, JobValuation],
        replay: ReplayRound,
        plans: Mapping[str, RoundPlan],
        kept: _Candidate,
        check: _Check,
    ) -> _Candidate | None:
        """The candidate plan after which HadarE without look-ahead finishes its jobs soonest
        (last finish, then the sum of finishes), if sooner than after ``kept`` and never later
        than plain Hadar, on either; it then guides the never-behind rule (module docstring,
        "Look-ahead"). None: keep ``kept`` and the guide."""
        cfg = self.config
        if not self._may_look_ahead(ctx):
            return None
        ids = sorted(by_id)
        hadar = self.replay.projected(ctx, sorted(self.replay.jobs), cfg.lookahead_rounds)
        if hadar is None:
            return None
        done = [t for j, t in self.finished.items() if j not in by_id]
        guide = self.replay if self.guide is None else self.guide
        loose = _Check(ctx, replay, by_id, self, never_behind=False)
        budget = [cfg.lookahead_budget]

        def roll(cand: _Candidate) -> tuple[Projection, HadarReplay] | None:
            """Where ``cand``, then HadarE without look-ahead, leads the jobs; the twin. The
            round is played as :meth:`decide` would play it, refills included."""
            self._follow(plans[cand.base])
            copies = self._refilled(ctx, cand.copies, by_id, check)
            played = {
                j: outcome for j, c in copies.items() if (outcome := loose.play(j, c)) is not None
            }
            self._refills = {}  # they belong to this candidate's round only
            runs = {
                (j, ctx.cluster.node_index[node] + 1): p
                for j, c in copies.items()
                for node, p in c.items()
            }
            twin = guide.rebased(ctx, played, _primary_copies(replace(ctx, current=runs)))
            probe = HadarEPolicy(replace(cfg, lookahead_jobs=0))
            probe.in_rollout = True
            probe.restore(
                {"replay": (guide if cand is kept else twin).state(), "own": self._own.state()}
            )
            probe.replay.decisions = guide.decisions
            cap = min(cfg.lookahead_rounds, budget[0])
            rolled = twin.driven_by(probe, runs).projected(ctx, ids, cap)
            budget[0] -= cap if rolled is None else rolled.rounds
            return None if rolled is None else (rolled.with_finished(done), twin)

        first = roll(kept)
        if first is None:
            return None
        target = first[0]
        self._projected = target.last_finish
        candidates: list[_Candidate] = []
        # the base decisions forked greedily and by comparative advantage, and the whole cluster
        # by comparative advantage ("fluid": no base, every cell offered as the fork LP prefers)
        for name, by_lp in (
            ("own", False),
            ("replay", False),
            ("own", True),
            ("replay", True),
            ("fluid", True),
        ):
            copies, forked = self._fork_onto(plans[name], ctx, by_id, loose, by_lp)
            candidates.append(_Candidate(name, copies, forked))
        candidates += _swaps(kept, target.last_job, by_id, ctx)
        best: tuple[Projection, _Candidate, HadarReplay] | None = None
        tried: list[dict[int, dict[str, Placement]]] = [kept.copies]
        for cand in candidates:
            if cand.copies in tried or budget[0] <= 0:
                continue
            tried.append(cand.copies)
            rolled = roll(cand)
            if rolled is None:
                continue
            seen, twin = rolled
            if not seen.sooner_than(target) or not seen.no_later_than(hadar):
                continue
            if best is None or seen.sooner_than(best[0]):
                best = (seen, cand, twin)
        if best is None:
            return None
        self.guide = best[2]
        self._projected = best[0].last_finish
        return best[1]

    def _may_look_ahead(self, ctx: RoundContext) -> bool:
        """Whether the round may look ahead: it has jobs, at most ``lookahead_jobs``, on at most
        ``lookahead_nodes`` nodes that stay (a rollout plays on the nodes up now: it cannot see
        them leave), and one job at least that does not adapt (else nothing forks: the round is
        Hadar's, whose choices are not re-judged)."""
        cfg = self.config
        jobs = ctx.jobs
        return (
            0 < len(jobs) <= cfg.lookahead_jobs
            and not ctx.nodes_may_change
            and len(ctx.cluster.nodes) <= cfg.lookahead_nodes
            and not all(self._adapts_id(s.job_id, ctx) for s in jobs)
        )

    def _fork_onto(
        self,
        plan: RoundPlan,
        ctx: RoundContext,
        by_id: Mapping[int, JobValuation],
        check: _Check,
        by_lp: bool = False,
    ) -> tuple[dict[int, dict[str, Placement]], int]:
        """``plan``'s placements of HadarE's jobs, plus the copies forked onto what it leaves idle.
        Each job runs at the batch ``plan`` gives it (an elastic job's, chosen by Hadar)."""
        self._follow(plan)
        cluster = ctx.cluster
        n_copies = self.config.copies or len(cluster.nodes)
        copies: dict[int, dict[str, Placement]] = {}
        free = cluster.capacity.copy()
        for a in plan.assignments:
            if a.job_id in by_id:  # HadarE may have finished it already
                copies.setdefault(a.job_id, {})[_first_node(a.placement, cluster)] = a.placement
                free -= cluster.placement_matrix(a.placement)
        forked = 0
        finishing: set[int] = set()
        # a job whose width and batch Hadar adapts grows synchronously, at the batch that is
        # best for its GPUs, on one GPU type: it is forked last, onto the other types' idle GPUs
        forkable = {j: v for j, v in by_id.items() if not self._adapts(v, ctx)}
        for _ in range(4):
            others = {j: v for j, v in forkable.items() if j not in finishing}
            if by_lp:
                forked += _fork_by_lp(copies, others, free, ctx, n_copies, check)
            forked += _fork(copies, others, free, ctx, n_copies, check)
            if not _trim(copies, by_id, free, ctx, self._seconds(ctx, copies), finishing, check):
                break
        # nodes nobody else can use speed up the jobs finishing this round
        forked += _fork(
            copies,
            {j: forkable[j] for j in finishing if j in forkable},
            free,
            ctx,
            n_copies,
            check,
            played=True,
        )
        if self.config.fork_adapting:
            adapting = {j: v for j, v in by_id.items() if j not in forkable}
            forked += _fork_adapting(copies, adapting, free, ctx, n_copies, check)
        return copies, forked

    def cell_placement(self, node: str, gpu_type: str, gpus: int) -> Placement:
        """``gpus`` GPUs of ``gpu_type`` on ``node``, one placement object per cell and count
        within the decision (so the memos keyed by a placement's identity find it again)."""
        key = (node, gpu_type, gpus)
        hit = self._cells.get(key)
        if hit is None:
            hit = self._cells[key] = {node: {gpu_type: gpus}}
        return hit

    def _adapts(self, v: JobValuation, ctx: RoundContext) -> bool:
        """Whether Hadar chooses the job's width and batch each round. Such a job grows
        synchronously on one GPU type; it is forked only onto GPUs of the types Hadar's decision
        leaves idle (:func:`_fork_adapting`), and never given a refill."""
        return self._adapts_id(v.status.job_id, ctx)

    def _adapts_id(self, job_id: int, ctx: RoundContext) -> bool:
        """:meth:`_adapts` by job id, remembered within the decision."""
        hit = self._adapting.get(job_id)
        if hit is None:
            hit = self._adapting[job_id] = self.config.hadar.adapt_elastic and adapts(
                ctx.status(job_id).job, ctx.throughput
            )
        return hit

    def _follow(self, plan: RoundPlan) -> None:
        """Fork onto ``plan``: each job's batch there, and the placement it applies to."""
        self._batches = _batches(plan)
        self._planned = {a.job_id: _canonical(a.placement) for a in plan.assignments if a.copy == 0}
        self._copy_batch_answers = {}

    def copy_batch(self, job_id: int, placement: Placement, ctx: RoundContext) -> int | None:
        """The total batch a copy of the job on ``placement`` runs at: the plan's, except for a
        copy of an adapting job elsewhere than the plan runs it, which runs at the batch of the
        largest goodput on its own GPUs (as Hadar sizes an adapting job's batch)."""
        planned = self._batches.get(job_id)
        if not self._adapts_id(job_id, ctx):
            return planned
        key = (job_id, self.placement_key(placement))
        answers = self._copy_batch_answers
        if key in answers:
            return answers[key]
        if job_id in self._planned and _canonical(placement) == self._planned[job_id]:
            answers[key] = planned
            return planned
        if key not in self._copy_batches:
            memo = self._own.configurations  # Hadar's answers, shared (share_configurations)
            memo.for_round(ctx)
            self._copy_batches[key] = best_batch(
                ctx.status(job_id),
                placement,
                ctx.cluster,
                ctx.throughput,
                memo.batches_for_round(ctx),
            )
        answers[key] = self._copy_batches[key]
        return answers[key]

    def _seconds(
        self, ctx: RoundContext, copies: Mapping[int, Mapping[str, Placement]]
    ) -> dict[int, float]:
        """Usable training seconds of a copy of each job this round (worst case: with penalty)."""
        return {
            j: max(0.0, ctx.round_s - self._overhead(ctx, j, len(c), moved=True))
            for j, c in copies.items()
        }

    def _overhead(self, ctx: RoundContext, job_id: int, n_copies: int, moved: bool) -> float:
        """Seconds a copy does not train: the restart penalty when the node did not run this job
        last round, and the aggregation overhead whenever the job is forked: one averaging (save,
        average, reload) per forked round, counted in that round. A job alone on the node it ran
        on last round continues without either, after a forked round too: that round's
        averaging was counted in it."""
        status = ctx.status(job_id)
        started = status.done_steps > 0
        restart = job_restart_s(status.job, ctx.restart_penalty_s) if (moved and started) else 0.0
        if n_copies > 1:
            return restart + self.config.aggregation_overhead_s
        return restart

    def copy_rate(self, job_id: int, placement: Placement, ctx: RoundContext) -> float:
        """The job's rate on ``placement`` (``ThroughputModel.rate``; an adapting job's, at the
        copy's batch and the job's progress now), remembered within the decision: a round's
        forking asks for the same copies' rates many times."""
        adapting = self._adapts_id(job_id, ctx)
        batch = self.copy_batch(job_id, placement, ctx) if adapting else None
        key = (id(ctx.cluster), job_id, self.placement_key(placement), batch)
        rate = self._rates.get(key)
        if rate is None:
            st = ctx.status(job_id)
            if adapting:
                rate = ctx.throughput.run_rate(
                    st.job, placement, ctx.cluster, st.done_steps, batch
                ).rate
            else:
                rate = ctx.throughput.rate(st.job, placement, ctx.cluster)
            self._rates[key] = rate
        return rate

    def placement_key(self, placement: Placement) -> Hashable:
        """:func:`_placement_key` of ``placement``, remembered by its identity within the
        decision (a round's forking keys the same copies' placements many times; a Placement
        is never changed once built)."""
        hit = self._keys.get(id(placement))
        if hit is None or hit[0] is not placement:
            hit = self._keys[id(placement)] = (placement, _placement_key(placement))
        return hit[1]

    def moved(self, job_id: int, placement: Placement, ctx: RoundContext) -> bool:
        """Whether ``placement`` is none of the job's placements of last round (whatever their
        copies' ids: a copy's id is its node's index in the cluster present now, which shifts
        when other nodes join or leave). Compared as the placements' equality would."""
        if self._ran_in is not ctx.current:  # every job's, in one pass over last round's runs
            by_job: dict[int, set[Hashable]] = {}
            for (j, _), p in ctx.current.items():
                by_job.setdefault(j, set()).add(_canonical(p))
            self._ran_in, self._moves = ctx.current, {}
            self._ran = {j: frozenset(c) for j, c in by_job.items()}
        hit = self._moves.get((job_id, id(placement)))
        if hit is not None and hit[0] is placement:
            return hit[1]
        moved = _canonical(placement) not in self._ran.get(job_id, frozenset())
        self._moves[(job_id, id(placement))] = (placement, moved)
        return moved

    def job_assignments(
        self, job_id: int, per_node: Mapping[str, Placement], ctx: RoundContext
    ) -> list[Assignment]:
        """The runs of ``job_id``'s copies ``{first node: placement}``: overheads, step budgets."""
        st = ctx.status(job_id)
        node_index = ctx.cluster.node_index
        overheads: dict[bool, float] = {}  # by whether the copy moved: one of two figures
        slots = []
        for node, placement in sorted(per_node.items(), key=lambda item: node_index[item[0]]):
            copy = node_index[node] + 1
            refill = self._refills.get((job_id, node))
            # a refill loads the job where another job's process ran: always a restart
            moved = refill is not None or self.moved(job_id, placement, ctx)
            overhead = overheads.get(moved)
            if overhead is None:
                overhead = overheads[moved] = self._overhead(ctx, job_id, len(per_node), moved)
            rate = self.copy_rate(job_id, placement, ctx)
            start = 0.0 if refill is None else refill[1]
            slots.append(
                (copy, placement, overhead, CopySlot(node, rate, ctx.round_s - start - overhead))
            )
        budgets = split_steps([s[3] for s in slots], st.remaining_steps)
        return [
            Assignment(
                job_id,
                placement,
                copy=copy,
                step_budget=budgets[slot.node],
                overhead_s=overhead,
                batch_size=self.copy_batch(job_id, placement, ctx),
                after=self._refills.get((job_id, slot.node), (None, 0.0))[0],
                restart=False,
            )
            for copy, placement, overhead, slot in slots
        ]


@dataclass(frozen=True)
class _Candidate:
    """A round's plan for HadarE's jobs: the base decision it forks onto (``own`` or
    ``replay``), each job's copies ``{first node: placement}`` and how many were forked."""

    base: str
    copies: dict[int, dict[str, Placement]]
    forked: int


def _swaps(
    kept: _Candidate, last: int | None, vals: Mapping[int, JobValuation], ctx: RoundContext
) -> list[_Candidate]:
    """``kept`` with the job that finishes last (``last``) given the placement of another
    unforked job of its width where it runs faster than on its own (one candidate per such
    job; the two swap, or the other waits if ``last`` was not running)."""
    if last is None or last not in vals:
        return []
    job = vals[last].status.job
    mine = kept.copies.get(last, {})
    if len(mine) > 1:
        return []
    own_rate = sum(ctx.throughput.rate(job, p, ctx.cluster) for p in mine.values())
    out = []
    for other, theirs in sorted(kept.copies.items()):
        if other == last or len(theirs) != 1:
            continue
        node, placement = next(iter(theirs.items()))
        width = sum(c for per in placement.values() for c in per.values())
        if width != job.num_gpus or ctx.throughput.rate(job, placement, ctx.cluster) <= own_rate:
            continue
        copies = {j: dict(c) for j, c in kept.copies.items() if j != other}
        copies[last] = {node: placement}
        if mine:
            copies[other] = dict(mine)
        out.append(_Candidate(kept.base, copies, kept.forked))
    return out


def _batches(plan: RoundPlan) -> dict[int, int | None]:
    """The total batch ``plan`` gives each job (its first copy's)."""
    return {a.job_id: a.batch_size for a in plan.assignments if a.copy == 0}


def _first_node(placement: Placement, cluster: Cluster) -> str:
    """The placement's node that comes first in the cluster (its copy's id), never by name."""
    return min(placement, key=cluster.node_index.__getitem__)


class _Check:
    """Whether a job's copies keep it at least as far along as plain Hadar's replay has it
    (module docstring, "Never behind"), and whether they make it progress more than without
    the newest copy. Plays the copies with the simulator's arithmetic, under the driver's
    accounting of forks (``RoundContext.fork_progress``)."""

    def __init__(
        self,
        ctx: RoundContext,
        replay: ReplayRound,
        vals: Mapping[int, JobValuation],
        policy: HadarEPolicy,
        never_behind: bool = True,
    ) -> None:
        self.never_behind = never_behind
        self.ctx = ctx
        self.replay = replay
        self.vals = vals
        self.policy = policy
        self._played: dict[Hashable, JobRound] = {}
        self._run_rates: dict[Hashable, RunRate] = {}

    def play(self, job_id: int, per_node: Mapping[str, Placement]) -> JobRound | None:
        """The job's round with these copies (None: no copy). Remembered by all it reads besides
        this check's fixed context: the copies as given (given in another order, they only
        miss), the job's batch and its refills. A decision asks again for the same copies:
        before and after one more, then the after."""
        if not per_node:
            return None
        refills = self.policy._refills
        policy = self.policy
        key = (
            job_id,
            policy._batches.get(job_id),
            policy._planned.get(job_id) if policy._adapts_id(job_id, self.ctx) else None,
            tuple(
                [
                    (node, self.policy.placement_key(placement), refills.get((job_id, node)))
                    for node, placement in per_node.items()
                ]
            ),
        )
        hit = self._played.get(key)
        if hit is None:
            hit = self._played[key] = self._play(job_id, per_node)
        return hit

    def _play(self, job_id: int, per_node: Mapping[str, Placement]) -> JobRound:
        ctx = self.ctx
        st = ctx.status(job_id)
        assigns = self.policy.job_assignments(job_id, per_node, ctx)
        refills = self.policy._refills
        return play_job_round(
            st.job,
            st.remaining_steps,
            assigns,
            ctx.current,
            ctx.throughput,
            ctx.cluster,
            ctx.round_s,
            ctx.restart_penalty_s,
            ctx.fork_progress,
            (
                [refills.get((job_id, a.nodes[0]), (None, 0.0))[1] for a in assigns]
                if refills
                else None  # every run's GPUs are free from the round's start
            ),
            [self._run_rate(job_id, a) for a in assigns],
        )

    def _run_rate(self, job_id: int, a: Assignment) -> RunRate:
        """``throughput.run_rate`` of a copy's run, remembered within the check by the job, its
        placement and batch (its progress is the check's fixed context's): a round's forking
        plays the same copies again with one more beside them."""
        key = (job_id, self.policy.placement_key(a.placement), a.batch_size)
        hit = self._run_rates.get(key)
        if hit is None:
            ctx = self.ctx
            st = ctx.status(job_id)
            done = st.job.total_steps - st.remaining_steps  # as play_job_round's done_before
            hit = self._run_rates[key] = ctx.throughput.run_rate(
                st.job, a.placement, ctx.cluster, done, a.batch_size
            )
        return hit

    def keeps_up(self, job_id: int, per_node: Mapping[str, Placement]) -> bool:
        """The job finishes no later than in the replay if the replay finishes it this round;
        otherwise it ends the round at least as far along as the replay's, ahead by the margin
        a diverged job needs (unless it finishes). Then keeping only the replay's placement next
        round is always possible and keeps the same guarantee (module docstring)."""
        if not self.never_behind:
            return True
        ctx = self.ctx
        st = ctx.status(job_id)
        job = st.job
        tolerance = 1e-9 * max(1.0, job.total_steps)
        if self.replay.done_by(job, 0.0) >= job.total_steps - tolerance:
            return True  # the replay finished it already: nothing left to keep up with
        mine = self.play(job_id, per_node)
        theirs = self.replay.played.get(job_id)
        if theirs is not None and theirs.finish_at is not None:
            return (
                mine is not None
                and mine.finish_at is not None
                and mine.finish_at <= theirs.finish_at + 1e-9
            )
        if mine is not None and mine.finish_at is not None:
            return True
        end_mine = st.done_steps + (mine.done if mine else 0.0)
        end_theirs = self.replay.done_by(job, ctx.round_s)
        if end_mine < end_theirs - tolerance:
            return False
        if not self._diverged(job_id, per_node, end_mine, end_theirs):
            return True
        return end_mine - end_theirs >= self.margin(job_id, per_node) - tolerance

    def _diverged(
        self, job_id: int, per_node: Mapping[str, Placement], end_mine: float, end_theirs: float
    ) -> bool:
        """Whether next round may cost this job more than it costs the replay's: it runs on
        other GPUs than the replay runs it (forked, moved or idle), or it started and the
        replay's did not."""
        theirs = self.replay.placement(job_id)
        same = (
            theirs is not None
            and len(per_node) == 1
            and _same_placement(next(iter(per_node.values())), theirs)
        )
        return not same or (end_mine > 0 and end_theirs <= 0)

    def margin(self, job_id: int, per_node: Mapping[str, Placement]) -> float:
        """Steps a diverged job must be ahead of the replay at the round's end: what falling back
        to the replay's placement P next round can cost it more than it costs the replay's.
        With a copy on P, nothing (that copy continues there alone); otherwise a restart, at the
        job's fastest rate."""
        theirs = self.replay.placement(job_id)
        if theirs is not None and any(_same_placement(p, theirs) for p in per_node.values()):
            return 0.0
        v = self.vals[job_id]
        fastest = max(
            float(v.request.rates_cons.max(initial=0.0)),
            float(v.request.rates_unc.max(initial=0.0)),
        )
        return job_restart_s(v.status.job, self.ctx.restart_penalty_s) * fastest

    def gains(
        self, job_id: int, before: Mapping[str, Placement], after: Mapping[str, Placement]
    ) -> bool:
        """``after`` (one more copy) makes the job progress more this round, or finish sooner."""
        old, new = self.play(job_id, before), self.play(job_id, after)
        if new is None:
            return False
        if old is None:
            return new.done > 0
        if new.finish_at is not None:
            return old.finish_at is None or new.finish_at < old.finish_at - 1e-9
        return old.finish_at is None and new.done > old.done * (1 + 1e-9)

    def accepts(
        self, job_id: int, before: Mapping[str, Placement], after: Mapping[str, Placement]
    ) -> bool:
        return self.gains(job_id, before, after) and self.keeps_up(job_id, after)

    def hold_back(self, copies: dict[int, dict[str, Placement]], free: np.ndarray) -> int:
        """Jobs whose copies fall behind the replay keep only the replay's placement (or none),
        where its GPUs are still theirs; returns how many. Mutates ``copies`` and ``free``."""
        cluster = self.ctx.cluster
        held = 0
        for job_id in sorted(copies):
            per_node = copies[job_id]
            if self.keeps_up(job_id, per_node):
                continue
            theirs = self.replay.placement(job_id)
            primary = {_first_node(theirs, cluster): theirs} if theirs is not None else {}
            if primary == per_node:
                continue  # the replay's own placement: nothing safer to fall back on
            released = free + sum(
                (cluster.placement_matrix(p) for p in per_node.values()), np.zeros_like(free)
            )
            needed = sum(
                (cluster.placement_matrix(p) for p in primary.values()), np.zeros_like(free)
            )
            if (released < needed).any():
                continue
            free[...] = released - needed
            copies[job_id] = primary
            held += 1
        for job_id in [j for j, c in copies.items() if not c]:
            del copies[job_id]
        return held


def _placement_key(placement: Placement) -> tuple[tuple[str, tuple[tuple[str, int], ...]], ...]:
    """``placement`` as a hashable value (equal keys: equal placements; equal placements
    built in another order may differ, which only costs a memo a miss)."""
    return tuple([(node, tuple(per.items())) for node, per in placement.items()])


def _canonical(placement: Placement) -> frozenset[tuple[str, frozenset[tuple[str, int]]]]:
    """``placement`` as a hashable value equal exactly where the placements are equal (``==``
    of the nested dicts, zero counts included), whatever order they were built in."""
    return frozenset((node, frozenset(per.items())) for node, per in placement.items())


def _same_placement(a: Placement, b: Placement) -> bool:
    def norm(p: Placement) -> dict[str, dict[str, int]]:
        return {
            n: {k: c for k, c in per.items() if c > 0}
            for n, per in p.items()
            if sum(per.values()) > 0
        }

    return norm(a) == norm(b)


def _fork(
    copies: dict[int, dict[str, Placement]],
    vals: Mapping[int, JobValuation],
    free: np.ndarray,
    ctx: RoundContext,
    n_copies: int,
    check: _Check,
    played: bool = False,
) -> int:
    """Step 2: add copies on nodes with room, to the job that would finish last (by remaining
    steps over planned rate, or with ``played`` by when its copies, played out, finish it: for
    the few jobs finishing this round, whose overheads decide which finishes last). Mutates."""
    cluster = ctx.cluster
    added = 0
    refused: set[int] = set()
    # per job while its copies stay: its projected finish, and its fastest free cell, which
    # stays the first fastest while it has room (``free`` only shrinks here)
    finishes: dict[int, float] = {}
    cells: dict[int, tuple[int, int] | None] = {}
    while True:
        best: tuple[float, int, int, int] | None = None  # (-projected finish, job, node, type)
        for job_id, v in vals.items():
            if job_id in refused:
                continue
            have = copies.get(job_id, {})
            if not _may_fork(have, n_copies):
                continue
            finish = finishes.get(job_id)
            if finish is None:
                if played:
                    outcome = check.play(job_id, have)
                    finish = (
                        np.inf
                        if outcome is None or outcome.finish_at is None
                        else outcome.finish_at
                    )
                else:
                    finish = _planned_finish(v, have, ctx, check.policy)
                finishes[job_id] = finish
            if job_id in cells:
                node_choice = cells[job_id]
                if node_choice is not None and free[node_choice] < v.status.job.num_gpus:
                    node_choice = cells[job_id] = _fastest_free_node(v, free, have, cluster)
            else:
                node_choice = cells[job_id] = _fastest_free_node(v, free, have, cluster)
            if node_choice is None:
                continue
            key = (-finish, job_id)
            if best is None or key < (best[0], best[1]):
                best = (-finish, job_id, *node_choice)
        if best is None:
            return added
        _, job_id, h, k = best
        have = copies.get(job_id, {})
        grown = _grow(job_id, vals[job_id], have, free, ctx, n_copies, check, (h, k))
        if grown is None:
            refused.add(job_id)
            continue
        for node, placement in grown.items():
            if node not in have:
                free -= cluster.placement_matrix(placement)
                added += 1
        copies[job_id] = grown
        finishes.pop(job_id, None)
        cells.pop(job_id, None)


def _fork_by_lp(
    copies: dict[int, dict[str, Placement]],
    vals: Mapping[int, JobValuation],
    free: np.ndarray,
    ctx: RoundContext,
    n_copies: int,
    check: _Check,
) -> int:
    """Step 2 by comparative advantage: offer each idle cell to the jobs the fluid fork LP
    (``hadare/fork_lp.py``) gives a share of it, largest share first; a copy is added where it
    fits and the usual checks accept it. Returns how many. Mutates."""
    cluster = ctx.cluster
    demands = []
    for job_id, v in sorted(vals.items()):
        have = copies.get(job_id, {})
        if not _may_fork(have, n_copies):
            continue
        job = v.status.job
        rates = np.array(v.request.rates_cons, dtype=float)
        for name in have:
            rates[cluster.node_index[name], :] = 0.0
        base = sum(ctx.throughput.rate(job, p, cluster) for p in have.values())
        demands.append(ForkDemand(job_id, v.status.remaining_steps, base, job.num_gpus, rates))
    added = 0
    for job_id, h, k in fork_preferences(demands, free):
        have = copies.get(job_id, {})
        gpus = vals[job_id].status.job.num_gpus
        node = cluster.node_names[h]
        if node in have or len(have) >= n_copies or free[h, k] < gpus:
            continue
        alloc = np.zeros_like(free)
        alloc[h, k] = gpus
        placement = cluster.placement_from_matrix(alloc)
        grown = {**have, node: placement}
        if not check.accepts(job_id, have, grown):
            continue
        free -= alloc
        copies[job_id] = grown
        added += 1
    return added


def _fork_adapting(
    copies: dict[int, dict[str, Placement]],
    vals: Mapping[int, JobValuation],
    free: np.ndarray,
    ctx: RoundContext,
    n_copies: int,
    check: _Check,
) -> int:
    """Step 2 for the jobs whose width and batch Hadar adapts: such a job grows synchronously
    on one GPU type (over several nodes where its gang spans them), so a copy goes only where
    that cannot reach: onto the idle GPUs of one type of a node, of a type the job does not run
    on this round, at the batch of the largest goodput there. The job that would finish last
    first takes the fastest such cells, as many as gain it most this round (one copy alone
    rarely pays its restart and every copy's averaging), where the usual checks accept them
    (under the goodput bound its copies progress at most as one job at their combined batch).
    Returns how many. Mutates."""
    cluster = ctx.cluster
    policy = check.policy
    added = 0
    refused: set[int] = set()
    finish: dict[int, float] = {}  # each job's planned finish while its copies stay
    while True:
        order = []
        for job_id, v in vals.items():
            have = copies.get(job_id, {})
            if job_id not in refused and have and len(have) < n_copies:
                if job_id not in finish:
                    finish[job_id] = _planned_finish(v, have, ctx, policy)
                order.append((-finish[job_id], job_id))
        if not order:
            return added
        _, job_id = min(order)
        have = copies[job_id]
        types = {k for p in have.values() for per in p.values() for k, c in per.items() if c}
        used = {n for p in have.values() for n in p}  # a gang's every node, not only its first
        cells = []
        for h, k in zip(*np.nonzero(free > 0), strict=True):  # in node order, then type
            node, gpu_type = cluster.node_names[h], cluster.gpu_types[k]
            if node in used or gpu_type in types:
                continue
            placement = policy.cell_placement(node, gpu_type, int(free[h, k]))
            rate = policy.copy_rate(job_id, placement, ctx)
            if rate > 0:
                cells.append((-rate, int(h), int(k), node, placement))
        fastest = sorted(cells, key=lambda c: c[:3])[: n_copies - len(have)]
        best = _most_gaining(job_id, have, [(c[3], c[4]) for c in fastest], check)
        if best is None:
            refused.add(job_id)
            continue
        for node, copy in best.items():
            if node not in have:
                free -= cluster.placement_matrix(copy)
                added += 1
        copies[job_id] = best
        finish.pop(job_id, None)


def _may_fork(have: Mapping[str, Placement], n_copies: int) -> bool:
    """Whether a job with copies ``have`` may get one more: below the copy limit, no gang over
    several nodes."""
    return len(have) < n_copies and all(len(p) <= 1 for p in have.values())


def _planned_finish(
    v: JobValuation, have: Mapping[str, Placement], ctx: RoundContext, policy: HadarEPolicy
) -> float:
    """Seconds the job's remaining steps take at the summed rate of its copies ``have``."""
    planned = sum(policy.copy_rate(v.status.job_id, p, ctx) for p in have.values())
    return v.status.remaining_steps / planned if planned > 0 else np.inf


def _grow(
    job_id: int,
    v: JobValuation,
    have: Mapping[str, Placement],
    free: np.ndarray,
    ctx: RoundContext,
    n_copies: int,
    check: _Check,
    first: tuple[int, int],
) -> dict[str, Placement] | None:
    """``have`` plus one copy on ``first``, or, when one more copy does not pay (under the
    goodput bound the first extra copies of a job early in training may cost more aggregation
    than they add), the fastest free cells up to the count that pays most; None if none pays.
    A job already forked pays that aggregation already: it grows one copy at a time, and None
    when the next does not pay (trying every count there made a round cost about nodes^3)."""
    cluster = ctx.cluster
    gpus = v.status.job.num_gpus

    def copy_on(h: int, k: int) -> Placement:
        alloc = np.zeros_like(free)
        alloc[h, k] = gpus
        return cluster.placement_from_matrix(alloc)

    one = {**have, cluster.node_names[first[0]]: copy_on(*first)}
    if check.accepts(job_id, have, one):
        return one
    if len(have) > 1:  # forked already: no overhead left to cross
        return None
    cons = v.request.rates_cons
    ok = (free >= gpus) & (cons > 0)
    for name in have:
        ok[cluster.node_index[name], :] = False
    rates = np.where(ok, cons, -1.0)
    cells = []
    for h in range(rates.shape[0]):
        if rates[h].max() > 0:
            cells.append((-float(rates[h].max()), h, int(np.argmax(rates[h]))))
    cells.sort()  # fastest first; ties in node order
    added = [
        (cluster.node_names[h], copy_on(h, k)) for _, h, k in cells[: max(0, n_copies - len(have))]
    ]
    return _most_gaining(job_id, have, added, check, fewest=2)


def _most_gaining(
    job_id: int,
    have: Mapping[str, Placement],
    cells: list[tuple[str, Placement]],
    check: _Check,
    fewest: int = 1,
) -> dict[str, Placement] | None:
    """``have`` plus the first n of ``cells`` (``{node: placement}`` in order, n >= ``fewest``)
    that the checks accept and that finish the job soonest this round, else progress it most;
    None if no such n."""
    best: dict[str, Placement] | None = None
    best_key: tuple[float, float] | None = None
    grown = dict(have)
    for n, (node, placement) in enumerate(cells, start=1):
        grown = {**grown, node: placement}
        if n < fewest or not check.accepts(job_id, have, grown):
            continue
        outcome = check.play(job_id, grown)
        if outcome is None:
            continue
        key = (-(np.inf if outcome.finish_at is None else outcome.finish_at), outcome.done)
        if best_key is None or key > best_key:
            best, best_key = dict(grown), key
    return best


def _fastest_free_node(
    v: JobValuation, free: np.ndarray, have: Mapping[str, Placement], cluster: Cluster
) -> tuple[int, int] | None:
    """(node, type) cell with W free GPUs where the job is fastest, skipping nodes it is on."""
    cons = v.request.rates_cons
    ok = (free >= v.status.job.num_gpus) & (cons > 0)
    for name in have:
        ok[cluster.node_index[name], :] = False
    if not ok.any():
        return None
    flat = int(np.argmax(np.where(ok, cons, -1.0)))  # first maximum: lowest node on ties
    h, k = divmod(flat, free.shape[1])
    return h, k


def _trim(
    copies: dict[int, dict[str, Placement]],
    vals: Mapping[int, JobValuation],
    free: np.ndarray,
    ctx: RoundContext,
    seconds: Mapping[int, float],
    finishing: set[int],
    check: _Check,
) -> bool:
    """Step 3's trimming: a job that can finish this round keeps its fastest sufficient copies
    (if they keep it up with the replay) and joins ``finishing``. Returns whether any node was
    freed. Mutates its arguments."""
    freed = False
    for job_id, per_node in copies.items():
        if job_id in finishing:
            continue
        st = vals[job_id].status
        slots = [
            CopySlot(n, ctx.throughput.rate(st.job, p, ctx.cluster), seconds[job_id])
            for n, p in sorted(per_node.items(), key=lambda np_: ctx.cluster.node_index[np_[0]])
        ]
        if sum(c.capacity for c in slots) < st.remaining_steps:
            continue
        finishing.add(job_id)
        keep = {c.node for c in finishing_subset(slots, st.remaining_steps)}
        if not check.keeps_up(job_id, {n: p for n, p in per_node.items() if n in keep}):
            continue
        for node in [n for n in per_node if n not in keep]:
            free += ctx.cluster.placement_matrix(per_node.pop(node))
            freed = True
    return freed


def _primary_copies(ctx: RoundContext) -> dict[int, Placement]:
    """Each job's fastest copy of last round, as Hadar's running placement: the job
    keeps that node, as Hadar keeps running jobs; its other copies are re-planned."""
    best: dict[int, tuple[float, Placement]] = {}
    up = set(ctx.cluster.node_names)
    for (job_id, _), placement in ctx.current.items():
        if not set(placement) <= up:  # its node left the cluster
            continue
        try:
            job = ctx.status(job_id).job
        except KeyError:
            continue
        rate = ctx.throughput.rate(job, placement, ctx.cluster)
        if job_id not in best or rate > best[job_id][0]:
            best[job_id] = (rate, placement)
    return {j: p for j, (_, p) in best.items()}
