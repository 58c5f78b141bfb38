"""The ground-truth trace model: Pollux's measurements replayed (interpolation, noise scale,
completion targets, TunedJobs batch split) and the checks on a trace folder."""

from __future__ import annotations

import shutil
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.interpolate import LinearNDInterpolator

from goodput import statistical_efficiency
from goodput.traces import (
    APPLICATIONS,
    LinearInterpolator,
    bundled_trace,
    fit_application,
    load_trace_dir,
)
from hadar.core.errors import InputError

# Pollux Table 1: the initial batch size M0 of each application
TABLE1_M0 = {
    "imagenet": 200,
    "yolov3": 8,
    "deepspeech2": 20,
    "bert": 12,
    "cifar10": 128,
    "ncf": 256,
}


def test_the_bundled_applications_start_at_the_papers_initial_batch_sizes():
    assert set(APPLICATIONS) == set(TABLE1_M0)
    for name, m0 in TABLE1_M0.items():
        trace = bundled_trace(name)
        assert trace.init_batch_size == m0
        finals = [run.progress[-1] for run in trace.runs]
        assert trace.target_progress == pytest.approx(min(finals))
        assert trace.target_samples == pytest.approx(trace.target_progress * m0)
    assert bundled_trace("yolov3").max_local_bsz == 8  # the official simulator's memory limit


def test_a_measured_placement_interpolates_linearly_in_the_local_batch():
    trace = bundled_trace("cifar10")
    rows = trace.placements[trace.placements.placement == "22"].sort_values("local_bsz")
    a, b = rows.iloc[0], rows.iloc[1]
    assert trace.iteration_time((2, 2), a.local_bsz) == pytest.approx((a.step_time, a.sync_time))
    mid = (a.local_bsz + b.local_bsz) / 2
    step, sync = trace.iteration_time((2, 2), mid)
    assert step == pytest.approx((a.step_time + b.step_time) / 2)
    assert sync == pytest.approx((a.sync_time + b.sync_time) / 2)
    # node order does not matter
    assert trace.iteration_time((1, 3), 64) == trace.iteration_time((3, 1), 64)


def test_our_linear_interpolator_equals_scipys_off_the_grid_and_falls_back_outside():
    rng = np.random.default_rng(3)
    points = rng.uniform(0, 10, size=(60, 3))
    values = rng.uniform(1, 2, size=(60, 2))
    ours, scipy_interp = LinearInterpolator(points, values), LinearNDInterpolator(points, values)
    for q in rng.uniform(2, 8, size=(40, 3)):
        expected = scipy_interp([q])[0]
        if np.all(np.isfinite(expected)):
            assert ours(q) == pytest.approx(expected, rel=1e-9)
    far = np.array([100.0, 100.0, 100.0])
    nearest = int(np.argmin(((points - far) ** 2).sum(axis=1)))
    assert ours(far) == pytest.approx(values[nearest])


def _every_simplex(interp: LinearInterpolator, query: np.ndarray) -> np.ndarray:
    """The interpolation over every simplex, without the bounding-box shortlist."""
    bary = np.einsum("sij,sj->si", interp.inverse, query[None, :] - interp.base)
    last = 1.0 - bary.sum(axis=1)
    hits = np.flatnonzero(interp.valid & np.all(bary >= -1e-9, axis=1) & (last >= -1e-9))
    if hits.size == 0:
        return interp.values[int(np.argmin(np.sum((interp.points - query) ** 2, axis=1)))]
    weights = np.concatenate([bary[hits], last[hits, None]], axis=1)
    return np.einsum("hv,hvk->hk", weights, interp.values[interp.simplices[hits]]).mean(axis=0)


@pytest.mark.parametrize("app", ["cifar10", "ncf"])
def test_the_shortlisted_simplices_give_what_every_simplex_gives(app):
    # grid-like measured points: queries on their faces and vertices lie in several simplices
    trace = bundled_trace(app)
    interp = trace.interpolator()
    rng = np.random.default_rng(5)
    low, high = interp.points.min(axis=0), interp.points.max(axis=0)
    queries = [*interp.points[::3]]
    queries += [
        np.array([n, r, m], dtype=float)
        for n in (1, 2, 3, 7)
        for r in (1, 4, 6, 16, 40)
        for m in np.unique(interp.points[:, 2])[::4]
    ]
    queries += [*rng.uniform(low - 1, high + 1, size=(300, 3))]
    for q in queries:
        assert np.array_equal(interp(q), _every_simplex(interp, q)), q


