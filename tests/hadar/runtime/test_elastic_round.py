"""Elastic rounds without a cluster: the elastic workloads and job files, each round's spec
(per-rank batch, learning-rate rule), what a worker's report becomes, the online model's
measurements, and the worker's gradient meter on one replica."""

from __future__ import annotations

import math

import numpy as np
import pytest
import yaml

from estimators.iterations import IterationSample
from estimators.online import OnlineThroughput
from goodput.scaling import grad_of
from hadar.clusters import load_cluster
from hadar.core.errors import InputError
from hadar.runtime.elastic import event_fields, local_batch, round_spec, sample_of
from hadar.scenario import load_table, throughput_for
from hadar.workloads import is_builtin, load_workload
from hadar.workloads.files import load_job_file


def _elastic(name: str = "elastic-3", size: str = "tiny"):
    return load_workload(name, load_table(None), size=size)


def test_elastic_workloads_are_staggered_elastic_jobs_with_real_specs():
    jobs = _elastic("elastic-4")
    assert is_builtin("elastic-4") and [j.job_id for j in jobs] == [0, 1, 2, 3]
    assert [j.arrival for j in jobs] == sorted(j.arrival for j in jobs) and jobs[1].arrival > 0
    for j in jobs:
        assert j.is_elastic and j.gpu_range == (1, 4) and j.batch_range[1] == 4 * j.batch_range[0]
        assert j.spec["batch_size"] == j.batch_range[0] and j.spec["size"] == "tiny"
    assert [j.total_steps * 5 for j in jobs] == [
        j.total_steps for j in _elastic("elastic-4", "small")
    ]
    with pytest.raises(InputError, match="elastic-2, elastic-3, elastic-4"):
        _elastic("elastic-9")
    with pytest.raises(InputError, match="--size"):
        _elastic("elastic-2", "paper")


def test_job_files_declare_elastic_ranges_and_bad_ones_name_the_row(tmp_path):
    row = {"id": 0, "type": "MM", "gpus": 1, "steps": 10, "min_gpus": 1, "max_gpus": 4}
    path = tmp_path / "jobs.yaml"
    path.write_text(yaml.safe_dump({"jobs": [{**row, "batch_range": [16, 64]}]}))
    (job,) = load_job_file(path)
    assert job.gpu_range == (1, 4) and job.batch_range == (16, 64)
    path.write_text(yaml.safe_dump({"jobs": [{**row, "batch_range": [64, 16]}]}))
    with pytest.raises(InputError, match=r"jobs\.yaml: jobs\[0\]: job 0: batch_range"):
        load_job_file(path)
    path.write_text(yaml.safe_dump({"jobs": [{**row, "min_gpus": 2}]}))
    with pytest.raises(InputError, match=r"jobs\[0\]: job 0: min_gpus <= gpus"):
        load_job_file(path)


def _sample(r: int = 0, gpus: int = 2, **kw: object) -> IterationSample:
    fields: dict[str, object] = dict(
        round=r,
        num_nodes=1,
        num_replicas=gpus,
        local_bsz=8,
        steps=10,
        step_time=0.1,
        sync_time=0.02,
        replica_sqnorms=(3.0, 3.2),
        mean_sqnorm=2.0,
    )
    fields.update(kw)
    return IterationSample(**fields)  # type: ignore[arg-type]


def test_a_round_trains_the_total_batch_split_over_its_ranks_with_the_optimisers_lr_rule():
    mm, rs = _elastic("elastic-4")[3], _elastic()[1]  # LT: Adam (square root); RS: SGD (AdaScale)
    assert (mm.spec["model"], rs.spec["model"]) == ("LT", "RS")
    spec = round_spec(mm, 64, 4)
    assert spec["batch_size"] == 16 and spec["lr"] == pytest.approx(mm.spec["lr"] * 2.0)
    assert round_spec(mm, None, 2)["batch_size"] == 8  # the job's own total batch, split
    assert round_spec(mm, None, 2)["lr"] == pytest.approx(mm.spec["lr"])
    assert local_batch(30, 4) == 8 and local_batch(2, 4) == 1
    # AdaScale: no statistics yet -> gain 1; with them, 1 < gain < S = 4
    assert round_spec(rs, 64, 4)["lr"] == pytest.approx(rs.spec["lr"])
    gain = round_spec(rs, 64, 4, (_sample(),))["lr"] / rs.spec["lr"]
    grad = grad_of(_sample(), 16)
    assert grad is not None and 1.0 < gain < 4.0
    assert gain == pytest.approx((grad.var + grad.sqr) / (grad.var / 4 + grad.sqr))
    assert mm.spec["batch_size"] == 16  # the job itself is untouched


