"""Pollux's workloads as elastic jobs (issue 23): loading, bad input, the simulator's goodput
accounting and every policy running on them."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from goodput import statistical_efficiency
from goodput.traces import bundled_trace
from hadar import api
from hadar.cli import main
from hadar.core.errors import InputError
from hadar.core.jobs import Job
from hadar.workloads import load_workload
from hadar.workloads.pollux import LOADS, pollux_jobs, workload_at_load
from hadar.workloads.pollux_throughput import job_batch_size

HEADER = "name,time,application,num_replicas,batch_size"


def test_every_bundled_workload_and_load_loads_as_elastic_jobs():
    for n in range(1, 9):
        for load in LOADS:
            jobs = pollux_jobs(workload_at_load(f"pollux-{n}", load))
            # the load scales the number of jobs sampled over the same 8 hours: 160 at load 1
            assert len(jobs) == 160 * load and all(j.is_elastic for j in jobs)
    assert len(load_workload("pollux-1-load-0.5", table=None)) == 80  # type: ignore[arg-type]
    first = load_workload("pollux-6", table=None)[0]  # type: ignore[arg-type]
    assert (first.job_type, first.arrival, first.num_gpus) == ("cifar10", 53.0, 6)
    assert job_batch_size(first, bundled_trace("cifar10")) == 2048
    assert first.total_steps == pytest.approx(bundled_trace("cifar10").target_samples)
    assert first.gpu_range == (1, 64) and first.batch_range == (128, 4096)


def test_load_applies_only_to_pollux_workloads_and_known_loads():
    assert workload_at_load("pollux-3", 1.0) == "pollux-3"
    assert workload_at_load("pollux-3", 1.5) == "pollux-3-load-1.5"
    with pytest.raises(InputError, match="applies to a workload pollux-N"):
        workload_at_load("philly-480", 2.0)
    with pytest.raises(InputError, match="must be one of 0.5, 1, 1.5, 2"):
        workload_at_load("pollux-3", 3.0)
    with pytest.raises(InputError, match="pollux-1..pollux-8"):
        pollux_jobs("pollux-9")


@pytest.mark.parametrize(
    ("row", "extra", "message"),
    [
        ("a,0,resnet,1,128", "", "row[0].application: unknown application 'resnet'"),
        ("a,0,cifar10,2,64", "", "row[0].batch_size: 64 is outside cifar10's measured batch"),
        ("a,0,cifar10,2,256,4,2", ",min_gpus,max_gpus", "row[0].min_gpus: 4 exceeds max_gpus 2"),
        ("a,-5,cifar10,2,256", "", "row[0].time: must be a number in"),
        ("a,0,cifar10,nan,256", "", "row[0].num_replicas"),
        ("a,0,cifar10,2,256,4", ",max_gpu", "header: unknown column 'max_gpu'"),
    ],
)
def test_a_bad_pollux_workload_file_fails_before_any_round(tmp_path, capsys, row, extra, message):
    path = tmp_path / "w.csv"
    path.write_text(f"{HEADER}{extra}\n{row}\n")
    out = tmp_path / "out"
    code = main(
        ["simulate", "--cluster", "pollux-64t4", "--workload", str(path), "--out", str(out)]
    )
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert str(path) in err and message in err
    assert not out.exists()


def test_min_gpus_above_max_gpus_is_rejected_by_the_job_model():
    with pytest.raises(InputError, match="job 3: min_gpus <= gpus <= max_gpus"):
        Job(3, "x", 2, 10.0, min_gpus=4, max_gpus=2)
    assert not Job(0, "x", 2, 10.0).is_elastic
    assert Job(0, "x", 2, 10.0, min_gpus=1, max_gpus=4).gpu_range == (1, 4)


def _isolated_seconds(app: str, per_node: tuple[int, ...], batch: int) -> float:
    trace = bundled_trace(app)
    bounds = trace.epoch_progress
    total = 0.0
    for start, end in zip(np.r_[0.0, bounds[:-1]], bounds, strict=True):
        total += (end - start) * trace.init_batch_size / trace.rate(per_node, batch, start).goodput
    return total


def test_a_job_alone_finishes_when_its_goodput_has_covered_its_target(tmp_path):
    path = tmp_path / "one.csv"
    path.write_text(f"{HEADER}\nd,0,deepspeech2,4,160\n")
    sim = api.simulate("pollux-64t4", str(path), "tiresias", round_s=60.0)
    expected = _isolated_seconds("deepspeech2", (4,), 160)
    # the efficiency is held for a round at a time: within 1 % of the epoch-exact integral
    assert sim.jobs.jct[0] == pytest.approx(expected, rel=0.01)
    rounds = sim.rounds.dropna(subset=["goodput"])
    assert len(rounds) > 10 and (rounds.efficiency > 0).all() and (rounds.efficiency <= 1).all()
    assert rounds.efficiency.iloc[-1] > rounds.efficiency.iloc[0]  # later epochs are more efficient
    runs = sim.placements
    assert (runs.gpus == 4).all() and (runs.batch_size == 160).all()
    assert np.allclose(runs.goodput, runs.throughput * runs.efficiency)


def test_a_reallocation_costs_the_jobs_own_restart_delay(tmp_path):
    path = tmp_path / "two.csv"
    # the second job arrives later with the same need: under Tiresias, nothing moves, so the
    # restart delay must not be paid; with restart_s the column is read
    path.write_text(f"{HEADER},restart_s\na,0,ncf,1,256,45\nb,10,ncf,1,256,45\n")
    jobs = load_workload(str(path), table=None)  # type: ignore[arg-type]
    assert [j.restart_s for j in jobs] == [45.0, 45.0]
    sim = api.simulate("pollux-64t4", jobs, "tiresias", round_s=60.0)
    assert (sim.jobs.restarts == 0).all()


@pytest.mark.parametrize(
    "policy",
    [
        "hadar",
        "hadar-legacy",
        "hadare",
        "gavel",
        "gavel-fifo",
        "gavel-makespan",
        "tiresias",
        "yarn-cs",
    ],
)
def test_every_policy_finishes_a_pollux_workload(policy):
    jobs = pollux_jobs("pollux-2-load-2")[:14]
    sim = api.simulate("pollux-64t4", jobs, policy, round_s=60.0)
    assert sim.summary["completed"] == 14
    elastic_rows = sim.placements.dropna(subset=["efficiency"])
    assert len(elastic_rows) == len(sim.placements) > 0
    assert ((elastic_rows.efficiency > 0) & (elastic_rows.efficiency <= 1.0 + 1e-9)).all()
    assert pd.api.types.is_integer_dtype(sim.placements.batch_size)


def test_forked_copies_progress_at_most_as_one_job_at_their_combined_batch(tmp_path):
    path = tmp_path / "one.csv"
    path.write_text(f"{HEADER}\nc,0,cifar10,1,128\n")
    # the job as a rigid gang at its own batch: HadarE forks it (an adapted one grows instead)
    runs = {
        mode: api.simulate(
            "pollux-64t4",
            str(path),
            "hadare",
            round_s=60.0,
            fork_progress=mode,
            policy_options={"adapt_elastic": "false"},
        )
        for mode in ("steps", "goodput")
    }
    steps, good = runs["steps"], runs["goodput"]
    assert steps.placements["copy"].max() > 1 and good.placements["copy"].max() > 1  # forked
    assert steps.jobs.step_sum[0] == pytest.approx(steps.jobs.target[0])
    # the bound: the paper's accounting would have credited more than the progress that counted
    assert good.jobs.step_sum[0] > 1.2 * good.jobs.target[0]
    assert good.jobs.jct[0] > steps.jobs.jct[0]
    forked = good.placements[good.placements["copy"] > 0]
    assert (forked.efficiency < 1.0).all()
    # each copy at batch 128, together at 128 x copies: the efficiency of the combined batch
    first = forked[forked["round"] == forked["round"].min()]
    copies = first["copy"].nunique()
    combined = bundled_trace("cifar10").grad_stats(128 * copies, 0.0)
    expected = float(statistical_efficiency(combined, 128, 128 * copies))
    assert first.efficiency.iloc[0] == pytest.approx(expected)


def test_a_pollux_job_off_the_t4_runs_on_estimated_figures_and_says_so():
    jobs = pollux_jobs("pollux-1")[:3]
    sim = api.simulate("sim-60gpu", jobs, "tiresias", round_s=60.0)
    assert sim.summary["completed"] == 3
    assert sim.placements.estimated.all() and sim.summary["estimated_cells"]


def test_gavel_jobs_borrow_the_noise_scale_of_the_same_model_or_none():
    from estimators.throughput import GavelThroughputTable
    from hadar.workloads.fork_efficiency import fork_factors

    table = GavelThroughputTable.bundled()
    resnet = Job(0, "ResNet-18 (batch size 64)", 1, 1000.0)
    factors = fork_factors(resnet, [None, None, None], 0.0, table)
    assert factors is not None and len(factors) == 3 and all(0 < f < 1 for f in factors)
    # later in training the noise scale grows, so forking costs less
    later = fork_factors(resnet, [None, None, None], 900.0, table)
    assert later is not None and later[0] > factors[0]
    assert fork_factors(Job(1, "A3C", 1, 1000.0), [None, None], 0.0, table) is None
    sim = api.simulate("sim-60gpu", "philly-8", "hadare", fork_progress="goodput")
    assert (sim.jobs.step_sum >= sim.jobs.target - 1e-6).all()


def test_hadare_grows_an_adapted_job_as_hadar_does_instead_of_forking_it(tmp_path):
    path = tmp_path / "one.csv"
    path.write_text(f"{HEADER}\nc,0,cifar10,1,128\n")
    runs = {p: api.simulate("pollux-64t4", str(path), p, round_s=60.0) for p in ("hadar", "hadare")}
    hadar, hadare = runs["hadar"], runs["hadare"]
    # one synchronous gang each round, never two copies
    assert hadare.placements.groupby("round")["copy"].nunique().max() == 1
    assert hadar.placements.gpus.max() > 1  # Hadar widened the one-GPU job
    assert set(hadare.placements.batch_size) == set(hadar.placements.batch_size) != {128}
    assert hadare.jobs.jct[0] == pytest.approx(hadar.jobs.jct[0])
    # the rigid gang at its own batch is slower
    rigid = api.simulate(
        "pollux-64t4", str(path), "hadar", round_s=60.0, policy_options={"adapt_elastic": "false"}
    )
    assert rigid.jobs.jct[0] > 1.5 * hadar.jobs.jct[0]


@pytest.mark.parametrize("application", ["cifar10", "imagenet", "yolov3"])
def test_a_batchs_average_efficiency_weighs_each_epoch_by_its_progress(application):
    from estimators.throughput import GavelThroughputTable
    from hadar.workloads.pollux_throughput import PolluxThroughput

    trace = bundled_trace(application)
    bounds = trace.epoch_progress
    model = PolluxThroughput(GavelThroughputTable.bundled())
    for batch in (trace.init_batch_size, 3 * trace.init_batch_size, 10**6):
        effs, start = [], 0.0
        for end in bounds:
            grad = trace.grad_stats(batch, start)
            effs.append(float(statistical_efficiency(grad, trace.init_batch_size, batch)))
            start = float(end)
        lengths = np.diff(np.concatenate([[0.0], bounds]))
        expected = float(bounds[-1] / np.sum(lengths / np.maximum(effs, 1e-9)))
        assert model.average_efficiency(trace, batch) == expected


def _trace_rate_oracle(application, per_node, types, batch, progress):
    """A Pollux job's rate straight from the trace: its rate on the T4s, each type's compute
    scaled, the slowest type's pace."""
    from hadar.workloads.gpu_scaling import compute_scale
    from hadar.workloads.pollux_throughput import scaled

    trace = bundled_trace(application)
    own = trace.rate(per_node, batch, progress)
    worst = None
    for gpu_type in sorted(types):
        factor, estimated = compute_scale(gpu_type, application)
        _, sync = trace.iteration_time(per_node, own.local_bsz)
        rate = scaled(own, sync, factor)
        if worst is None or rate.throughput < worst[0].throughput:
            worst = (rate, estimated)
    rate, estimated = worst
    return rate.goodput, rate.batch_size, rate.throughput, rate.efficiency, estimated


