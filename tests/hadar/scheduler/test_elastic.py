"""Hadar's elastic jobs: the configuration LP's prices, each job's configuration, the rigid view
the round plans over, and the batch set for the GPUs a job gets."""

from __future__ import annotations

import math
from collections.abc import Hashable
from dataclasses import replace

import numpy as np
import pytest
from scipy.optimize import linprog

from estimators.throughput import ThroughputModel
from goodput.traces import bundled_trace
from hadar.core.cluster import Cluster, Node
from hadar.core.jobs import Job, JobStatus, as_gang
from hadar.policy import RoundContext
from hadar.reference_rates import best_rate_per_type
from hadar.scheduler import HadarConfig, HadarPolicy, elastic
from hadar.scheduler.elastic import (
    BATCH_CANDIDATES,
    ConfigurationMemo,
    adapts,
    batch_choices,
    best_batch,
    configuration_key,
    configurations,
    elastic_round,
    longest_first_ranks,
    widths,
)
from hadar.workloads.pollux import jobs_from_pollux_csv
from hadar.workloads.pollux_throughput import PolluxThroughput
from primal_dual.lp_prices import configuration_lp, type_prices
from primal_dual.utility import make_utility
from tests.hadar.helpers import MIXED, TABLE

HEADER = "name,time,application,num_replicas,batch_size\n"
UTILITY = make_utility("inverse-remaining")


def _ctx(csv: str, cluster: Cluster = MIXED, current=None, done: float = 0.0) -> RoundContext:
    jobs = jobs_from_pollux_csv(HEADER + csv, source="t")
    statuses = [JobStatus(j, j.total_steps - done) for j in jobs]
    return RoundContext(
        0.0, 0, 60.0, cluster, statuses, current or {}, PolluxThroughput(TABLE), 30.0
    )


def _gavel_job() -> Job:
    return Job(
        job_id=0, job_type="ResNet-18 (batch size 32)", num_gpus=2, total_steps=1000.0, arrival=0.0
    )


@pytest.mark.parametrize("seed", range(8))
def test_configuration_prices_equal_the_type_prices_when_every_job_has_one_gang(seed: int) -> None:
    rng = np.random.default_rng(seed)
    jobs, types = 12, 3
    values = rng.uniform(0.5, 5.0, (jobs, types))
    values[rng.uniform(size=values.shape) < 0.3] = 0.0
    gang = rng.integers(1, 5, jobs)
    capacity = np.array([6.0, 5.0, 4.0])
    jj, kk = np.nonzero(values > 0)
    got, _ = configuration_lp(jj, kk, gang[jj], values[jj, kk], capacity)
    assert np.allclose(got, type_prices(values, gang, capacity))


def test_a_configuration_lp_prices_a_type_only_when_its_gpus_run_out() -> None:
    # one job, widths 1 and 2 on one type of 4 GPUs: nothing is contended, so no price
    job, gpu_type = np.array([0, 0]), np.array([0, 0])
    widths_ = np.array([1, 2])
    got, shares = configuration_lp(job, gpu_type, widths_, np.array([1.0, 3.0]), np.array([4.0]))
    assert got.tolist() == [0.0] and shares.tolist() == [0.0, 1.0]
    # two jobs of widths 1 and 4 want 8 GPUs of 4: the type has a price, and the dual objective
    # at it (each job's best payoff, value - width x price, plus the GPUs' worth) is the LP's
    # optimum (strong duality; the optimum by scipy's linprog)
    job = np.array([0, 0, 1, 1])
    width = np.array([1, 4, 1, 4])
    value = np.array([1.0, 3.0, 1.0, 3.0])
    (price,), shares = configuration_lp(job, np.zeros(4, int), width, value, np.array([4.0]))
    assert price > 0
    rows = np.array([[1, 1, 0, 0], [0, 0, 1, 1], width])
    best = linprog(-value, A_ub=rows, b_ub=[1, 1, 4], bounds=(0, None), method="highs")
    payoffs = np.maximum(value - width * price, 0.0)
    dual = payoffs.reshape(2, 2).max(axis=1).sum() + 4 * price
    assert dual == pytest.approx(-best.fun, rel=1e-9)
    assert shares @ value == pytest.approx(-best.fun, rel=1e-9)  # the primal optimum too
    assert shares.reshape(2, 2).sum(axis=1).max() <= 1 + 1e-9 and shares @ width <= 4 + 1e-9


