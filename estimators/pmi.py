"""Cold-start throughput estimate: the PMI/PCIe expression of Eq. 10 (HadarE, section V-A).

In samples per second, for job j on a type-k GPU of node h::

    PMI_k    = TFLOPS_k x sqrt(VRAM_k in GB)
    X^[j][h] = X_ref[j] x (PMI_k / PMI_ref)^alpha x pcie(gen_h) x batch(B_j) / (weight(m_j) x size(d_j))

and ``steps/s = samples/s / B_j``. ``X_ref`` is an *anchor*: a throughput measured (or assumed)
under known conditions: a GPU type, a PCIe generation, a batch size, a weight class and a
dataset class. Every factor is applied as a ratio against the anchor's own condition, so a
factor whose condition matches the anchor drops out. With a measured anchor of the same job, only
the PMI and PCIe ratios (and the gang-size scaling) remain. With the generic prior, which is a
"unit" job (small model, S dataset, ``batch_reference``, one GPU on the reference GPU at
``reference_pcie_gen``), the expression is exactly the paper's. See ``docs/estimators.md``.

Anchor search, first hit wins (measurements of 0 mean "cannot run there" and are never anchors):
candidates are the job's own type, then the other members of its *family* (e.g. ``ResNet-18``
at other batch sizes) nearest in batch size first; for each, a one-GPU measurement (then the
W-GPU one; ``gang_anchor`` flips this) on the target GPU type itself, the reference GPU type,
then the other measured types by closeness of PMI to the target; failing all, the generic prior.
W > 1 scales by the gang-scaling knob; multi-node placements are bounded by the network (see
:meth:`PmiEstimator.estimate`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, TypeVar

import numpy as np

from estimators.throughput import (
    DEFAULT_UNCONSOLIDATED_PENALTY,
    EstimatedCell,
    GavelThroughputTable,
    ThroughputModel,
)
from hadar.core.cluster import Cluster
from hadar.core.errors import InputError
from hadar.core.gpu_catalogue import GpuSpec, canonical_gpu, catalogue
from hadar.core.job_profile import (
    DATASET_CLASSES,
    FAMILIES,
    WEIGHT_CLASSES,
    JobProfile,
    job_profile,
    parse_job_type,
)
from hadar.core.jobs import Job

REFERENCE_NETWORK_GBPS = 10.0
"""Assumed bandwidth of the network behind Gavel's ``*_unconsolidated`` figures: 10 Gbit/s
Ethernet, what AWS gives the p2/p3 instance sizes of up to 8 GPUs (p2.8xlarge, p3.8xlarge) its
hosts were. Gavel's data does not state it; see docs/estimators.md, "The network"."""


K = TypeVar("K")
V = TypeVar("V")

_EstimateKey = tuple[str, JobProfile, int, str, int, bool, "float | None"]
"""An estimate's cache key: job type, profile, W, GPU type, PCIe generation, consolidated,
bandwidth."""

_CellKey = tuple[
    str, JobProfile, int, tuple[str, ...], tuple[int, ...], "tuple[float, ...] | float | None"
]
"""A cluster's grid cache key: job type, profile, W, GPU types, PCIe generations, network."""


def _frozen(d: Mapping[K, V]) -> Mapping[K, V]:
    return MappingProxyType(dict(d))


