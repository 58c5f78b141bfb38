"""Cluster model: nodes with typed GPUs, as value objects, plus dense numpy views for the allocator."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import numpy as np

from hadar.core.gpu_catalogue import catalogue

if TYPE_CHECKING:
    from hadar.core.topology import Topology


@dataclass(frozen=True)
class Node:
    """One machine. ``gpus`` maps canonical GPU type ids to how many of them the node offers."""

    name: str
    gpus: Mapping[str, int]
    pcie_gen: int = 3
    speed_factor: float = 1.0
    emulate: bool = False
    """The declared GPUs are emulated (real runs: on whatever the machine has) and not checked
    against the GPUs the node shows."""
    gpu_indices: Mapping[str, tuple[int, ...]] | None = None
    """The device indices (as ``nvidia-smi`` numbers them) of each declared GPU type, if the
    cluster file pins them; else they are matched from ``nvidia-smi`` (docs/runtime.md)."""
    transport: Mapping[str, Any] = field(default_factory=dict)
    """The node entry's provider-specific keys (SSH address, port, user, identity_file; AWS
    instance_type), uninterpreted here: each provider parses them with its own schema
    (``hadar/providers/transport.py``). A private copy, typed read-only (a plain dict, so it pickles)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "transport", dict(self.transport))

    @property
    def num_gpus(self) -> int:
        return sum(self.gpus.values())


@dataclass(frozen=True)
class Cluster:
    """A named set of nodes reached through one provider (``simulated``: none; the others are
    registered in :mod:`hadar.providers.registry`)."""

    name: str
    nodes: tuple[Node, ...]
    provider: str = "simulated"
    settings: Mapping[str, Any] = field(default_factory=dict)
    source: str | None = None
    network: Topology | None = None
    type_figures: Mapping[str, tuple[float, ...]] | None = field(default=None, compare=False)
    """Optional per-type figures ranking the GPU types before their datasheet figures (e.g. the
    measured throughputs a policy decides on: :func:`hadar.loop.policy_view`), so that a table
    measured on a GPU called "a100" ranks by what was measured, not by what the name means."""
    """The interconnect (racks, link bandwidths) when the cluster file declares one."""

    def __post_init__(self) -> None:
        names = [n.name for n in self.nodes]
        if len(set(names)) != len(names):
            dup = next(n for n in names if names.count(n) > 1)
            raise ValueError(f"duplicate node name {dup!r}")

    @cached_property
    def gpu_types(self) -> tuple[str, ...]:
        """GPU types present, ordered by their figures, never by name (:func:`gpu_type_order`)."""
        counts: dict[str, int] = {}
        for n in self.nodes:
            for k, c in n.gpus.items():
                if c > 0:
                    counts[k] = counts.get(k, 0) + c
        return gpu_type_order(counts, self.type_figures)

    @cached_property
    def canonical(self) -> Cluster:
        """The same cluster with its nodes in an order given by their figures, not their names
        or declaration order (:func:`node_order_key`); what policies see (``hadar/loop.py``),
        so no decision depends on labels. Nodes equal in every figure keep their relative
        declaration order: they are interchangeable, so which of them a job gets changes
        nothing but the name."""
        types = self.gpu_types
        order = sorted(range(len(self.nodes)), key=lambda i: node_order_key(self.nodes[i], types))
        if order == list(range(len(self.nodes))):
            return self
        return Cluster(
            name=self.name,
            nodes=tuple(self.nodes[i] for i in order),
            provider=self.provider,
            settings=self.settings,
            source=self.source,
            network=self.network,
            type_figures=self.type_figures,
        )

    @cached_property
    def node_names(self) -> tuple[str, ...]:
        return tuple(n.name for n in self.nodes)

    @cached_property
    def pcie_gens(self) -> tuple[int, ...]:
        """Each node's PCIe generation, in node order (part of what a rate estimate reads)."""
        return tuple(n.pcie_gen for n in self.nodes)

    @cached_property
    def node_index(self) -> Mapping[str, int]:
        return MappingProxyType({n: i for i, n in enumerate(self.node_names)})

    @cached_property
    def type_index(self) -> Mapping[str, int]:
        return MappingProxyType({k: i for i, k in enumerate(self.gpu_types)})

    @cached_property
    def capacity(self) -> np.ndarray:
        """``capacity[h, k]``: GPUs of type k on node h (read-only int array)."""
        cap = np.zeros((len(self.nodes), len(self.gpu_types)), dtype=np.int64)
        for h, node in enumerate(self.nodes):
            for gtype, count in node.gpus.items():
                cap[h, self.type_index[gtype]] = count
        cap.setflags(write=False)
        return cap

    @property
    def total_gpus(self) -> int:
        return int(self.capacity.sum())

    def gpus_of_type(self, gtype: str) -> int:
        return (
            int(self.capacity[:, self.type_index[gtype]].sum()) if gtype in self.type_index else 0
        )

    def node(self, name: str) -> Node:
        return self.nodes[self.node_index[name]]

    def subset(self, names: Iterable[str]) -> Cluster:
        """The same cluster restricted to ``names`` (e.g. the nodes that are up this round)."""
        keep = set(names)
        return Cluster(
            name=self.name,
            nodes=tuple(n for n in self.nodes if n.name in keep),
            provider=self.provider,
            settings=self.settings,
            source=self.source,
            network=self.network,
        )

    def placement_matrix(self, placement: Mapping[str, Mapping[str, int]]) -> np.ndarray:
        """A placement ``{node: {type: count}}`` as a dense ``[node, type]`` count matrix."""
        y = np.zeros_like(self.capacity, dtype=np.int64)
        for node, per_type in placement.items():
            for gtype, count in per_type.items():
                y[self.node_index[node], self.type_index[gtype]] += count
        return y

    def placement_from_matrix(self, y: np.ndarray) -> dict[str, dict[str, int]]:
        """Inverse of :meth:`placement_matrix`, dropping zero cells."""
        out: dict[str, dict[str, int]] = {}
        for h, k in zip(*np.nonzero(y), strict=True):
            out.setdefault(self.node_names[h], {})[self.gpu_types[k]] = int(y[h, k])
        return out


