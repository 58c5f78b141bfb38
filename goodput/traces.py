"""The simulator's ground truth for elastic jobs: Pollux's measured traces, replayed (Pollux §5.3).

Per application (``data/pollux/traces/<app>/``, see its ATTRIBUTION.md):

- *iteration time*: a placement measured in ``placements.csv`` is interpolated linearly in the
  local batch size; any other placement by multi-dimensional linear interpolation over
  (nodes, replicas, local batch) across the per-placement means and ``scalability.csv``, with the
  nearest measured point outside their convex hull;
- *gradient statistics* (``grad_sqr``, ``grad_var``): the row of the epoch the job's progress is
  in, interpolated linearly between the two measured batch sizes nearest the job's total batch;
- *progress*: in iterations at the initial batch size M0 (the smallest measured batch), as the
  traces count it; the completion target is the smallest final progress over the validation
  runs (the official simulator's rule with the artifact's epoch counts, which equal the rows of
  every validation file: every run reached the paper's Table 1 target).

The official simulator keys a placement by its lexicographically smallest rotation; here a
placement is its per-node GPU counts sorted ascending (our node order carries no meaning), which
the measured placements also cover.
"""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache, cached_property
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd

from goodput.applications import APPLICATIONS
from goodput.fit import FitResult, fit_perf_params
from goodput.model import GradParams, statistical_efficiency
from hadar.core.errors import InputError, shorten
from hadar.core.validation import read_text

MAX_LOCAL_BSZ = {"yolov3": 8}
"""Per-GPU batch limits below the largest measured one (the official simulator's: YOLOv3 fits 8
images per T4)."""

PLACEMENT_COLUMNS = ("placement", "local_bsz", "step_time", "sync_time")
SCALABILITY_COLUMNS = ("num_nodes", "num_replicas", "local_bsz", "step_time", "sync_time")
VALIDATION_COLUMNS = ("progress", "iteration", "metric", "grad_sqr", "grad_var")
_EPS = 1e-8
_VALIDATION_RE = re.compile(r"validation-(\d+)\.csv")


MAX_TRACE_VALUE = 1e30
"""The largest size of a measured value (times, batch sizes, iterations, gradient statistics):
far beyond any measurement, small enough that the fits' products stay finite (a local batch of
1e308 overflowed into an infinite error)."""


def read_checked_csv(
    path: Path, columns: tuple[str, ...], positive: tuple[str, ...], nonnegative: tuple[str, ...]
) -> pd.DataFrame:
    """A measurement table: the named columns present, every listed value a finite number, those
    in ``positive`` > 0 and those in ``nonnegative`` >= 0. A bad one is an InputError naming the
    file, the row (0-based, header excluded) and the field."""
    import io

    text = read_text(path, "trace file")
    try:
        frame = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        raise InputError(f"{path}: malformed CSV: {str(exc).splitlines()[0]}") from None
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise InputError(f"{path}: header: missing column(s) {', '.join(missing)}")
    if frame.empty:
        raise InputError(f"{path}: no rows")
    out: pd.DataFrame = pd.DataFrame(index=frame.index)
    for col in columns:
        values = pd.to_numeric(frame[col].str.strip(), errors="coerce").to_numpy(dtype=float)
        bad = ~np.isfinite(values) | (np.abs(values) > MAX_TRACE_VALUE)
        if col in positive:
            bad |= ~(values > 0)
        elif col in nonnegative:
            bad |= ~(values >= 0)
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            need = (
                "a number > 0"
                if col in positive
                else "a number >= 0"
                if col in nonnegative
                else "a finite number"
            ) + f" of at most {MAX_TRACE_VALUE:g} in size"
            raise InputError(
                f"{path}: row[{row}].{col}: must be {need} (got {shorten(frame[col].iloc[row])!r})"
            )
        out[col] = values
    return out


MAX_KEPT_HEADS = 4096
"""Knob: the candidate simplices kept per leading coordinates of a query (nodes, replicas) before
an interpolator starts afresh (exact answers only: starting afresh changes no result)."""


