"""Speed-ups of the default round leave its decisions unchanged.

Jobs of one class share their ``JobRequest`` object, and the round's per-type rates and best
remaining times are computed once per request object. The reference here gives every job its own
copy of its request (so nothing is shared) and must yield the same prices and the same plans."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

import hadar.scheduler as scheduler
from hadar.clusters import load_cluster
from hadar.core.jobs import JobStatus
from hadar.policy import RoundContext, RoundPlan
from hadar.scheduler import HadarPolicy
from hadar.valuation import JobValuation, value_jobs
from hadar.workloads.philly import PhillyOptions, generate
from tests.hadar.helpers import TABLE


def unshared(vals: list[JobValuation]) -> list[JobValuation]:
    """The same valuations, each with its own copy of its request."""
    return [replace(v, request=replace(v.request)) for v in vals]


def random_round(seed: int, max_jobs: int = 300) -> RoundContext:
    rng = np.random.default_rng(seed)
    jobs = generate(TABLE, PhillyOptions(num_jobs=int(rng.integers(10, max_jobs)), seed=seed))
    statuses = tuple(
        JobStatus(j, max(1, int(j.total_steps * rng.uniform(0.05, 1.0))))
        for j in sorted(jobs, key=lambda j: (j.arrival, j.job_id))
    )
    now = max(j.arrival for j in jobs)
    return RoundContext(
        now=now,
        round_index=1,
        round_s=360.0,
        cluster=load_cluster("sim-60gpu"),
        jobs=statuses,
        current={},
        throughput=TABLE,
    )


def two_rounds(ctx: RoundContext) -> tuple[RoundPlan, RoundPlan]:
    first = HadarPolicy().decide(ctx)
    # the next round, with the first round's jobs running (kept candidates, restarts)
    nxt = RoundContext(ctx.now + 360.0, 2, 360.0, ctx.cluster, ctx.jobs, first.allocation(), TABLE)
    return first, HadarPolicy().decide(nxt)


@pytest.mark.parametrize("seed", range(8))
def test_round_plans_equal_those_without_shared_requests(seed, monkeypatch):
    ctx = random_round(seed)
    shared = two_rounds(ctx)
    assert len({id(v.request) for v in value_jobs(ctx, ctx.jobs)}) < len(
        ctx.jobs
    )  # sharing happens
    monkeypatch.setattr(scheduler, "value_jobs", lambda c, jobs: unshared(value_jobs(c, jobs)))
    reference = two_rounds(ctx)
    for got, want in zip(shared, reference, strict=True):
        assert got.assignments == want.assignments
        assert got.info == want.info


def test_round_prices_and_critical_jobs_equal_those_without_shared_requests(monkeypatch):
    ctx = random_round(99)
    policy = HadarPolicy()
    vals, entries, _ = policy.round_problem(ctx, {})
    gpus = ctx.cluster.capacity.sum(axis=0)
    lp_values, solve = [], scheduler.type_prices
    monkeypatch.setattr(
        scheduler, "type_prices", lambda values, *a: lp_values.append(values) or solve(values, *a)
    )
    got = scheduler.round_type_prices(vals, entries, ctx, gpus)
    for v, e, row in zip(
        vals, entries, lp_values[0], strict=True
    ):  # each job's own rates, utilities
        alone = scheduler.type_rates_alone(v, ctx.cluster.capacity)
        assert row.tolist() == [e.utility(float(r)) if r > 0 else 0.0 for r in alone]
    want = scheduler.round_type_prices(unshared(vals), entries, ctx, gpus)
    assert got.tolist() == want.tolist()
    assert (got > 0).any()  # the round is contended: prices are not trivially zero
    slack = 10 * ctx.round_s
    assert scheduler.critical_jobs(vals, ctx, slack) == scheduler.critical_jobs(
        unshared(vals), ctx, slack
    )
    memo: dict[int, float] = {}
    for v in vals:
        assert scheduler.best_remaining_s(v, ctx, memo) == scheduler.best_remaining_s(v, ctx)
    assert len(memo) < len(vals)  # the memo is shared by the jobs of one class


def large_round(seed: int, nodes: int = 96, jobs: int = 700) -> RoundContext:
    """Every job queued on an empty cluster past ``PRUNE_ABOVE_NODES`` (the large-cluster paths)."""
    from hadar.core.cluster import Cluster, Node

    types = ("v100", "p100", "k80")
    cluster = Cluster("gen", tuple(Node(f"n{i}", {types[i % 3]: 4}) for i in range(nodes)))
    gen = generate(TABLE, PhillyOptions(num_jobs=jobs, seed=seed))
    statuses = tuple(JobStatus(j, j.total_steps) for j in gen)
    return RoundContext(0.0, 0, 360.0, cluster, statuses, {}, TABLE)


@pytest.mark.parametrize("seed", range(3))
def test_greedy_pass_plans_equal_those_of_the_full_scan(seed, monkeypatch):
    """The greedy pass resumes its single-GPU scans (``single_gpu_descending``); with every call
    rescanning all cells (``single_gpu_array``) both rounds' plans are the same."""
    from primal_dual.static_alloc import StaticPriceAllocator

    ctx = large_round(seed)
    fast = two_rounds(ctx)
    assert fast[0].info["greedy_admitted"] > 50  # the greedy pass places jobs
    monkeypatch.setattr(
        StaticPriceAllocator,
        "single_gpu_descending",
        lambda self, free, lineage: self.single_gpu_array(free),
    )
    reference = two_rounds(ctx)
    for got, want in zip(fast, reference, strict=True):
        assert got.assignments == want.assignments
        assert got.info == want.info