def test_only_jobs_with_a_goodput_model_adapt() -> None:
    ctx = _ctx("j,0,cifar10,4,512\n")
    (status,) = ctx.jobs
    assert adapts(status.job, ctx.throughput)
    rigid = _gavel_job()
    assert not adapts(rigid, ctx.throughput)


def test_widths_and_batches_cover_the_job_s_ranges() -> None:
    ctx = _ctx("j,0,cifar10,4,512\n")
    job = ctx.jobs[0].job
    lo, hi = job.gpu_range
    ws = widths(job, MIXED)
    # 1, 2, 4, 8 (powers of two, whole 4-GPU and 8-GPU nodes) up to 8, the most of one type
    assert ws == [w for w in (1, 2, 4, 8) if lo <= w <= hi]
    bigger = Cluster("t4x3", tuple(Node(f"n{i}", {"t4": 4}) for i in range(3)))
    assert widths(job, bigger) == [w for w in (1, 2, 4, 8, 12) if lo <= w <= hi]  # 12: 3 nodes
    assert job.batch_range is not None
    bs = batch_choices(job)
    assert bs[0] == job.batch_range[0] and bs[-1] == job.batch_range[1] and 512 in bs


def test_each_configuration_takes_the_batch_of_the_largest_rate() -> None:
    ctx = _ctx("j,0,cifar10,4,512\n")
    job = ctx.jobs[0].job
    configs = configurations(job, MIXED, ctx.throughput)
    assert {c.gpu_type for c in configs} == {0, 1, 2}
    for c in configs:
        # one batch at a time, as a rigid gang: the configuration is the first batch of the best
        per_batch = []
        for b in batch_choices(job):
            cons, unc = ctx.throughput.cell_rates(as_gang(job, c.width, b), MIXED)
            per_batch.append(best_rate_per_type(cons, unc, MIXED.capacity, c.width)[c.gpu_type])
        best = max(per_batch)
        assert c.rate == best
        assert c.batch == batch_choices(job)[per_batch.index(best)]


@pytest.mark.parametrize("app", ["cifar10", "bert"])
def test_a_models_gang_rates_at_once_are_its_cell_rates_one_batch_at_a_time(app: str) -> None:
    ctx = _ctx(f"j,0,{app},4,{bundled_trace(app).init_batch_size * 2}\n")
    job, model = ctx.jobs[0].job, ctx.throughput
    batches = [*batch_choices(job), None]
    for w in widths(job, MIXED):
        together = model.gang_rates(job, w, batches, MIXED)
        by_default = ThroughputModel.gang_rates(PolluxThroughput(TABLE), job, w, batches, MIXED)
        for stacked, default in zip(together, by_default, strict=True):
            assert stacked.shape == (len(batches), *MIXED.capacity.shape)
            assert np.array_equal(stacked, default)


def test_a_lone_job_takes_its_fastest_configuration() -> None:
    ctx = _ctx("j,0,cifar10,1,128\n")
    view = elastic_round(ctx, UTILITY, 360.0)
    chosen = view.chosen[0]
    fastest = max(configurations(ctx.jobs[0].job, MIXED, ctx.throughput), key=lambda c: c.rate)
    assert chosen.rate == pytest.approx(fastest.rate)
    (viewed,) = view.ctx.jobs
    assert viewed.job.num_gpus == chosen.width
    assert viewed.job.spec["batch_size"] == chosen.batch


