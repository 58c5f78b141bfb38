"""The throughput interface policies use, and Gavel's measured table behind it.

A job's rate on a placement is its *bottleneck* throughput: the slowest GPU type it uses, at its
gang size W, taken from the *unconsolidated* (multi-node) measurement when the placement spans
more than one node and the consolidated one otherwise. On a cluster that declares its network,
a multi-node placement's rates are those at its bottleneck bandwidth
(:meth:`ThroughputModel.multi_node_rates`; only estimated figures depend on it).
"""

from __future__ import annotations

import ast
import json
import math
from abc import ABC, abstractmethod
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Annotated, Any

import numpy as np
from pydantic import BeforeValidator, RootModel, ValidationError

from estimators.iterations import IterationSample
from hadar.core.cluster import Cluster
from hadar.core.errors import InputError, shorten
from hadar.core.gpu_catalogue import canonical_gpu
from hadar.core.jobs import Job, Placement, as_gang
from hadar.core.validation import MAX_GANG_GPUS, MAX_THROUGHPUT, MIN_THROUGHPUT, load_json

DEFAULT_UNCONSOLIDATED_PENALTY = 0.75
"""Knob: multi-node rate = this x consolidated rate, where the table has no unconsolidated entry."""

UNCONSOLIDATED_SUFFIX = "_unconsolidated"
"""Gavel's key suffix for multi-node measurements (``"v100_unconsolidated"``)."""


@dataclass(frozen=True, order=True)
class EstimatedCell:
    """One throughput figure a model had to estimate because the measured table lacks it."""

    job_type: str
    gpu_type: str
    num_gpus: int
    placement: str
    """``"consolidated"`` (the gang on one node) or ``"multi-node"``."""

    def describe(self) -> str:
        return f"{self.job_type} x{self.num_gpus} on {self.gpu_type} ({self.placement})"


@dataclass(frozen=True)
class RunRate:
    """A run's speed for one round: ``rate`` in the job's progress units per second (steps/s, or
    samples at the initial batch size per second for an elastic job with efficiency data, i.e.
    its goodput), and for elastic jobs what it is made of (None elsewhere)."""

    rate: float
    batch_size: int | None = None
    """Total batch size of one iteration."""
    throughput: float | None = None
    """Samples per second."""
    efficiency: float | None = None
    """Statistical efficiency of ``batch_size`` relative to the initial batch (Pollux Eq. 6)."""
    estimated: bool = False
    """Whether the figure is scaled from another GPU type's measurements."""
    step_rate: float | None = None
    """Where a bound lowered ``rate`` (forked copies under goodput accounting): the rate the
    steps accounting would credit; None when it equals ``rate``."""

    def __post_init__(self) -> None:
        if self.step_rate is None:
            object.__setattr__(self, "step_rate", self.rate)