@pytest.mark.parametrize("app", ["cifar10", "ncf"])
def test_queries_answered_together_are_each_answered_alone_to_the_last_bit(app):
    interp = bundled_trace(app).interpolator()
    rng = np.random.default_rng(11)
    low, high = interp.points.min(axis=0), interp.points.max(axis=0)
    on_grid = [
        [n, r, m]
        for n in (1, 2, 7)
        for r in (1, 6, 40)
        for m in np.unique(interp.points[:, 2])[::5]
    ]
    queries = np.array(
        [*interp.points[::7], *on_grid, *rng.uniform(low - 1, high + 1, size=(200, 3))]
    )
    together = interp.many(queries)
    assert together.shape == (len(queries), interp.values.shape[1])
    for q, row in zip(queries, together, strict=True):
        assert np.array_equal(row, interp(q)), q
    assert interp.many(queries[:0]).shape == (0, interp.values.shape[1])


@pytest.mark.parametrize("app", ["cifar10", "imagenet", "bert"])
def test_paces_at_once_are_each_pace_alone(app):
    trace = bundled_trace(app)
    batches = sorted(
        {int(b) for b in np.geomspace(trace.init_batch_size, trace.max_batch_size, 30)}
    )
    for per_node in ((1,), (4,), (2, 2), (3, 3, 2), (4, 4, 4, 4, 4)):
        trace._cache.clear()  # every interpolation made by the call under test
        together = trace.paces(per_node, [*batches, batches[0]])
        trace._cache.clear()
        alone = [trace.pace(per_node, b) for b in [*batches, batches[0]]]
        assert together == alone, per_node


def test_the_candidates_kept_per_nodes_and_replicas_give_the_same_answers_after_a_reset(
    monkeypatch,
):
    import goodput.traces as traces

    interp = bundled_trace("yolov3").interpolator()
    heads = [(n, r) for n in (1, 2, 4) for r in (1, 2, 3, 8, 16)]
    queries = [np.array([n, r, m], dtype=float) for n, r in heads for m in (1.0, 3.5, 8.0)]
    fresh = [_every_simplex(interp, q) for q in queries]
    monkeypatch.setattr(traces, "MAX_KEPT_HEADS", 2)  # the kept candidates start afresh often
    for _ in range(2):
        for q, expected in zip(queries, fresh, strict=True):
            assert np.array_equal(interp(q), expected), q
    assert len(interp._by_head) <= 2


def test_an_unmeasured_placement_lies_within_the_measured_range():
    trace = bundled_trace("imagenet")
    step, sync = trace.iteration_time((4, 4, 4, 4, 4, 4), 100)  # 6 nodes: scalability.csv
    near = trace.scalability[(trace.scalability.num_replicas == 24)]
    assert near.step_time.min() * 0.5 < step < near.step_time.max() * 2
    assert 0 < sync < step


def test_gradient_statistics_follow_the_epoch_and_interpolate_between_batch_sizes():
    trace = bundled_trace("cifar10")
    small, large = trace.runs[0], trace.runs[1]  # 128 and 256
    assert trace.grad_stats(128, 0.0).sqr == pytest.approx(small.grad_sqr[0])
    epoch3 = trace.epoch_progress[2] + 1.0  # progress in the 4th epoch
    assert trace.grad_stats(256, epoch3).var == pytest.approx(large.grad_var[3])
    mid = trace.grad_stats(192, epoch3)
    assert mid.sqr == pytest.approx((small.grad_sqr[3] + large.grad_sqr[3]) / 2)
    assert trace.grad_stats(10**6, 1e12).sqr == pytest.approx(trace.runs[-1].grad_sqr[-1])


@pytest.mark.parametrize("batch", [128, 192, 256, 700, 10**6])
def test_every_epochs_statistics_at_once_are_each_epochs_own(batch):
    trace = bundled_trace("cifar10")
    sqr, var = trace.epoch_grad_arrays(batch)
    starts = [0.0, *trace.epoch_progress[:-1]]
    for epoch, start in enumerate(starts):
        one = trace.grad_stats(batch, start)
        assert (sqr[epoch], var[epoch]) == (one.sqr, one.var)