class LinearInterpolator:
    """Piecewise-linear interpolation over the Delaunay triangulation of scattered points (what
    scipy's LinearNDInterpolator computes), with the nearest point's values outside their convex
    hull. The barycentric transforms of all simplices are inverted at once with numpy, which on
    these grid-like points is over ten times faster than scipy's per-simplex set-up.

    The measured points lie on a grid, so the triangulation is not unique: a query on a shared
    face (an integer replica count often is) may lie in simplices that triangulate the same grid
    cell differently, whose linear interpolations differ. scipy returns whichever simplex its
    search meets first; here the mean over all simplices holding the query is returned, which
    depends on no search order.

    A query first keeps the simplices whose bounding box, widened by far more than the
    barycentric tolerance, holds it; the others cannot hold it, and the arithmetic on those kept is
    the same as on all (half the cost of a query on these traces, the same results)."""

    def __init__(self, points: np.ndarray, values: np.ndarray) -> None:
        from scipy.spatial import Delaunay  # only a Pollux workload's traces need it

        self.points, self.values = points, values
        tri = Delaunay(points)
        self.simplices = tri.simplices
        verts = points[tri.simplices]  # simplex x vertex x dim
        self.base = verts[:, -1, :]
        edges = np.transpose(verts[:, :-1, :] - self.base[:, None, :], (0, 2, 1))
        det = np.linalg.det(edges)
        scale = np.abs(edges).max(axis=(1, 2)) ** points.shape[1]
        self.valid = np.abs(det) > 1e-12 * np.maximum(scale, 1e-300)
        self.inverse = np.zeros_like(edges)
        self.inverse[self.valid] = np.linalg.inv(edges[self.valid])
        low, high = verts.min(axis=1), verts.max(axis=1)
        margin = 1e-6 * (high - low).max(axis=1, keepdims=True) + 1e-9
        self.low, self.high = low - margin, high + margin
        self._by_head: dict[tuple[float, ...], np.ndarray] = {}

    def _near(self, query: np.ndarray) -> np.ndarray:
        """The valid simplices whose widened bounding box holds ``query``, in ascending order:
        those holding its leading coordinates are kept by them (a trace's queries share their
        nodes and replicas across many local batches), then the last coordinate is tested."""
        head = tuple(query[:-1].tolist())
        kept = self._by_head.get(head)
        if kept is None:
            if len(self._by_head) >= MAX_KEPT_HEADS:
                self._by_head.clear()
            inside = (self.low[:, :-1] <= query[:-1]) & (query[:-1] <= self.high[:, :-1])
            kept = self._by_head[head] = np.flatnonzero(inside.all(axis=1) & self.valid)
        last = query[-1]
        near: np.ndarray = kept[(self.low[kept, -1] <= last) & (last <= self.high[kept, -1])]
        return near

    def __call__(self, query: np.ndarray) -> np.ndarray:
        near = self._near(query)
        bary = np.einsum("sij,sj->si", self.inverse[near], query[None, :] - self.base[near])
        last = 1.0 - bary.sum(axis=1)
        inside = np.all(bary >= -1e-9, axis=1) & (last >= -1e-9)
        hits = near[inside]
        if hits.size == 0:
            nearest = int(np.argmin(np.sum((self.points - query) ** 2, axis=1)))
            result: np.ndarray = self.values[nearest]
            return result
        weights = np.concatenate([bary[inside], last[inside, None]], axis=1)  # hit x vertex
        per_hit = np.einsum("hv,hvk->hk", weights, self.values[self.simplices[hits]])
        out: np.ndarray = per_hit.mean(axis=0)
        return out

    def many(self, queries: np.ndarray) -> np.ndarray:
        """``[query, value]``: each row of ``queries`` as :meth:`__call__` answers it, with the
        same arithmetic on each, the simplices of all queries handled together. (``__call__``
        keeps its own copy of these steps: through this method one query costs a third more;
        tests/goodput/test_traces.py holds the two equal bit for bit.)"""
        if len(queries) == 0:
            return np.empty((0, self.values.shape[1]))
        nears = [self._near(q) for q in queries]
        rows = np.concatenate(nears)
        owner = np.repeat(np.arange(len(queries)), [len(n) for n in nears])
        bary = np.einsum("sij,sj->si", self.inverse[rows], queries[owner] - self.base[rows])
        last = 1.0 - bary.sum(axis=1)
        inside = np.all(bary >= -1e-9, axis=1) & (last >= -1e-9)
        weights = np.concatenate([bary[inside], last[inside, None]], axis=1)  # hit x vertex
        per_hit = np.einsum("hv,hvk->hk", weights, self.values[self.simplices[rows[inside]]])
        cuts = np.searchsorted(owner[inside], np.arange(len(queries) + 1))
        out = np.empty((len(queries), self.values.shape[1]))
        for i, query in enumerate(queries):
            lo, hi = cuts[i], cuts[i + 1]
            if lo == hi:
                out[i] = self.values[int(np.argmin(np.sum((self.points - query) ** 2, axis=1)))]
            else:
                out[i] = per_hit[lo:hi].mean(axis=0)
        return out