@dataclass(frozen=True)
class PmiParams:
    """Every constant of Eq. 10 (knobs). Defaults and their reasons: ``docs/estimators.md``."""

    reference_gpu: str = "v100"
    """GPU type whose measurement is X_ref (Gavel measured V100, P100 and K80)."""
    reference_pcie_gen: int = 3
    """PCIe generation under which reference measurements were taken (Gavel's AWS p2/p3 hosts)."""
    tensor_weight: float = 0.0
    """TFLOPS used in PMI = fp32^(1-w) x tensor^w (tensor = fp32 where the GPU has no tensor
    cores). 0 = FP32 only (best on Gavel's FP32-trained table), 1 = tensor-core figure."""
    pmi_exponent: float = 1.0
    """alpha: the PMI ratio is raised to this power (1 = the paper's linear form)."""
    pcie_factors: Mapping[int, float] = field(
        default_factory=lambda: _frozen({1: 0.85, 2: 0.93, 3: 1.0, 4: 1.03, 5: 1.05})
    )
    """pcie(gen) by the node's effective PCIe generation (min of motherboard and GPU)."""
    batch_reference: int = 32
    """Batch size at which batch() = 1."""
    batch_exponent: float = 0.3
    """batch(B) = (B / batch_reference)^beta: per-sample throughput rising with batch size."""
    weight_factors: Mapping[str, float] = field(
        default_factory=lambda: _frozen(
            {"small": 1.0, "modest": 1.5, "high": 3.0, "extra-high": 6.0}
        )
    )
    """weight(model class): divides throughput."""
    dataset_factors: Mapping[str, float] = field(
        default_factory=lambda: _frozen({"S": 1.0, "M": 1.25, "L": 1.5, "XL": 2.0})
    )
    """size(dataset class): divides throughput."""
    prior_samples_per_s: float = 1900.0
    """Generic prior: samples/s of a unit job (small, S, batch_reference, 1 GPU) on the
    reference GPU. Used only when neither the job nor its family is in the table."""
    scaling_efficiency: float = 0.85
    """Per doubling of the gang: X(W) = X(1) x W x eff^log2(W) when W is not measured."""
    gang_anchor: str = "single"
    """For W > 1: "single" scales a one-GPU anchor by the gang scaling (the W-GPU figure of
    another GPU type carries that type's interconnect, e.g. NVLink on Gavel's 8-V100 hosts);
    "exact" prefers a W-GPU anchor of any GPU type. Either falls back to the other."""
    network_bound: bool = True
    """Multi-node rate = min(consolidated estimate, an anchor's network-bound unconsolidated
    rate); False: always consolidated estimate x unconsolidated_penalty."""
    unconsolidated_penalty: float = DEFAULT_UNCONSOLIDATED_PENALTY
    """Multi-node rate = this x consolidated rate when no unconsolidated anchor exists."""
    reference_network_gbps: float = REFERENCE_NETWORK_GBPS
    """Bandwidth (Gbit/s) of the network the table's unconsolidated figures were measured on;
    on a cluster that declares its network, a multi-node estimate's network rate scales by the
    placement's bottleneck bandwidth / this (see :meth:`PmiEstimator.estimate`)."""

    def __post_init__(self) -> None:
        object.__setattr__(
            self, "reference_gpu", canonical_gpu(self.reference_gpu, "reference_gpu")
        )
        for name in ("pcie_factors", "weight_factors", "dataset_factors"):
            object.__setattr__(self, name, _frozen(getattr(self, name)))
        _positive("prior_samples_per_s", self.prior_samples_per_s)
        _positive("pmi_exponent", self.pmi_exponent)
        _positive("batch_reference", self.batch_reference)
        _positive("reference_network_gbps", self.reference_network_gbps)
        if not 0.0 <= self.tensor_weight <= 1.0:
            raise InputError(f"tensor_weight: must be in [0, 1] (got {self.tensor_weight!r})")
        if not 0.0 <= self.batch_exponent <= 1.0:
            raise InputError(f"batch_exponent: must be in [0, 1] (got {self.batch_exponent!r})")
        if self.gang_anchor not in ("single", "exact"):
            raise InputError(f"gang_anchor: must be 'single' or 'exact' (got {self.gang_anchor!r})")
        for name in ("scaling_efficiency", "unconsolidated_penalty"):
            v = getattr(self, name)
            if not 0.0 < v <= 1.0:
                raise InputError(f"{name}: must be in (0, 1] (got {v!r})")
        if (
            isinstance(self.reference_pcie_gen, bool)
            or not isinstance(self.reference_pcie_gen, int)
            or self.reference_pcie_gen < 1
        ):
            raise InputError(
                f"reference_pcie_gen: must be an integer >= 1 (got {self.reference_pcie_gen!r})"
            )
        if not self.pcie_factors:
            raise InputError("pcie_factors: needs at least one generation")
        try:
            pcie = {int(g): v for g, v in self.pcie_factors.items()}
        except (TypeError, ValueError):
            raise InputError(
                f"pcie_factors: generations must be integers (got {list(self.pcie_factors)})"
            ) from None
        object.__setattr__(self, "pcie_factors", _frozen(pcie))
        for gen, v in pcie.items():
            _positive(f"pcie_factors[{gen}]", v)
        _non_decreasing(
            "pcie_factors",
            [pcie[g] for g in sorted(pcie)],
            "a newer PCIe generation must not be slower",
        )
        for name, classes in (
            ("weight_factors", WEIGHT_CLASSES),
            ("dataset_factors", DATASET_CLASSES),
        ):
            table = getattr(self, name)
            missing = [c for c in classes if c not in table]
            if missing:
                raise InputError(f"{name}: missing class {missing[0]!r}")
            for c, v in table.items():
                _positive(f"{name}[{c}]", v)
            _non_decreasing(name, [table[c] for c in classes], "a heavier class must not be faster")

    # -- the factors of Eq. 10 ---------------------------------------------------------------
    def tflops(self, spec: GpuSpec) -> float:
        """The TFLOPS figure of PMI: FP32, tensor-core, or their geometric blend (``tensor_weight``)."""
        tensor = spec.tensor_tflops if spec.tensor_tflops > 0 else spec.fp32_tflops
        return float(spec.fp32_tflops ** (1.0 - self.tensor_weight) * tensor**self.tensor_weight)

    def pmi(self, spec: GpuSpec) -> float:
        """PMI_k = TFLOPS_k x sqrt(VRAM_k in GB)."""
        return self.tflops(spec) * math.sqrt(spec.memory_gb)

    def pcie(self, gen: int) -> float:
        """pcie(gen); beyond the listed generations the nearest end, between them the next lower one."""
        gens = sorted(self.pcie_factors)
        g = min(max(int(gen), gens[0]), gens[-1])
        if g in self.pcie_factors:
            return float(self.pcie_factors[g])
        lower = max(x for x in gens if x < g)
        return float(self.pcie_factors[lower])

    def batch(self, batch_size: int | None) -> float:
        """batch(B): per-sample throughput factor, 1 at ``batch_reference``."""
        b = self.batch_reference if batch_size is None else batch_size
        return float((b / self.batch_reference) ** self.batch_exponent)

    def gang_scale(self, num_gpus: int) -> float:
        """Whole-gang rate of W GPUs relative to one GPU: W x eff^log2(W)."""
        return float(num_gpus * self.scaling_efficiency ** math.log2(num_gpus))

    def job_factor(self, profile: JobProfile) -> float:
        """batch(B) / (weight x size), converted to steps/s (divided by B / batch_reference)."""
        b = self.batch_reference if profile.batch_size is None else profile.batch_size
        per_sample = self.batch(profile.batch_size) / (
            self.weight_factors[profile.weight_class] * self.dataset_factors[profile.dataset_class]
        )
        return per_sample * self.batch_reference / b

    def as_dict(self) -> dict[str, Any]:
        """Plain-JSON view of the knobs (for reports)."""
        return {
            "reference_gpu": self.reference_gpu,
            "reference_pcie_gen": self.reference_pcie_gen,
            "tensor_weight": self.tensor_weight,
            "pmi_exponent": self.pmi_exponent,
            "pcie_factors": {str(k): v for k, v in sorted(self.pcie_factors.items())},
            "batch_reference": self.batch_reference,
            "batch_exponent": self.batch_exponent,
            "weight_factors": dict(self.weight_factors),
            "dataset_factors": dict(self.dataset_factors),
            "prior_samples_per_s": self.prior_samples_per_s,
            "scaling_efficiency": self.scaling_efficiency,
            "gang_anchor": self.gang_anchor,
            "network_bound": self.network_bound,
            "unconsolidated_penalty": self.unconsolidated_penalty,
            "reference_network_gbps": self.reference_network_gbps,
        }