def test_a_workers_report_becomes_a_sample_and_reaches_policies_through_the_throughput_model():
    cluster = load_cluster("local-elastic")
    jobs = _elastic()
    placement = {"box": {"v100": 2}}
    rec = {
        "local_bsz": 8,
        "step_time": 0.1,
        "sync_time": 0.02,
        "replica_sqnorms": [3.0, 3.2],
        "mean_sqnorm": 2.0,
    }
    sample = sample_of(3, placement, 10, rec)
    assert sample == _sample(3, steps=10)
    assert IterationSample.from_json(sample.to_json()) == sample
    assert event_fields(sample)["batch_size"] == 16 and event_fields(None) == {}
    assert sample_of(3, placement, 0, rec) is None  # no step trained
    assert sample_of(3, placement, 10, {"step_time": 0.1}) is None  # malformed: dropped
    online = OnlineThroughput(throughput_for(jobs, cluster, load_table(None)))
    assert online.iterations(jobs[0]) == ()
    online.observe_iterations(0, sample)
    online.observe_iterations(0, _sample(1))
    online.observe_iterations(0, _sample(3, steps=5))  # the same round again replaces it
    assert [s.round for s in online.iterations(jobs[0])] == [1, 3]
    assert online.iterations(jobs[0])[-1].steps == 5 and online.iterations(jobs[1]) == ()
    # an elastic job is rated at the placement's GPU count, measured where it was measured
    one, four = {"box": {"v100": 1}}, {"box": {"v100": 4}}
    assert online.rate(jobs[0], four, cluster) > online.rate(jobs[0], one, cluster)
    online.observe(jobs[0], "box", 4, 7.0)
    assert online.rate(jobs[0], four, cluster) == pytest.approx(7.0)


def test_gradient_noise_from_one_replica_and_from_several_agree_on_synthetic_gradients():
    rng = np.random.default_rng(0)
    true_g = rng.normal(size=200)
    sigma = 3.0  # per-sample noise: a batch of b has covariance sigma^2 I / b
    b, k = 8, 4
    reps = true_g + rng.normal(scale=sigma / math.sqrt(b), size=(4000, k, 200))
    several = grad_of(
        _sample(
            gpus=k,
            local_bsz=b,
            replica_sqnorms=tuple((reps**2).sum(axis=2).mean(axis=0)),
            mean_sqnorm=float((reps.mean(axis=1) ** 2).sum(axis=1).mean()),
        ),
        b,
    )
    steps = true_g + rng.normal(scale=sigma / math.sqrt(b), size=(4000, 200))
    diffs = float(((steps[1:] - steps[:-1]) ** 2).sum(axis=1).mean())
    dots = float((steps[1:] * steps[:-1]).sum(axis=1).mean())
    one = grad_of(
        _sample(
            gpus=1, local_bsz=b, replica_sqnorms=(), mean_sqnorm=None, diff_sqnorm=diffs, dot=dots
        ),
        b,
    )
    assert several is not None and one is not None
    for est in (several, one):  # |G|^2 and tr(Sigma)/M0 = 200 sigma^2 / 8
        assert est.sqr == pytest.approx(float(true_g @ true_g), rel=0.1)
        assert est.var == pytest.approx(200 * sigma**2 / b, rel=0.1)


def test_the_worker_meter_reads_successive_gradients_of_one_replica():
    torch = pytest.importorskip("torch")
    from nodes.gradstats import GradMeter

    model = torch.nn.Linear(3, 1, bias=False)
    meter = GradMeter(world_size=1)
    grads = [
        torch.tensor([[1.0, 0.0, 0.0]]),
        torch.tensor([[0.0, 2.0, 0.0]]),
        torch.tensor([[1.0, 1.0, 0.0]]),
    ]
    for g in grads:
        model.weight.grad = g.clone()
        meter.after_backward(model, loss_scale=1.0)
    out = meter.summary(torch.device("cpu"))
    assert out["measured_steps"] == 3 and out["sync_time"] == 0.0
    assert out["diff_sqnorm"] == pytest.approx((5.0 + 2.0) / 2)  # |g2-g1|^2, |g3-g2|^2
    assert out["dot"] == pytest.approx((0.0 + 2.0) / 2)
    model.weight.grad = torch.tensor([[2.0, 0.0, 0.0]])
    meter.after_backward(model, loss_scale=2.0)  # the fp16 loss scale is divided out
    assert meter.summary(torch.device("cpu"))["dot"] == pytest.approx((0 + 2 + 1) / 3)
