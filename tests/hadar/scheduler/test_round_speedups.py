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