def test_tuned_jobs_split_their_batch_as_the_official_simulator():
    trace = bundled_trace("cifar10")  # local batch 32..1024
    assert trace.split_batch(4, 2048) == (512, 0)
    assert trace.split_batch(1, 512) == (256, 1)  # one GPU above M0 accumulates once
    assert trace.split_batch(1, 128) == (128, 0)
    yolo = bundled_trace("yolov3")  # at most 8 images per GPU
    assert yolo.split_batch(2, 64) == (8, 3)


def test_a_rate_is_throughput_times_the_efficiency_at_the_jobs_progress():
    trace = bundled_trace("deepspeech2")
    early, late = trace.rate((4,), 320, 0.0), trace.rate((4,), 320, trace.target_progress * 0.9)
    assert early.throughput == pytest.approx(late.throughput)
    assert early.batch_size == 320 and early.throughput == pytest.approx(320 / early.step_time)
    grad = trace.grad_stats(320, 0.0)
    assert early.efficiency == pytest.approx(float(statistical_efficiency(grad, 20, 320)))
    assert early.efficiency < late.efficiency <= 1.0
    assert early.goodput == pytest.approx(early.throughput * early.efficiency)
    step, local, accum, batch, sync = trace.pace((4,), 320)
    assert (step, local, accum, batch) == (
        early.step_time,
        early.local_bsz,
        early.accum_steps,
        early.batch_size,
    )
    assert sync == trace.iteration_time((4,), local)[1]


def test_the_fitted_model_is_within_ten_percent_on_its_own_points():
    fit = fit_application(bundled_trace("yolov3"))
    assert fit.converged and fit.num_points == 648
    assert fit.median_rel_error <= 0.10


def _copy_app(tmp_path: Path, name: str = "bert") -> Path:
    src = resources.files("goodput").joinpath(f"data/pollux/traces/{name}")
    dest = tmp_path / name
    with resources.as_file(src) as folder:
        shutil.copytree(folder, dest)
    return dest


@pytest.mark.parametrize(
    ("file", "edit", "message"),
    [
        (
            "placements.csv",
            lambda f: f.drop(columns="sync_time"),
            "header: missing column(s) sync_time",
        ),
        (
            "placements.csv",
            lambda f: f.assign(step_time=f.step_time.where(f.index != 7)),
            "row[7].step_time",
        ),
        (
            "scalability.csv",
            lambda f: f.assign(sync_time=f.sync_time.where(f.index != 2, -1.0)),
            "row[2].sync_time: must be a number >= 0",
        ),
        (
            "validation-12.csv",
            lambda f: f.assign(grad_var=f.grad_var.where(f.index != 1, "x")),
            "row[1].grad_var",
        ),
        (  # a 5,000-digit value is echoed cut
            "placements.csv",
            lambda f: f.astype({"step_time": object}).assign(
                step_time=f.step_time.astype(object).where(f.index != 3, "9" * 5000)
            ),
            "row[3].step_time: must be a number > 0 of at most",
        ),
    ],
)
def test_a_bad_trace_table_is_one_line_naming_file_row_and_field(tmp_path, file, edit, message):
    folder = _copy_app(tmp_path)
    path = folder / file
    edit(pd.read_csv(path)).to_csv(path, index=False)
    with pytest.raises(InputError) as err:
        load_trace_dir(folder)
    text = str(err.value)
    assert "\n" not in text and str(path) in text and message in text
    assert len(text) < 400 + len(str(path)), text


def test_the_constants_every_rate_query_reads_are_computed_once_and_read_only():
    trace = bundled_trace("cifar10")
    progress = trace.epoch_progress
    assert trace.epoch_progress is progress  # one array, not a new reduction per query
    assert np.array_equal(
        progress,
        np.min([r.progress[: min(len(x.progress) for x in trace.runs)] for r in trace.runs], 0),
    )
    with pytest.raises(ValueError):
        progress[0] = -1.0  # a caller cannot change every later query's epochs
    assert trace.max_local_bsz == min(
        int(trace.placements.local_bsz.max()),
        trace.max_local_bsz_limit or int(trace.placements.local_bsz.max()),
    )