def _non_decreasing(name: str, values: list[float], why: str) -> None:
    if any(b < a for a, b in zip(values, values[1:], strict=False)):
        raise InputError(f"{name}: must not decrease along the order ({why})")


def _positive(name: str, v: float) -> None:
    if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
        raise InputError(f"{name}: must be a positive number (got {v!r})")


# -- the estimator -----------------------------------------------------------------------------
@dataclass(frozen=True)
class Anchor:
    """The measurement (or prior) an estimate scales from."""

    kind: str  # "own" | "family" | "prior"
    job_type: str
    gpu_type: str
    num_gpus: int
    consolidated: bool
    value: float
    profile: JobProfile


@dataclass(frozen=True)
class Estimate:
    """One cold-start figure (whole-gang steps/s) and what it was scaled from."""

    value: float
    anchor: Anchor
    network: Anchor | None = None
    """Multi-node only: the unconsolidated measurement that bounds the rate (None: penalty knob)."""

    @property
    def source(self) -> str:
        a = self.anchor
        text = (
            "generic prior"
            if a.kind == "prior"
            else f"{a.kind} measurement {a.job_type} on {a.gpu_type} x{a.num_gpus}"
        )
        n = self.network
        if n is not None:
            text += (
                f", network bound from {n.job_type} on {n.gpu_type} x{n.num_gpus} (unconsolidated)"
            )
        return text