def test_the_memo_keeps_each_job_s_own_configurations_across_rounds() -> None:
    # two jobs of one application that differ only in their own GPU count: each has its own
    # count among its widths, so each keeps its own configurations (shared, one of them lost
    # its count and the choice depended on which came first)
    ctx = _ctx("a,0,cifar10,3,512\nb,0,cifar10,5,512\n")
    memo = ConfigurationMemo()
    first = elastic_round(ctx, UTILITY, 360.0, memo)
    known = memo.for_round(ctx)
    for status in ctx.jobs:
        own = configurations(status.job, MIXED, ctx.throughput)
        assert known[configuration_key(status.job)] == own
        assert status.job.num_gpus in {c.width for c in own}
    # the next round reads them from the memo and decides as a round without one
    later = replace(ctx, now=60.0, round_index=1)
    assert (
        elastic_round(later, UTILITY, 360.0, memo).chosen
        == elastic_round(later, UTILITY, 360.0).chosen
    )
    assert first.chosen == elastic_round(ctx, UTILITY, 360.0).chosen
    # another cluster, or a model that learns, starts afresh
    smaller = Cluster("t4", (Node("a", {"t4": 4}),))
    assert memo.for_round(replace(ctx, cluster=smaller)) == {}

    class Learning(PolluxThroughput):
        learns = True

    learning = replace(ctx, throughput=Learning(TABLE))
    assert memo.for_round(learning) == {}
    assert memo.for_round(learning) is not memo.for_round(learning)


def test_a_round_with_no_adapting_job_is_left_as_it_is() -> None:
    job = _gavel_job()
    ctx = RoundContext(0.0, 0, 360.0, MIXED, (JobStatus(job, 1000.0),), {}, TABLE)
    view = elastic_round(ctx, UTILITY, 360.0)
    assert view.ctx is ctx and not view.chosen


def test_contention_shrinks_the_jobs() -> None:
    alone = elastic_round(_ctx("j,0,cifar10,1,128\n"), UTILITY, 360.0).chosen[0].width
    crowd = "".join(f"j{i},0,cifar10,1,128\n" for i in range(12))
    widths_crowded = [c.width for c in elastic_round(_ctx(crowd), UTILITY, 360.0).chosen.values()]
    assert max(widths_crowded) <= alone
    assert sum(widths_crowded) < 12 * alone


def test_a_running_job_keeps_its_configuration_unless_moving_gains_enough() -> None:
    ctx = _ctx("j,0,cifar10,1,128\n", done=1.0)
    free_choice = elastic_round(ctx, UTILITY, 0.0).chosen[0]
    running = {(0, 0): {"a": {"t4": 1}}}
    kept = elastic_round(_ctx("j,0,cifar10,1,128\n", current=running, done=1.0), UTILITY, 1e9)
    t4 = MIXED.type_index["t4"]
    assert (kept.chosen[0].gpu_type, kept.chosen[0].width) == (t4, 1)
    moved = elastic_round(_ctx("j,0,cifar10,1,128\n", current=running, done=1.0), UTILITY, 0.0)
    assert (moved.chosen[0].gpu_type, moved.chosen[0].width) == (
        free_choice.gpu_type,
        free_choice.width,
    )
    # the running placement is kept in the view only while the width is unchanged
    assert (0, 0) in kept.ctx.current
    if moved.chosen[0].width != 1:
        assert (0, 0) not in moved.ctx.current


def test_hadar_sets_each_elastic_job_s_batch_and_keeps_counts_in_range() -> None:
    csv = "".join(
        f"j{i},0,{app},2,{b}\n"
        for i, (app, b) in enumerate(
            [("cifar10", 256), ("imagenet", 400), ("bert", 12), ("yolov3", 16), ("deepspeech2", 20)]
        )
    )
    ctx = _ctx(csv)
    plan = HadarPolicy().decide(ctx)
    assert plan.assignments and plan.info["elastic_jobs"] == 5
    by_id = {s.job_id: s.job for s in ctx.jobs}
    used = np.zeros(len(MIXED.gpu_types))
    for a in plan.assignments:
        job = by_id[a.job_id]
        lo, hi = job.gpu_range
        assert lo <= a.num_gpus <= hi
        assert job.batch_range is not None and a.batch_size is not None
        assert job.batch_range[0] <= a.batch_size <= job.batch_range[1]
        used += MIXED.placement_matrix(a.placement).sum(axis=0)
    assert np.all(used <= MIXED.capacity.sum(axis=0))
    rigid = HadarPolicy(HadarConfig(adapt_elastic=False)).decide(ctx)
    assert all(a.batch_size is None for a in rigid.assignments)
    assert all(a.num_gpus == by_id[a.job_id].num_gpus for a in rigid.assignments)