def test_a_decision_pauses_the_cyclic_gc_and_restores_it(monkeypatch):
    import gc

    seen = []
    decide = HadarPolicy._decide_preemptive
    monkeypatch.setattr(
        HadarPolicy,
        "_decide_preemptive",
        lambda self, ctx: seen.append(gc.isenabled()) or decide(self, ctx),
    )
    ctx = random_round(3)
    was = gc.isenabled()
    try:
        for enabled in (True, False):
            (gc.enable if enabled else gc.disable)()
            plan = HadarPolicy().decide(ctx)
            assert gc.isenabled() is enabled
            assert plan.assignments
        assert seen == [False, False]
        gc.enable()
        with pytest.raises(ZeroDivisionError), scheduler.cyclic_gc_paused():
            _ = 1 / 0
        assert gc.isenabled()  # restored on errors too
    finally:
        (gc.enable if was else gc.disable)()


@pytest.mark.parametrize("seed", range(20))
def test_fits_checks_a_placement_through_its_cells(seed):
    from primal_dual.find_alloc import Candidate

    rng = np.random.default_rng(seed)
    free = rng.integers(0, 3, size=(int(rng.integers(1, 9)), int(rng.integers(1, 4))))
    alloc = rng.integers(0, 3, size=free.shape) * (rng.random(free.shape) < 0.4)
    cand = Candidate(alloc, 1.0, 0.0, int((alloc.sum(axis=1) > 0).sum()))
    assert scheduler.fits(cand, free) == bool((alloc <= free).all())


@pytest.mark.parametrize("seed", range(6))
def test_upgrades_skipped_at_the_fastest_rate_plan_the_same(seed, monkeypatch):
    """A running job already at its class's fastest rate is not searched for an upgrade (no move
    could gain); searching every job, as before, gives the same plans."""
    ctx = random_round(seed, max_jobs=40)  # fewer jobs than GPUs: idle GPUs to move onto
    fast = two_rounds(ctx)
    skipped: list[bool] = []
    real = scheduler.at_fastest_rate
    monkeypatch.setattr(
        scheduler,
        "at_fastest_rate",
        lambda rate, req, ceilings: skipped.append(real(rate, req, ceilings)) or False,
    )
    searched = two_rounds(ctx)
    for got, want in zip(fast, searched, strict=True):
        assert got.assignments == want.assignments
        assert got.info == want.info
    assert any(skipped), "some running job is at its fastest rate: the skip is exercised"


def _deferred_rho_one_by_one(vals, ctx, contention):
    """The deferral bound's figures job by job, as first written (the reference)."""
    from hadar.reference_rates import equal_share_rate, fair_share_jct

    out = []
    for v in vals:
        job = v.status.job
        shared = len(ctx.jobs) if contention is None else contention.average(job.job_id)
        equal = equal_share_rate(v.request.rates_cons, ctx.cluster.capacity)
        fair = fair_share_jct(job.total_steps, equal, job.num_gpus, ctx.cluster.total_gpus, shared)
        fair += ctx.round_s
        finish = ctx.now + ctx.round_s - job.arrival + scheduler.best_remaining_s(v, ctx)
        out.append((finish / fair, fair) if np.isfinite(fair) else (0.0, fair))
    return out