@dataclass(frozen=True)
class ValidationRun:
    """One measured training run at total batch ``batch_size``: per epoch, the progress reached
    (iterations at M0) and the gradient statistics during that epoch."""

    batch_size: int
    progress: np.ndarray
    grad_sqr: np.ndarray
    grad_var: np.ndarray


@dataclass(frozen=True)
class TraceRate:
    """A job's true speed on one placement at one moment."""

    step_time: float  # seconds per iteration, accumulation passes included
    local_bsz: int  # samples per pass per GPU
    accum_steps: int
    batch_size: int  # total samples per iteration
    throughput: float  # samples per second
    efficiency: float  # statistical efficiency at batch_size relative to M0 (Eq. 6)

    @property
    def goodput(self) -> float:
        """Samples at M0 per second: throughput x efficiency."""
        return self.throughput * self.efficiency


@dataclass(eq=False)
class AppTrace:
    """One application's measurements and the interpolations over them (see module docs)."""

    name: str
    placements: pd.DataFrame  # placement (str), num_nodes, num_replicas, local_bsz, step, sync
    scalability: pd.DataFrame
    runs: tuple[ValidationRun, ...]  # ascending batch size
    max_local_bsz_limit: int | None = None
    _exact: dict[tuple[int, ...], tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    _nd: LinearInterpolator | None = None
    _cache: dict[tuple[tuple[int, ...], float], tuple[float, float]] = field(default_factory=dict)

    # -- the application's constants ---------------------------------------------------------
    @property
    def init_batch_size(self) -> int:
        """M0: the smallest measured batch size (the paper's Table 1)."""
        return self.runs[0].batch_size

    @property
    def max_batch_size(self) -> int:
        return self.runs[-1].batch_size

    @cached_property
    def min_local_bsz(self) -> int:
        """The smallest measured local batch per GPU (computed once, as the largest)."""
        return int(self.placements.local_bsz.min())

    @cached_property
    def measured_max_local_bsz(self) -> float:
        """The largest measured local batch per GPU, before ``max_local_bsz_limit``."""
        return float(self.placements.local_bsz.max())

    @cached_property
    def max_local_bsz(self) -> int:
        """The largest local batch per GPU (measured, within ``max_local_bsz_limit``); computed
        once: every rate query of a decision asks for it (a pandas reduction each time was half
        of an AFS decision)."""
        measured = int(self.measured_max_local_bsz)
        limit = self.max_local_bsz_limit
        return measured if limit is None else min(measured, limit)

    @cached_property
    def epoch_progress(self) -> np.ndarray:
        """Progress (iterations at M0) at the end of each epoch: the smallest over the runs
        (computed once, read-only)."""
        rows = min(len(r.progress) for r in self.runs)
        smallest: np.ndarray = np.min([r.progress[:rows] for r in self.runs], axis=0)
        smallest.flags.writeable = False
        return smallest

    @cached_property
    def _epoch_bounds(self) -> list[float]:
        """:attr:`epoch_progress` as a list, for the scalar look-ups of :meth:`grad_stats`."""
        return [float(x) for x in self.epoch_progress]

    @cached_property
    def _run_sizes(self) -> list[int]:
        """The runs' batch sizes, ascending."""
        return [r.batch_size for r in self.runs]

    @property
    def target_progress(self) -> float:
        """Completion target in iterations at M0."""
        return float(self.epoch_progress[-1])

    @property
    def target_samples(self) -> float:
        """Completion target in samples at M0."""
        return self.target_progress * self.init_batch_size

    # -- ground truth -----------------------------------------------------------------------
    def iteration_time(self, per_node: tuple[int, ...], local_bsz: float) -> tuple[float, float]:
        """(step time, sync time) in seconds of one pass on ``per_node`` GPUs per node at local
        batch ``local_bsz`` (clipped to the measured range)."""
        counts = tuple(sorted(c for c in per_node if c > 0))
        if not counts:
            raise ValueError("a placement needs at least one GPU")
        key = (counts, float(local_bsz))
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        exact = self._exact_placement(counts)
        if exact is not None:
            bsz, times = exact
            m = float(min(max(local_bsz, bsz[0]), bsz[-1]))
            step = float(np.interp(m, bsz, times[:, 0]))
            sync = float(np.interp(m, bsz, times[:, 1]))
        else:
            m = float(min(max(local_bsz, self.min_local_bsz), self.measured_max_local_bsz))
            step, sync = self._interpolate_nd(min(len(counts), 16), sum(counts), m)
        self._cache[key] = (step, sync)
        return step, sync

    def iteration_times(
        self, per_node: tuple[int, ...], local_bszs: Sequence[float]
    ) -> list[tuple[float, float]]:
        """:meth:`iteration_time` at each of ``local_bszs`` on one placement, the interpolations
        not yet known made at once (:meth:`LinearInterpolator.many`)."""
        counts = tuple(sorted(c for c in per_node if c > 0))
        todo = list(
            dict.fromkeys(float(b) for b in local_bszs if (counts, float(b)) not in self._cache)
        )
        if len(todo) > 1 and counts and self._exact_placement(counts) is None:
            head = [min(len(counts), 16), sum(counts)]
            clipped = [
                float(min(max(b, self.min_local_bsz), self.measured_max_local_bsz)) for b in todo
            ]
            out = self.interpolator().many(np.array([[*head, m] for m in clipped], dtype=float))
            for b, (step, sync) in zip(todo, out, strict=True):
                self._cache[(counts, b)] = (float(step), float(sync))
        return [self.iteration_time(per_node, b) for b in local_bszs]

    def _exact_placement(self, counts: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray] | None:
        if not self._exact:
            means = self.placements.groupby(["placement", "local_bsz"], as_index=False, sort=True)[
                ["step_time", "sync_time"]
            ].mean()
            ids = means.placement.to_numpy()
            bsz = means.local_bsz.to_numpy(dtype=float)
            times = means[["step_time", "sync_time"]].to_numpy(dtype=float)
            cuts = np.flatnonzero(ids[1:] != ids[:-1]) + 1
            for lo, hi in zip(np.r_[0, cuts], np.r_[cuts, len(ids)], strict=True):
                digits = tuple(sorted(int(ch) for ch in str(ids[lo])))
                self._exact[digits] = (bsz[lo:hi], times[lo:hi])
        return self._exact.get(counts)

    def prepare(self) -> AppTrace:
        """Builds the interpolation tables now (the triangulation of the measured points takes
        4-20 ms per application) rather than in whichever rate query first needs them, so that
        no policy's decision pays for a table another policy's run in the process would have
        built. Returns the trace."""
        self._exact_placement(())
        self.interpolator()
        return self

    def interpolator(self) -> LinearInterpolator:
        """Step and sync times over (nodes, replicas, local batch): the measured placements'
        means and the scalability points (built once)."""
        if self._nd is None:
            xs = ["num_nodes", "num_replicas", "local_bsz"]
            ys = ["step_time", "sync_time"]
            means = self.placements.groupby(xs, as_index=False)[ys].mean()
            points = pd.concat([means[xs + ys], self.scalability[xs + ys]], ignore_index=True)
            self._nd = LinearInterpolator(
                points[xs].to_numpy(dtype=float), points[ys].to_numpy(dtype=float)
            )
        interpolator: LinearInterpolator = self._nd
        return interpolator

    def _interpolate_nd(self, nodes: int, replicas: int, local_bsz: float) -> tuple[float, float]:
        out = self.interpolator()(np.array([nodes, replicas, local_bsz], dtype=float))
        return float(out[0]), float(out[1])

    def epoch_of(self, progress: float) -> int:
        """The epoch (row of the gradient statistics) that ``progress`` falls in; the last one
        at and beyond the target."""
        bounds = self._epoch_bounds
        return min(bisect.bisect_right(bounds, progress), len(bounds) - 1)

    def grad_stats(self, batch_size: float, progress: float) -> GradParams:
        """Gradient statistics at total batch ``batch_size`` during the epoch ``progress``
        (iterations at M0) falls in, interpolated between the two nearest measured batches."""
        epoch = self.epoch_of(progress)
        sizes = self._run_sizes
        b = float(min(max(batch_size, sizes[0]), sizes[-1]))
        hi = bisect.bisect_left(sizes, b)
        upper = self.runs[hi]
        if upper.batch_size == b or hi == 0:
            return GradParams(float(upper.grad_sqr[epoch]), float(upper.grad_var[epoch]))
        lower = self.runs[hi - 1]
        w = (b - lower.batch_size) / (upper.batch_size - lower.batch_size)
        sqr = (1 - w) * lower.grad_sqr[epoch] + w * upper.grad_sqr[epoch]
        var = (1 - w) * lower.grad_var[epoch] + w * upper.grad_var[epoch]
        return GradParams(float(sqr), float(var))

    def epoch_grad_arrays(self, batch_size: float) -> tuple[np.ndarray, np.ndarray]:
        """(sqr, var) of :meth:`grad_stats` at total batch ``batch_size`` for every measured
        epoch at once (element ``e``: during epoch ``e``), with the same arithmetic."""
        sizes = self._run_sizes
        b = float(min(max(batch_size, sizes[0]), sizes[-1]))
        hi = bisect.bisect_left(sizes, b)
        upper = self.runs[hi]
        if upper.batch_size == b or hi == 0:
            return upper.grad_sqr, upper.grad_var
        lower = self.runs[hi - 1]
        w = (b - lower.batch_size) / (upper.batch_size - lower.batch_size)
        sqr = (1 - w) * lower.grad_sqr + w * upper.grad_sqr
        var = (1 - w) * lower.grad_var + w * upper.grad_var
        return sqr, var

    def split_batch(self, num_replicas: int, batch_size: int) -> tuple[int, int]:
        """(local batch per pass, accumulation steps) for a fixed total batch on ``num_replicas``
        GPUs, as the official simulator configures TunedJobs: accumulate when the local batch
        exceeds the per-GPU limit (and at least once for one GPU above M0), never above the
        largest measured total batch."""
        local = math.ceil(batch_size / num_replicas - _EPS)
        accum = math.ceil(local / self.max_local_bsz - _EPS) - 1
        if num_replicas == 1 and batch_size > self.init_batch_size:
            accum = max(1, accum)
        atomic = math.ceil(local / (accum + 1) - _EPS)
        atomic = min(atomic, int(self.max_batch_size / (num_replicas * (accum + 1))))
        return max(atomic, 1), accum

    def pace(
        self, per_node: tuple[int, ...], batch_size: int
    ) -> tuple[float, int, int, int, float]:
        """(step time, local batch per pass, accumulation steps, total batch, sync time) at
        total batch ``batch_size`` (split as :meth:`split_batch`) on ``per_node`` GPUs per
        node: :meth:`rate` without the statistical efficiency."""
        replicas = sum(per_node)
        local, accum = self.split_batch(replicas, batch_size)
        step, sync = self.iteration_time(per_node, local)
        return _paced(step, sync, local, accum, replicas)

    def paces(
        self, per_node: tuple[int, ...], batch_sizes: Sequence[int]
    ) -> list[tuple[float, int, int, int, float]]:
        """:meth:`pace` at each of ``batch_sizes`` (their iteration times looked up at once)."""
        replicas = sum(per_node)
        splits = [self.split_batch(replicas, b) for b in batch_sizes]
        times = self.iteration_times(per_node, [local for local, _ in splits])
        return [
            _paced(step, sync, local, accum, replicas)
            for (step, sync), (local, accum) in zip(times, splits, strict=True)
        ]

    def rate(self, per_node: tuple[int, ...], batch_size: int, progress: float) -> TraceRate:
        """The job's true throughput and efficiency at total batch ``batch_size`` (split as
        :meth:`split_batch`) on ``per_node`` GPUs per node, ``progress`` iterations at M0 in."""
        total, local, accum, batch, _ = self.pace(per_node, batch_size)
        grad = self.grad_stats(batch, progress)
        eff = float(statistical_efficiency(grad, self.init_batch_size, batch))
        return TraceRate(total, local, accum, batch, batch / total, eff)


def _paced(
    step: float, sync: float, local: int, accum: int, replicas: int
) -> tuple[float, int, int, int, float]:
    """:meth:`AppTrace.pace`'s answer from one pass's step and sync times and the batch split."""
    return step + accum * (step - sync), local, accum, replicas * local * (accum + 1), sync


def _exact_text(value: float) -> str:
    """A placement as read (a whole number without a decimal point)."""
    return str(int(value)) if value == int(value) else repr(float(value))


def load_trace_dir(path: str | Path, name: str | None = None) -> AppTrace:
    """An application's traces from a folder (``placements.csv``, ``scalability.csv``,
    ``validation-<M>.csv``); bad tables are InputErrors naming file, row and field."""
    root = Path(path)
    app = name or root.name
    placements = read_checked_csv(
        root / "placements.csv",
        PLACEMENT_COLUMNS,
        positive=("placement", "local_bsz", "step_time"),
        nonnegative=("sync_time",),
    )
    placement_ids = placements.placement.astype(int).astype(str)
    for i, (pid, value) in enumerate(zip(placement_ids, placements.placement, strict=True)):
        if "0" in pid or value != int(value):  # 1.5 was read as 1
            raise InputError(
                f"{root / 'placements.csv'}: row[{i}].placement: per-node GPU counts 1-9 "
                f"(got {shorten(_exact_text(value))!r})"
            )
    placements["placement"] = placement_ids
    placements["num_nodes"] = placement_ids.str.len().astype(float)
    placements["num_replicas"] = placement_ids.map(lambda p: sum(int(c) for c in p)).astype(float)
    scalability = read_checked_csv(
        root / "scalability.csv",
        SCALABILITY_COLUMNS,
        positive=("num_nodes", "num_replicas", "local_bsz", "step_time"),
        nonnegative=("sync_time",),
    )
    runs = []
    for file in sorted(root.glob("validation-*.csv")):
        m = _VALIDATION_RE.fullmatch(file.name)
        if m is None:
            continue
        frame = read_checked_csv(
            file, VALIDATION_COLUMNS, positive=("progress",), nonnegative=("grad_var", "iteration")
        )
        runs.append(
            ValidationRun(
                int(m.group(1)),
                frame.progress.to_numpy(),
                frame.grad_sqr.to_numpy(),
                frame.grad_var.to_numpy(),
            )
        )
    if not runs:
        raise InputError(f"{root}: no validation-<batch size>.csv file")
    runs.sort(key=lambda r: r.batch_size)
    return AppTrace(app, placements, scalability, tuple(runs), MAX_LOCAL_BSZ.get(app))


@cache
def bundled_trace(name: str) -> AppTrace:
    """One of Pollux's six applications, from the package data (loaded once per process, its
    interpolation tables built: :meth:`AppTrace.prepare`)."""
    if name not in APPLICATIONS:
        raise InputError(f"unknown application {name!r} (known: {', '.join(APPLICATIONS)})")
    folder = resources.files("goodput").joinpath(f"data/pollux/traces/{name}")
    with resources.as_file(folder) as path:
        return load_trace_dir(path, name).prepare()


def measured_points(trace: AppTrace) -> pd.DataFrame:
    """Every measured iteration of ``trace`` (``placements.csv`` and ``scalability.csv``):
    columns num_nodes, num_replicas, local_bsz, step_time, sync_time."""
    cols = ["num_nodes", "num_replicas", "local_bsz", "step_time", "sync_time"]
    points: pd.DataFrame = pd.concat(
        [trace.placements[cols], trace.scalability[cols]], ignore_index=True
    )
    return points


def fit_application(trace: AppTrace) -> FitResult:
    """Pollux Eq. 11 fitted to all of ``trace``'s measured iterations (compute time = step time
    less synchronisation time), with its error on them."""
    points = measured_points(trace)
    compute = points.step_time - points.sync_time
    if (compute <= 0).any():
        row = int(np.flatnonzero((compute <= 0).to_numpy())[0])
        raise InputError(
            f"{trace.name}: measured point {row}: sync_time is not below step_time, so its "
            "compute time is not positive"
        )
    return fit_perf_params(
        points.num_nodes, points.num_replicas, points.local_bsz, points.step_time, compute
    )