def _running_and_new(cluster: Cluster, yolo_batch: int, placement: dict) -> RoundContext:
    """A YOLOv3 job half done, running on ``placement``, and a CIFAR-10 job just arrived."""
    csv = f"a,0,yolov3,1,{yolo_batch}\nb,0,cifar10,1,128\n"
    jobs = jobs_from_pollux_csv(HEADER + csv, source="t")
    statuses = [
        JobStatus(jobs[0], jobs[0].total_steps * 0.5),
        JobStatus(jobs[1], jobs[1].total_steps),
    ]
    running = {(0, 0): placement}
    return RoundContext(0.0, 0, 60.0, cluster, statuses, running, PolluxThroughput(TABLE), 30.0)


def test_the_chosen_configurations_fit_the_gpus_together() -> None:
    # a YOLOv3 job kept on one GPU (no move gains enough) and a CIFAR-10 newcomer the LP would
    # give every GPU: the newcomer is sized for the GPUs left, so neither waits while GPUs idle
    t4 = Cluster("t4x4", tuple(Node(f"n{i}", {"t4": 4}) for i in range(4)))
    ctx = _running_and_new(t4, 8, {"n0": {"t4": 1}})
    statuses = list(ctx.jobs)
    view = elastic_round(ctx, UTILITY, 1e9)
    assert view.chosen[0].width == 1  # kept: no move finishes it 1e9 s sooner
    assert view.chosen[1].width == 12  # the widest of its widths within the 15 GPUs left
    alone = elastic_round(replace(ctx, jobs=statuses[1:], current={}), UTILITY, 1e9)
    assert alone.chosen[1].width == 16  # what it takes alone


def _mixed_progress_ctx() -> RoundContext:
    """Five elastic jobs of three kinds, from nearly done to just started, on MIXED."""
    csv = "".join(
        f"j{i},0,{app},2,{b}\n"
        for i, (app, b) in enumerate(
            [("cifar10", 256), ("yolov3", 16), ("bert", 12), ("yolov3", 16), ("cifar10", 256)]
        )
    )
    jobs = jobs_from_pollux_csv(HEADER + csv, source="t")
    left = (0.05, 1.0, 0.5, 0.2, 0.9)
    statuses = [JobStatus(j, j.total_steps * f) for j, f in zip(jobs, left, strict=True)]
    return RoundContext(0.0, 0, 60.0, MIXED, statuses, {}, PolluxThroughput(TABLE), 30.0)


def test_elastic_utility_values_the_configurations_and_defaults_to_the_round_s() -> None:
    ctx = _mixed_progress_ctx()

    def chosen(name: str) -> dict[int, tuple[int, int]]:
        view = elastic_round(ctx, make_utility(name), 360.0)
        return {j: (c.gpu_type, c.width) for j, c in view.chosen.items()}

    by_remaining, by_slowdown = chosen("inverse-remaining"), chosen("inverse-slowdown")
    assert by_remaining != by_slowdown  # the two utilities choose differently here

    def planned(config: HadarConfig) -> dict[int, tuple[int, int]]:
        plan = HadarPolicy(config).decide(ctx)
        out = {}
        for a in plan.assignments:
            (k,) = {MIXED.type_index[t] for per in a.placement.values() for t in per}
            out[a.job_id] = (k, a.num_gpus)
        return out

    default = planned(HadarConfig())
    assert default == planned(HadarConfig(elastic_utility="ranked-speedup"))
    by_ranked = chosen("ranked-speedup")
    assert by_ranked not in (by_remaining, by_slowdown)
    remaining = planned(HadarConfig(elastic_utility=None))  # the round's utility
    assert remaining == planned(HadarConfig(elastic_utility="inverse-remaining")) != default
    slowdown = planned(HadarConfig(elastic_utility="inverse-slowdown"))
    assert slowdown != default
    # each placed job runs on the configuration its elastic utility chose
    assert all(by_slowdown[j] == c for j, c in slowdown.items())
    assert all(by_remaining[j] == c for j, c in remaining.items())
    assert all(by_ranked[j] == c for j, c in default.items())