@pytest.mark.parametrize("seed", range(6))
def test_deferred_rho_at_once_equals_job_by_job(seed):
    from hadar.scheduler.contention import Contention
    from hadar.scheduler.ttd import remaining_times

    ctx = random_round(seed)
    vals = value_jobs(ctx, ctx.jobs)
    contention = Contention()
    ids = [s.job_id for s in ctx.jobs]
    contention.observe(ctx.now - 720.0, ids[: len(ids) // 2])
    contention.observe(ctx.now, ids)
    for c in (None, contention):
        want = _deferred_rho_one_by_one(vals, ctx, c)
        assert scheduler.deferred_rho(vals, ctx, c) == want  # bit for bit
        assert scheduler.deferred_rho(vals, ctx, c, remaining_times(vals, ctx)) == want


def _projected_completion_scalar(type_rates, planned, rate, restarted, started, rem, best, rnd, rs):
    """The type matching's projected completion for one job, as first written (the reference)."""
    import math

    from hadar.scheduler.matching import TIE_BREAK_ROUNDS

    rates = type_rates.astype(float).copy()
    rates[planned] = rate
    restart = np.full(len(rates), rs if started else 0.0)
    restart[planned] = rs if restarted else 0.0
    cost = np.full(len(rates), math.inf)
    stay = np.full(len(rates), math.inf)
    ok = rates > 0
    if best <= 0 or not ok.any():
        return cost, stay
    stay[ok] = restart[ok] + rem / rates[ok]
    progress = rates[ok] * np.maximum(0.0, rnd - restart[ok])
    later = rnd + np.maximum(0.0, rem - progress) / best
    cost[ok] = np.where(stay[ok] <= rnd, stay[ok], later)
    cost += TIE_BREAK_ROUNDS * rnd
    cost[planned] -= TIE_BREAK_ROUNDS * rnd
    return cost, stay


@pytest.mark.parametrize("seed", range(5))
def test_projected_completions_at_once_equal_one_by_one(seed):
    from hadar.scheduler.matching import projected_completions

    rng = np.random.default_rng(seed)
    n, types = 200, 3
    rates = np.where(rng.random((n, types)) < 0.2, 0.0, rng.uniform(0.1, 5.0, (n, types)))
    rates[rng.random(n) < 0.05] = 0.0  # jobs that can run nowhere
    planned = rng.integers(0, types, n)
    planned_rate = rng.uniform(0.1, 5.0, n)
    restarted, started = rng.random(n) < 0.5, rng.random(n) < 0.5
    rem = rng.uniform(10.0, 5000.0, n)
    best = np.where(rng.random(n) < 0.05, 0.0, rng.uniform(0.1, 5.0, n))
    restart_s = rng.uniform(0.0, 600.0, n)  # some restarts longer than the round
    cost, stay = projected_completions(
        rates, planned, planned_rate, restarted, started, rem, best, 360.0, restart_s
    )
    for i in range(n):
        want = _projected_completion_scalar(
            rates[i], planned[i], planned_rate[i], restarted[i], started[i], rem[i], best[i],
            360.0, restart_s[i],
        )  # fmt: skip
        assert cost[i].tolist() == want[0].tolist()
        assert stay[i].tolist() == want[1].tolist()


@pytest.mark.parametrize(
    "name", ["inverse-remaining", "inverse-jct", "inverse-slowdown", "sigmoid"]
)
def test_rate_utility_equals_the_utility_of_the_completion_time(name):
    from primal_dual.utility import make_utility, rate_utility

    utility = make_utility(name)
    rng = np.random.default_rng(0)
    for start, rem, weight, ideal, rate in rng.uniform(0.0, 5000.0, (500, 5)):
        u = rate_utility(utility, start, rem, weight, ideal)
        assert u(rate + 1e-3) == utility.value(start + rem / (rate + 1e-3), weight, ideal)