def gpu_type_order(
    counts: Mapping[str, int], figures: Mapping[str, tuple[float, ...]] | None = None
) -> tuple[str, ...]:
    """GPU types (with their GPU counts in a cluster) ordered by numbers, never by labels:
    datasheet figures ascending (FP32 TFLOPS, tensor TFLOPS, memory, PCIe generation), then the
    count. Policies break exact ties by a type's position, so this makes such ties go to the
    same physical GPU whatever it is called or wherever it is declared. Only types equal in all
    of these figures fall back to their id (documented in docs/hadar.md). ``figures`` (e.g.
    measured throughputs) rank the types first where given."""
    specs = catalogue()
    ranked = figures or {}

    def key(k: str) -> tuple[object, ...]:
        s = specs.get(k)
        figures = (
            (s.fp32_tflops, s.tensor_tflops, s.memory_gb, s.pcie_gen)
            if s is not None
            else (0.0, 0.0, 0.0, 0)
        )
        return (ranked.get(k, ()), *figures, counts[k], k)

    return tuple(sorted(counts, key=key))


def node_order_key(node: Node, types: tuple[str, ...]) -> tuple[object, ...]:
    """Sort key of a node in :attr:`Cluster.canonical`: more GPUs of the highest-ranked type
    (:func:`gpu_type_order`) first, then of the next type, ..., then the newer PCIe generation
    and the larger speed factor; real GPUs before emulated ones."""
    counts = tuple(-node.gpus.get(k, 0) for k in reversed(types))
    return (*counts, -node.pcie_gen, -node.speed_factor, node.emulate)