def test_ranks_count_the_jobs_with_more_left() -> None:
    assert longest_first_ranks([3.0, 1.0, 2.0, 1.0, math.inf]) == [2, 4, 3, 4, 1]
    assert longest_first_ranks([]) == []


def test_an_unknown_elastic_utility_is_refused() -> None:
    with pytest.raises(ValueError, match="elastic_utility must be one of"):
        HadarConfig(elastic_utility="fastest")


def test_the_batch_grid_is_as_fine_as_pollux_s_batch_search() -> None:
    ctx = _ctx("j,0,yolov3,4,64\n")
    job = ctx.jobs[0].job
    assert job.batch_range is not None
    lo, hi = job.batch_range
    bs = [b for b in batch_choices(job) if b is not None]
    step = (hi / lo) ** (1.0 / (BATCH_CANDIDATES - 1))
    assert bs == sorted(set(bs)) and bs[0] == lo and bs[-1] == hi and 64 in bs
    # no gap wider than one step of a BATCH_CANDIDATES-point geometric grid (and rounding)
    assert all(b <= a * step + 1 for a, b in zip(bs, bs[1:], strict=False))
    assert len(bs) > 8


def _epochs(app: str) -> np.ndarray:
    """Where the application's epochs end, in progress units (samples at M0)."""
    trace = bundled_trace(app)
    out: np.ndarray = trace.epoch_progress * trace.init_batch_size
    return out


def test_a_pollux_job_s_rates_change_only_between_epochs() -> None:
    ctx = _ctx("j,0,cifar10,4,512\n")
    job, model = ctx.jobs[0].job, ctx.throughput
    ends = _epochs("cifar10")
    inside = (ends[2] + 0.25 * (ends[3] - ends[2]), ends[2] + 0.75 * (ends[3] - ends[2]))
    assert model.progress_class(job, inside[0]) == model.progress_class(job, inside[1])
    assert model.progress_class(job, inside[0]) != model.progress_class(job, ends[5] + 1.0)
    for placement in ({"a": {"t4": 4}}, {"c": {"v100": 2}}, {"a": {"t4": 4}, "b": {"t4": 2}}):
        for b in batch_choices(job)[::5]:
            rates = [model.run_rate(job, placement, MIXED, done, b).rate for done in inside]
            assert rates[0] == rates[1]
    # a model whose rates do not follow epochs: every progress point is its own class
    assert TABLE.progress_class(_gavel_job(), 1.0) != TABLE.progress_class(_gavel_job(), 2.0)


def test_the_kept_batches_are_those_computed_afresh(monkeypatch: pytest.MonkeyPatch) -> None:
    ctx = _ctx("j,0,yolov3,4,64\n")
    job, model = ctx.jobs[0].job, ctx.throughput
    ends = _epochs("yolov3")
    known: dict[Hashable, int | None] = {}
    picked = set()
    for done in (0.0, 1.0, ends[0] - 1.0, ends[3] + 5.0, ends[3] + 9.0, ends[-2] + 1.0):
        status = JobStatus(job, job.total_steps - done)
        for placement in ({"a": {"t4": 4}, "b": {"t4": 4}}, {"c": {"v100": 8}}, {"d": {"k80": 1}}):
            fresh = best_batch(status, placement, MIXED, model)
            assert best_batch(status, placement, MIXED, model, known) == fresh
            assert best_batch(status, placement, MIXED, model, known) == fresh  # from the memo
            picked.add(fresh)
    assert len(known) == 3 * 3  # the six progress points fall in three epochs
    assert len(picked) > 1  # the batch does follow the placement and the progress
    # a full memo starts afresh, and answers as before
    monkeypatch.setattr(elastic, "MAX_KEPT_BATCHES", 4)
    kept: dict[Hashable, int | None] = {}
    for done in (0.0, ends[3] + 5.0, ends[-2] + 1.0):
        status = JobStatus(job, job.total_steps - done)
        for placement in ({"a": {"t4": 4}, "b": {"t4": 4}}, {"c": {"v100": 8}}):
            fresh = best_batch(status, placement, MIXED, model)
            assert best_batch(status, placement, MIXED, model, kept) == fresh
            assert len(kept) <= 4