class ThroughputModel(ABC):
    """Steps per second of a job on a placement."""

    learns: bool = False
    """Whether the model's rates change as a run goes (measurements refine them); a model that
    does not learn answers the same question the same way for the whole run."""

    @abstractmethod
    def cell_rates(self, job: Job, cluster: Cluster) -> tuple[np.ndarray, np.ndarray]:
        """Rates ``(consolidated, unconsolidated)``, each a ``[node, gpu type]`` float array.

        Cell (h, k) holds the whole gang's steps/s when its slowest GPU is a type-k GPU of node h
        (0 where the job cannot run there). Policies compute bottlenecks from these arrays.
        """

    def gang_rates(
        self, job: Job, width: int, batches: Sequence[int | None], cluster: Cluster
    ) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`cell_rates` of ``job`` as a gang of ``width`` GPUs at each total batch of
        ``batches`` (None: its own), stacked as ``[batch, node, gpu type]`` (an elastic job's
        configuration search, which a model may answer at once; this default: one by one)."""
        pairs = [self.cell_rates(as_gang(job, width, b), cluster) for b in batches]
        return np.stack([c for c, _ in pairs]), np.stack([u for _, u in pairs])

    def describe(self, job: Job, cluster: Cluster) -> str:
        """Where the figures for ``job`` come from (for reports)."""
        return type(self).__name__

    def rate_class(self, job: Job) -> Hashable:
        """A key equal for jobs whose :meth:`cell_rates` are equal (policies share one request
        per class). This default: the job type and gang size."""
        return (job.job_type, job.num_gpus)

    def rate(self, job: Job, placement: Placement, cluster: Cluster) -> float:
        """Bottleneck steps/s of ``job`` on ``placement`` (0 when it cannot run there)."""
        node_index, type_index = cluster.node_index, cluster.type_index
        used = [
            (node_index[node], type_index[gtype])
            for node, per_type in placement.items()
            for gtype, count in per_type.items()
            if count > 0
        ]
        if not used:
            return 0.0
        cons, uncons = self.cell_rates(job, cluster)
        on_nodes = sorted({h for h, _ in used})
        if len(on_nodes) == 1:
            return float(min(cons[h, k] for h, k in used))
        if cluster.network is None:
            return float(min(uncons[h, k] for h, k in used))
        gbps = cluster.network.bottleneck_gbps([cluster.node_names[h] for h in on_nodes])
        multi = self.multi_node_rates(job, cluster, gbps)
        return float(min(multi[h, k] for h, k in used))

    def run_rate(
        self,
        job: Job,
        placement: Placement,
        cluster: Cluster,
        done: float = 0.0,
        batch_size: int | None = None,
    ) -> RunRate:
        """The simulator's speed of ``job`` on ``placement`` when ``done`` progress units are
        behind it, at total batch ``batch_size`` (None: the job's own). This default is for
        models whose rate depends on neither: :meth:`rate`."""
        return RunRate(self.rate(job, placement, cluster))

    def run_rates(
        self,
        job: Job,
        placement: Placement,
        cluster: Cluster,
        done: float,
        batches: Sequence[int | None],
    ) -> list[RunRate]:
        """:meth:`run_rate` at each of ``batches`` on one placement at one progress point (a
        batch search's question, which a model may answer at once)."""
        return [self.run_rate(job, placement, cluster, done, b) for b in batches]

    def efficiency(self, job: Job, batch_size: int, done: float = 0.0) -> float | None:
        """Statistical efficiency of ``job`` at total batch ``batch_size`` when ``done`` progress
        units are behind it (Pollux Eq. 6), or None when the model has no efficiency data for
        it (this default: steps are steps)."""
        return None

    def progress_class(self, job: Job, done: float) -> Hashable:
        """A key equal for progress points at which :meth:`run_rate` gives ``job`` the same rate
        on every placement and batch (this default: ``done`` itself)."""
        return done

    def placement_class(self, job: Job, placement: Placement) -> Hashable:
        """A key equal for placements on which :meth:`run_rate` gives ``job`` the same rate at
        every progress and batch (this default: the placement itself, node by node)."""
        return tuple((node, tuple(sorted(per.items()))) for node, per in placement.items())

    def multi_node_rates(self, job: Job, cluster: Cluster, bandwidth_gbps: float) -> np.ndarray:
        """Multi-node ``[node, gpu type]`` rates of a placement whose nodes exchange data at
        ``bandwidth_gbps`` (its bottleneck on ``cluster.network``). This default is for models
        whose figures do not depend on the network (measured data is used as given): the
        unconsolidated rates of :meth:`cell_rates`."""
        return self.cell_rates(job, cluster)[1]

    def estimated_cells(self, jobs: Iterable[Job], cluster: Cluster) -> list[EstimatedCell]:
        """The figures for ``jobs`` on ``cluster`` that are estimates, not measurements (sorted)."""
        return []

    def reference_job_types(self) -> list[tuple[str, int]]:
        """(job type, W) pairs this model holds measurements for (sorted; [] when it measured
        nothing): the population over which GPU types can be ranked by measured speed."""
        return []

    def iterations(self, job: Job) -> tuple[IterationSample, ...]:
        """What workers measured of elastic ``job``'s rounds (iteration times, gradient
        statistics; ``estimators/iterations.py``), oldest first; () where nothing was measured
        (this default: simulations, whose policies read the ground truth)."""
        return ()

    def best_rate(self, job: Job, cluster: Cluster) -> float:
        """The fastest consolidated rate anywhere in ``cluster`` (for ideal durations)."""
        cons, uncons = self.cell_rates(job, cluster)
        return float(max(cons.max(initial=0.0), uncons.max(initial=0.0)))


@dataclass(frozen=True)
class TableKey:
    job_type: str
    gpu_type: str
    num_gpus: int
    consolidated: bool


class GavelThroughputTable(ThroughputModel):
    """Measured throughputs in Gavel's ``simulation_throughputs.json`` schema.

    The file maps a GPU type (``"v100"``, ``"v100_unconsolidated"``, ...) to keys
    ``"('Job type', W)"`` whose ``"null"`` entry is the isolated throughput in steps/s.
    """

    def __init__(
        self,
        table: Mapping[TableKey, float],
        source: str = "<table>",
        unconsolidated_penalty: float = DEFAULT_UNCONSOLIDATED_PENALTY,
    ) -> None:
        for k, v in table.items():
            if not 0 <= v < math.inf:
                where = k.gpu_type + ("" if k.consolidated else UNCONSOLIDATED_SUFFIX)
                raise InputError(
                    f"{source}: {where}: ({shorten(k.job_type)!r}, {k.num_gpus}): throughput "
                    f"must be finite and >= 0 (got {v!r})"
                )
        self._table = dict(table)
        self.source = source
        self.unconsolidated_penalty = unconsolidated_penalty
        self._cells: dict[tuple[str, int, str, tuple[int, ...]], tuple[np.ndarray, np.ndarray]] = {}
        """Per (job type, W, the cluster's GPU types, its ``[node, type]`` shape): the per-type
        figures broadcast to that shape (read-only views)."""
        self.job_types = frozenset(k.job_type for k in self._table)
        self.gpu_types = frozenset(k.gpu_type for k in self._table)

    # -- loading ---------------------------------------------------------------------------
    @classmethod
    def from_json(cls, data: Mapping[str, Any], source: str = "<json>") -> GavelThroughputTable:
        """Validate a parsed throughputs file (:class:`ThroughputFile`); errors name the file,
        the GPU type and the job key."""
        if not isinstance(data, Mapping):
            raise InputError(f"{source}: expected an object mapping GPU types to measurements")
        try:
            parsed = ThroughputFile.model_validate(data).root
        except ValidationError as exc:
            err = exc.errors()[0]
            loc = ": ".join(shorten(str(p)) for p in err["loc"] if p != "null")
            msg = err["msg"].removeprefix("Value error, ")
            if err["type"] in ("dict_type", "model_type"):
                msg = "expected an object of job keys" if len(err["loc"]) == 1 else msg
            raise InputError(f"{source}: {loc}: {msg}") from None
        table: dict[TableKey, float] = {}
        for raw_type, entries in parsed.items():
            if len(raw_type) > MAX_KEY_CHARS:
                raise InputError(
                    f"{source}: GPU type {shorten(raw_type)!r} is {len(raw_type):,} characters; "
                    f"at most {MAX_KEY_CHARS} are accepted"
                )
            multi_node = raw_type.endswith(UNCONSOLIDATED_SUFFIX)
            base = raw_type[: -len(UNCONSOLIDATED_SUFFIX)] if multi_node else raw_type
            gtype = canonical_gpu(base, field=f"{source}: {shorten(raw_type)}")
            for key, rate in entries.items():
                job_type, w = _parse_key(key, f"{source}: {shorten(raw_type)}")
                table[TableKey(job_type, gtype, w, not multi_node)] = rate
        if not table:
            raise InputError(f"{source}: no throughput measurements found")
        return cls(table, source=source)

    @classmethod
    def from_file(cls, path: str | Path) -> GavelThroughputTable:
        p = Path(path)
        return cls.from_json(load_json(p, "throughputs file"), source=str(p))

    @classmethod
    def bundled(cls) -> GavelThroughputTable:
        """Gavel's simulation throughputs for K80/P100/V100 shipped with the package (MIT)."""
        text = resources.files("estimators").joinpath("data/gavel_throughputs.json").read_text()
        return cls.from_json(json.loads(text), source="gavel_throughputs.json")

    # -- lookups ---------------------------------------------------------------------------
    def measured(
        self, job_type: str, gpu_type: str, num_gpus: int, consolidated: bool = True
    ) -> float | None:
        """The table's figure, or None when it has no such entry."""
        return self._table.get(TableKey(job_type, gpu_type, num_gpus, consolidated))

    def lookup(
        self, job_type: str, gpu_type: str, num_gpus: int, consolidated: bool = True
    ) -> float:
        """Rate with the documented fallback for a missing unconsolidated entry (0 if unknown)."""
        v = self.measured(job_type, gpu_type, num_gpus, consolidated)
        if v is None and not consolidated:
            base = self.measured(job_type, gpu_type, num_gpus, True)
            v = None if base is None else base * self.unconsolidated_penalty
        return 0.0 if v is None else v

    def reference_job_types(self) -> list[tuple[str, int]]:
        return sorted({(k.job_type, k.num_gpus) for k in self._table})

    def gang_sizes(self, job_type: str) -> set[int]:
        return {k.num_gpus for k in self._table if k.job_type == job_type}

    def cell_rates(self, job: Job, cluster: Cluster) -> tuple[np.ndarray, np.ndarray]:
        key = (job.job_type, job.num_gpus, ",".join(cluster.gpu_types), cluster.capacity.shape)
        hit = self._cells.get(key)
        if hit is None:
            per_type = [
                np.array([self.lookup(job.job_type, k, job.num_gpus, c) for k in cluster.gpu_types])
                for c in (True, False)
            ]
            cons, unc = (np.broadcast_to(a, key[3]) for a in per_type)
            hit = self._cells[key] = (cons, unc)
        return hit

    def describe(self, job: Job, cluster: Cluster) -> str:
        return f"measured ({self.source})"


def _measurement(value: Any) -> Any:
    """Gavel's ``{"null": rate, <co-location keys>...}`` entry (or a bare rate) -> the rate, checked:
    finite, and 0 (cannot run) or within [MIN_THROUGHPUT, MAX_THROUGHPUT] steps/s."""
    rate = value.get("null") if isinstance(value, Mapping) else value
    if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0 <= rate < math.inf:
        raise ValueError(f"throughput must be finite and >= 0 (got {rate!r})")
    if rate != 0 and not MIN_THROUGHPUT <= rate <= MAX_THROUGHPUT:
        raise ValueError(
            f"throughput must be 0 or within [{MIN_THROUGHPUT:g}, {MAX_THROUGHPUT:g}] steps/s "
            f"(got {rate!r})"
        )
    return float(rate)


ThroughputFile = RootModel[dict[str, dict[str, Annotated[float, BeforeValidator(_measurement)]]]]
"""Gavel's ``simulation_throughputs.json``: GPU type -> ``"('Job type', W)"`` -> measurement."""


MAX_KEY_CHARS = 400
"""The longest job key (``"('Job type', W)"``) or GPU type a throughputs file may have: a job
type is at most 200 characters, so a longer key is hostile (ast parses deep nesting by recursion:
5,000 unary minuses overflow it)."""


def _parse_key(key: str, where: str) -> tuple[str, int]:
    """``"('Job type', W)"`` -> ``('Job type', W)``; the key's length is checked before ast
    parses it, and every failure is one InputError line echoing at most the key's start."""
    if len(key) > MAX_KEY_CHARS:
        raise InputError(
            f"{where}: job key {shorten(key)!r} is {len(key):,} characters; at most "
            f"{MAX_KEY_CHARS} are accepted"
        )
    try:
        job_type, w = ast.literal_eval(key)
    except (ValueError, TypeError, SyntaxError, RecursionError, MemoryError):
        job_type = w = None
    if (
        not isinstance(job_type, str)
        or isinstance(w, bool)
        or not isinstance(w, int)
        or not 1 <= w <= MAX_GANG_GPUS
    ):
        raise InputError(
            f"{where}: bad job key {shorten(key)!r} (expected \"('Job type', W)\" with W in "
            f"1..{MAX_GANG_GPUS:,})"
        )
    return job_type, w