def test_a_pollux_jobs_kept_rates_are_the_traces_whatever_the_order_asked(monkeypatch):
    from estimators.throughput import GavelThroughputTable
    from hadar.clusters import load_cluster
    from hadar.workloads import pollux_throughput
    from hadar.workloads.pollux_throughput import PolluxThroughput

    monkeypatch.setattr(pollux_throughput, "MAX_KEPT_RUN_RATES", 7)  # emptied many times
    model = PolluxThroughput(GavelThroughputTable.bundled())
    cluster = load_cluster("pollux-hetero-64")
    rng = np.random.default_rng(3)
    shapes = [
        {"a": {"t4": 4}},
        {"a": {"t4": 2}, "b": {"t4": 3}},
        {"a": {"v100": 1}},
        {"a": {"t4": 2, "k80": 1}},
        {"a": {"k80": 4}, "b": {"v100": 2}},
    ]
    for application in ("cifar10", "imagenet"):
        trace = bundled_trace(application)
        job = Job(0, application, 1, 1e9, spec={"application": application})
        target = trace.target_progress * trace.init_batch_size
        for _ in range(60):
            placement = shapes[rng.integers(len(shapes))]
            done = float(rng.uniform(0, target))
            batches = [
                int(b) for b in rng.integers(trace.init_batch_size, 20 * trace.init_batch_size, 4)
            ]
            together = model.run_rates(job, placement, cluster, done, batches)
            for batch, got in zip(batches, together, strict=True):
                alone = model.run_rate(job, placement, cluster, done, batch)
                assert alone == got
                per_node = tuple(sum(p.values()) for p in placement.values())
                types = {t for p in placement.values() for t in p}
                expected = _trace_rate_oracle(
                    application, per_node, types, batch, done / trace.init_batch_size
                )
                assert (
                    got.rate,
                    got.batch_size,
                    got.throughput,
                    got.efficiency,
                    got.estimated,
                ) == expected
                # efficiency() shares the epoch's kept figures, and is the trace's exactly
                grad = trace.grad_stats(batch, done / trace.init_batch_size)
                assert model.efficiency(job, batch, done) == float(
                    statistical_efficiency(grad, trace.init_batch_size, batch)
                )
        assert len(model._run_rates) <= 7 and len(model._speeds) <= 7
        assert len(model._epoch_efficiency) <= 7