def test_the_jobs_beside_one_that_stays_share_out_the_gpus_it_leaves() -> None:
    """A YOLOv3 job half done on the 4 V100s, which the LP would move but which stays, and a
    CIFAR-10 newcomer: the LP is solved again over the GPUs the staying job leaves, so the
    newcomer gets what it would get on a cluster without the V100s (all 8 T4s), not what was
    left of a plan that counted on the V100 job moving onto T4s (4 of them, before)."""
    nodes = (Node("t0", {"t4": 4}), Node("t1", {"t4": 4}), Node("k0", {"k80": 4}))
    cluster = Cluster("mix", (*nodes, Node("v0", {"v100": 4})))
    ctx = _running_and_new(cluster, 16, {"v0": {"v100": 4}})
    statuses = list(ctx.jobs)
    chosen = elastic_round(ctx, UTILITY, 1e9).chosen
    v100 = cluster.type_index["v100"]
    assert (chosen[0].gpu_type, chosen[0].width) == (v100, 4)  # it stays
    rest = Cluster("rest", nodes)
    alone = elastic_round(
        RoundContext(0.0, 0, 60.0, rest, statuses[1:], {}, PolluxThroughput(TABLE), 30.0),
        UTILITY,
        1e9,
    ).chosen[1]
    newcomer = chosen[1]
    assert (cluster.gpu_types[newcomer.gpu_type], newcomer.width) == (
        rest.gpu_types[alone.gpu_type],
        alone.width,
    )
    assert (cluster.gpu_types[newcomer.gpu_type], newcomer.width) == ("t4", 8)


@pytest.mark.parametrize("seed", range(40))
def test_a_running_job_moves_only_to_finish_sooner_or_to_give_gpus_back(seed: int) -> None:
    """Whatever the LPs do, a running adapting job leaves its configuration only for one that
    finishes it ``min_gain_s`` sooner, restart included, or for a narrower one (the hysteresis,
    step 3 of docs/elastic.md): never for a slower one as wide, which only costs it a restart."""
    rng = np.random.default_rng(seed)
    apps = [("cifar10", 128), ("yolov3", 16), ("bert", 12), ("deepspeech2", 20), ("imagenet", 400)]
    n = int(rng.integers(14, 30))
    picks = [apps[int(i)] for i in rng.integers(0, len(apps), n)]
    jobs = jobs_from_pollux_csv(
        HEADER + "".join(f"j{i},0,{a},1,{b}\n" for i, (a, b) in enumerate(picks)), source="t"
    )
    statuses = [JobStatus(j, j.total_steps * float(rng.uniform(0.05, 1.0))) for j in jobs]
    free = MIXED.capacity.copy()
    running: dict = {}
    for s in statuses:
        if rng.uniform() < 0.9:
            h, k = int(rng.integers(0, free.shape[0])), int(rng.integers(0, free.shape[1]))
            width = int(min(free[h, k], 2 ** int(rng.integers(0, 3))))
            if width > 0:
                free[h, k] -= width
                running[(s.job_id, 0)] = {MIXED.node_names[h]: {MIXED.gpu_types[k]: width}}
    ctx = RoundContext(0.0, 0, 60.0, MIXED, statuses, running, PolluxThroughput(TABLE), 30.0)
    min_gain_s = 360.0
    chosen = elastic_round(ctx, UTILITY, min_gain_s).chosen
    configs = {s.job_id: configurations(s.job, MIXED, ctx.throughput) for s in statuses}
    for s in statuses:
        here = elastic.running_configuration(running.get((s.job_id, 0)), MIXED)
        c = chosen.get(s.job_id)
        if here is None or c is None or (c.gpu_type, c.width) == here:
            continue
        kept = next((k for k in configs[s.job_id] if (k.gpu_type, k.width) == here), None)
        if kept is None:  # it runs on no configuration of its own: free to take any
            continue
        restart = s.job.restart_cost_s(ctx.restart_penalty_s)
        sooner = s.remaining_steps / c.rate + restart <= s.remaining_steps / kept.rate - min_gain_s
        assert sooner or c.width < kept.width, (s.job.job_type, here, (c.gpu_type, c.width))