class PmiEstimator(ThroughputModel):
    """Eq. 10 over a table of anchor measurements (None: generic prior only)."""

    def __init__(
        self, table: GavelThroughputTable | None = None, params: PmiParams | None = None
    ) -> None:
        self.table = table
        self.params = params or PmiParams()
        cat = catalogue()
        self._pmi = {gid: self.params.pmi(spec) for gid, spec in cat.items()}
        self._gpu_pcie = {gid: spec.pcie_gen for gid, spec in cat.items()}
        self._members: dict[str, list[tuple[str, int | None]]] = {}
        if table is not None:
            for jt in sorted(table.job_types):
                fam, batch = parse_job_type(jt)
                if fam is not None:
                    self._members.setdefault(fam, []).append((jt, batch))
        self._cache: dict[_EstimateKey, Estimate] = {}
        self._cells: dict[_CellKey, tuple[np.ndarray, np.ndarray]] = {}
        self._multi: dict[_CellKey, np.ndarray] = {}

    @classmethod
    def bundled(cls, params: PmiParams | None = None) -> PmiEstimator:
        """Anchored on Gavel's bundled K80/P100/V100 table."""
        return cls(GavelThroughputTable.bundled(), params)

    def pmi(self, gpu_type: str) -> float:
        return self._pmi[canonical_gpu(gpu_type)]

    def effective_pcie(self, node_gen: int, gpu_type: str) -> int:
        """A link runs at the older of the motherboard's and the GPU's PCIe generation."""
        return min(int(node_gen), self._gpu_pcie[gpu_type])

    # -- anchors -----------------------------------------------------------------------------
    def _gpu_order(self, target: str) -> list[str]:
        assert self.table is not None
        first = [
            g
            for g in dict.fromkeys((target, self.params.reference_gpu))
            if g in self.table.gpu_types
        ]
        others = sorted(
            (g for g in self.table.gpu_types if g not in first),
            key=lambda g: (_log_distance(self._pmi[g], self._pmi[target]), g),
        )
        return first + others

    def _candidates(self, job_type: str, profile: JobProfile) -> list[tuple[str, str, JobProfile]]:
        """(kind, job type, its profile): the job itself, then its family nearest in batch size."""
        out = [("own", job_type, profile)]
        if profile.family is not None:
            fam = FAMILIES[profile.family]
            ref_b = self.params.batch_reference
            b = profile.batch_size or ref_b
            members = sorted(
                (m for m in self._members.get(profile.family, []) if m[0] != job_type),
                key=lambda m: (abs(math.log((m[1] or ref_b) / b)), m[1] or 0),
            )
            out += [
                ("family", jt, JobProfile(profile.family, mb, fam.weight_class, fam.dataset_class))
                for jt, mb in members
            ]
        return out

    def anchor(self, job_type: str, profile: JobProfile, num_gpus: int, target: str) -> Anchor:
        """The consolidated anchor for (job, target GPU, W); see the module docstring."""
        if self.table is not None:
            sizes = (1, num_gpus) if self.params.gang_anchor == "single" else (num_gpus, 1)
            for kind, jt, prof in self._candidates(job_type, profile):
                for w in dict.fromkeys(sizes):
                    for g in self._gpu_order(target):
                        v = self.table.measured(jt, g, w, True)
                        if v is not None and v > 0:
                            return Anchor(kind, jt, g, w, True, v, prof)
        p = self.params
        unit = JobProfile(None, p.batch_reference, "small", "S")
        return Anchor(
            "prior",
            "unit job",
            p.reference_gpu,
            1,
            True,
            p.prior_samples_per_s / p.batch_reference,
            unit,
        )

    def network_anchor(
        self, job_type: str, profile: JobProfile, num_gpus: int, target: str
    ) -> tuple[Anchor, float] | None:
        """An unconsolidated measurement at W with its consolidated twin on the same GPU type:
        ``(unconsolidated anchor, consolidated figure)``; None when the table has none."""
        if self.table is None:
            return None
        for kind, jt, prof in self._candidates(job_type, profile):
            for g in self._gpu_order(target):
                u = self.table.measured(jt, g, num_gpus, False)
                c = self.table.measured(jt, g, num_gpus, True)
                if u is not None and c is not None and u > 0 and c > 0:
                    return Anchor(kind, jt, g, num_gpus, False, u, prof), c
        return None

    # -- estimates ---------------------------------------------------------------------------
    def estimate(
        self,
        job: Job | str,
        gpu_type: str,
        *,
        num_gpus: int | None = None,
        pcie_gen: int | None = None,
        consolidated: bool = True,
        bandwidth_gbps: float | None = None,
    ) -> Estimate:
        """Eq. 10 for one (job, GPU type, node PCIe generation, gang size, placement).

        Multi-node (``consolidated=False``, W > 1): gradient exchange overlaps computation, so
        the rate is ``min(consolidated estimate, network-bound rate)``, the network bound being
        an anchor's unconsolidated figure when it fell below its consolidated one (it does not
        depend on the GPU; a family member of another weight class is scaled by the weight
        ratio). Without such an anchor: consolidated estimate x ``unconsolidated_penalty``.

        ``bandwidth_gbps`` (the placement's bottleneck on a declared network; None: the
        reference network) scales the network rate N by ``bandwidth / reference_network_gbps``:
        ``min(compute, N x bandwidth / reference)``, with N the bound above when the anchor was
        network-bound, the larger of bound and compute when it was not (its network rate was at
        least that), compute x penalty without an anchor. At the reference bandwidth each case
        is the figure without it.
        """
        gpu = canonical_gpu(gpu_type)
        job_type = job if isinstance(job, str) else job.job_type
        w = num_gpus if num_gpus is not None else (1 if isinstance(job, str) else job.num_gpus)
        if isinstance(w, bool) or not isinstance(w, int) or w < 1:
            raise InputError(f"job type {job_type!r}: num_gpus must be an integer >= 1 (got {w!r})")
        profile = job_profile(job) if isinstance(job, str) else job.profile
        gen = self.params.reference_pcie_gen if pcie_gen is None else int(pcie_gen)
        cons = consolidated or w == 1
        if bandwidth_gbps is not None and not (
            math.isfinite(bandwidth_gbps) and bandwidth_gbps > 0
        ):
            raise InputError(
                f"bandwidth_gbps: must be a finite number > 0 (got {bandwidth_gbps!r})"
            )
        scaled = bandwidth_gbps is not None and not cons
        key = (job_type, profile, w, gpu, gen, cons, bandwidth_gbps if scaled else None)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        p = self.params
        if cons:
            a = self.anchor(job_type, profile, w, gpu)
            x = a.value
            x *= p.job_factor(profile) / p.job_factor(a.profile)
            x *= (self._pmi[gpu] / self._pmi[a.gpu_type]) ** p.pmi_exponent
            x *= p.pcie(self.effective_pcie(gen, gpu)) / p.pcie(
                self.effective_pcie(p.reference_pcie_gen, a.gpu_type)
            )
            x *= p.gang_scale(w) / p.gang_scale(a.num_gpus)
            est = Estimate(float(x), a)
        else:
            base = self.estimate(job, gpu, num_gpus=w, pcie_gen=gen, consolidated=True)
            net = self.network_anchor(job_type, profile, w, gpu) if p.network_bound else None
            if net is None:
                network_rate = base.value * p.unconsolidated_penalty
                est = Estimate(network_rate, base.anchor)
            else:
                n, twin = net
                bound = (
                    n.value
                    * p.weight_factors[n.profile.weight_class]
                    / p.weight_factors[profile.weight_class]
                )
                network_bound = n.value < twin
                value = min(base.value, bound) if network_bound else base.value
                network_rate = bound if network_bound else max(bound, base.value)
                est = Estimate(float(value), base.anchor, n)
            if scaled:
                assert bandwidth_gbps is not None
                at_bandwidth = network_rate * (bandwidth_gbps / p.reference_network_gbps)
                est = replace(est, value=float(min(base.value, at_bandwidth)))
        self._cache[key] = est
        return est

    def _key(
        self, job: Job, cluster: Cluster, network: tuple[float, ...] | float | None
    ) -> _CellKey:
        pcie = tuple(n.pcie_gen for n in cluster.nodes)
        return (job.job_type, job.profile, job.num_gpus, cluster.gpu_types, pcie, network)

    def _grid(
        self, job: Job, cluster: Cluster, consolidated: bool, bandwidths: Sequence[float | None]
    ) -> np.ndarray:
        """``[node, gpu type]`` estimates (read-only), node h's multi-node ones at bandwidths[h]."""
        out = np.array(
            [
                [
                    self.estimate(
                        job,
                        gpu,
                        pcie_gen=node.pcie_gen,
                        consolidated=consolidated,
                        bandwidth_gbps=bw,
                    ).value
                    for gpu in cluster.gpu_types
                ]
                for node, bw in zip(cluster.nodes, bandwidths, strict=True)
            ],
            dtype=float,
        ).reshape(cluster.capacity.shape)
        out.setflags(write=False)
        return out

    def cell_rates(self, job: Job, cluster: Cluster) -> tuple[np.ndarray, np.ndarray]:
        """Consolidated and multi-node estimates per cell. On a cluster that declares its
        network, a cell's multi-node figure is at its node's NIC bandwidth: the most a placement
        using that node can reach, reached when the gang stays within one rack."""
        net = cluster.network
        nics = net.nics(cluster.node_names) if net is not None else None
        key = self._key(job, cluster, nics)
        hit = self._cells.get(key)
        if hit is None:
            none: list[float | None] = [None] * len(cluster.nodes)
            hit = (
                self._grid(job, cluster, True, none),
                self._grid(job, cluster, False, none if nics is None else list(nics)),
            )
            self._cells[key] = hit
        return hit

    def multi_node_rates(self, job: Job, cluster: Cluster, bandwidth_gbps: float) -> np.ndarray:
        key = self._key(job, cluster, bandwidth_gbps)
        hit = self._multi.get(key)
        if hit is None:
            hit = self._grid(job, cluster, False, [bandwidth_gbps] * len(cluster.nodes))
            self._multi[key] = hit
        return hit

    def estimated_cells(self, jobs: Iterable[Job], cluster: Cluster) -> list[EstimatedCell]:
        """Every figure: this model measures nothing."""
        multi = len(cluster.nodes) > 1
        return sorted(
            {
                EstimatedCell(j.job_type, k, j.num_gpus, where)
                for j in jobs
                for k in cluster.gpu_types
                for where in (
                    ("consolidated", "multi-node")
                    if multi and j.num_gpus > 1
                    else ("consolidated",)
                )
            }
        )

    def describe(self, job: Job, cluster: Cluster) -> str:
        kinds = sorted({self.estimate(job, g).source for g in cluster.gpu_types})
        return f"estimated (Eq. 10 PMI/PCIe, reference {self.params.reference_gpu}; from {'; '.join(kinds)})"


def _log_distance(a: float, b: float) -> float:
    """``|log(a / b)|``, how far apart two PMIs are; inf where the ratio is 0, inf or undefined
    (figures the cluster loader refuses, so that no ordering divides by zero)."""
    ratio = a / b if b > 0 else math.inf
    return abs(math.log(ratio)) if 0 < ratio < math.inf else math.inf
