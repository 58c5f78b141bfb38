"""A node's GPUs, numbered: which device indices each declared GPU type of a node stands for,
checked against what the node's ``nvidia-smi`` shows. Value objects and pure functions only.

* A node that is not ``emulate``\\ d must show every GPU it declares: for each declared type, as
  many ``nvidia-smi`` GPUs whose name matches the catalogue type (``hadar/core/data/gpus.yaml``,
  ``smi_pattern``) and whose memory is at least 90 % of the catalogue's. Its GPU ids are the
  ``nvidia-smi`` indices: pinned by the cluster file's ``gpu_indices`` or, by default, the lowest
  matching indices of each type in the order the types are declared.
* An emulated node's GPUs are ids ``0..n-1`` in declared order (or its ``gpu_indices``); they
  run on the machine's real devices in turn (id ``i`` on device ``(offset + i) mod m`` of ``m``),
  or on the CPU when the machine has none.
* Local nodes share one machine: there a node never gets a device an earlier real (not emulated)
  node already holds, and emulated nodes continue the round-robin where the previous one stopped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from hadar.core.cluster import Node
from hadar.core.errors import InputError
from hadar.core.gpu_catalogue import catalogue, gpu_for_smi_name

MEMORY_TOLERANCE = 0.9
"""A GPU counts as the catalogue's type if it has at least this share of the catalogue's memory
(drivers reserve some; ``nvidia-smi`` reports MiB)."""


class GpuMismatchError(InputError):
    """A node's declared GPUs and the GPUs it shows disagree (one line naming node and GPU)."""


@dataclass(frozen=True)
class SeenGpu:
    """One GPU as ``nvidia-smi`` lists it."""

    index: int
    name: str
    memory_mib: float | None = None

    @property
    def gpu_type(self) -> str | None:
        """The catalogue id its name matches, if any."""
        return gpu_for_smi_name(self.name)

    def describe(self) -> str:
        mem = f" {self.memory_mib / 1024:.0f} GiB" if self.memory_mib else ""
        return f"{self.index}: {self.name}{mem}"


@dataclass(frozen=True)
class GpuReport:
    """What a node's health probe saw: its GPUs, or why it could not list them."""

    gpus: tuple[SeenGpu, ...] = ()
    problem: str | None = None
    """``nvidia-smi not found``, ``nvidia-smi exited 9``, ... (None when it answered)."""

    def listing(self) -> str:
        return ", ".join(g.describe() for g in self.gpus) or "no GPU"


@dataclass(frozen=True)
class NodeGpus:
    """A node's numbered GPUs: ids per declared type (unique on the node; the ids the plan
    records) and the real device index each id runs on (``CUDA_VISIBLE_DEVICES``)."""

    node: str
    ids: Mapping[str, tuple[int, ...]]
    devices: Mapping[int, int] = field(default_factory=dict)
    emulated: bool = False

    def device(self, gpu_id: int) -> int:
        return self.devices.get(gpu_id, gpu_id)

    def as_dict(self) -> dict[str, Any]:
        return {
            "ids": {k: list(v) for k, v in self.ids.items()},
            "devices": {str(i): self.device(i) for v in self.ids.values() for i in v},
            "emulated": self.emulated,
        }


def gpu_report(details: Mapping[str, Any] | None) -> GpuReport:
    """The GPUs in a health probe's report (``hadar.providers.health``), tolerant of older probes."""
    if not details:
        return GpuReport(problem="the node's health probe did not report")
    gpus = []
    for i, g in enumerate(details.get("gpus") or []):
        if isinstance(g, Mapping):
            mem = g.get("memory_mib")
            gpus.append(
                SeenGpu(
                    int(g.get("index", i)),
                    str(g.get("name", "")),
                    float(mem) if isinstance(mem, int | float) else None,
                )
            )
    if not gpus:  # a probe that only listed names
        gpus = [SeenGpu(i, str(n)) for i, n in enumerate(details.get("nvidia_smi") or [])]
    return GpuReport(tuple(gpus), details.get("smi_problem"))


def declared_numbering(node: Node) -> NodeGpus:
    """The numbering the cluster file alone gives (its ``gpu_indices``, else ``0..n-1`` in
    declared order), each id on the device of the same index."""
    if node.gpu_indices is not None:
        ids = {k: tuple(node.gpu_indices[k]) for k in node.gpus}
    else:
        ids, nxt = {}, 0
        for k, count in node.gpus.items():
            ids[k] = tuple(range(nxt, nxt + count))
            nxt += count
    return NodeGpus(node.name, MappingProxyType(ids), MappingProxyType({}), node.emulate)


def _enough_memory(gpu: SeenGpu, gpu_type: str) -> bool:
    want_gb = catalogue()[gpu_type].memory_gb
    return gpu.memory_mib is None or gpu.memory_mib * 2**20 >= MEMORY_TOLERANCE * want_gb * 1e9


def _memory_note(gpu: SeenGpu, gpu_type: str) -> str:
    spec = catalogue()[gpu_type]
    have = (gpu.memory_mib or 0) / 1024
    return f"GPU {gpu.index} ({gpu.name}) has {have:.1f} GiB, the catalogue's {gpu_type} {spec.memory_gb:g} GB"


def _owned(taken: Mapping[int, str]) -> str:
    by: dict[str, list[str]] = {}
    for dev, owner in sorted(taken.items()):
        by.setdefault(owner, []).append(str(dev))
    return "; ".join(f"GPU {', '.join(d)} held by local node {o}" for o, d in by.items())


def number_real(node: Node, report: GpuReport, taken: Mapping[int, str] | None = None) -> NodeGpus:
    """Number a real (not emulated) node's GPUs from what it shows; ``taken`` maps devices that
    other local nodes of the same machine hold to their names. Raises GpuMismatchError."""
    taken = taken or {}
    declared = ", ".join(f"{c}x {k}" for k, c in node.gpus.items())
    if not report.gpus:
        why = report.problem or "nvidia-smi lists no GPU"
        raise GpuMismatchError(
            f"node {node.name}: declares {declared} but shows no NVIDIA GPU ({why}); "
            f"set emulate: true on the node to train on its CPU"
        )
    by_index = {g.index: g for g in report.gpus}
    ids: dict[str, tuple[int, ...]] = {}
    if node.gpu_indices is not None:
        for k in node.gpus:
            for i in node.gpu_indices[k]:
                g = by_index.get(i)
                if g is None:
                    raise GpuMismatchError(
                        f"node {node.name}: gpu_indices: {k} GPU {i} does not exist "
                        f"(nvidia-smi shows {report.listing()})"
                    )
                if g.gpu_type != k:
                    raise GpuMismatchError(
                        f"node {node.name}: gpu_indices: GPU {i} is a {g.name}, "
                        f"not a {k} ({catalogue()[k].name})"
                    )
                if not _enough_memory(g, k):
                    raise GpuMismatchError(f"node {node.name}: {_memory_note(g, k)}")
                if i in taken:
                    raise GpuMismatchError(
                        f"node {node.name}: gpu_indices: GPU {i} is already local node "
                        f"{taken[i]}'s (local nodes share this machine's GPUs)"
                    )
            ids[k] = tuple(node.gpu_indices[k])
        return NodeGpus(node.name, MappingProxyType(ids), MappingProxyType({}), False)
    for k, count in node.gpus.items():
        named = [g for g in report.gpus if g.gpu_type == k]
        usable = [g for g in named if _enough_memory(g, k) and g.index not in taken]
        if len(usable) < count:
            notes = [_memory_note(g, k) for g in named if not _enough_memory(g, k)]
            held = {g.index: taken[g.index] for g in named if g.index in taken}
            if held:
                notes.append(_owned(held))
            extra = f"; {'; '.join(notes)}" if notes else ""
            raise GpuMismatchError(
                f"node {node.name}: declares {count}x {k} but nvidia-smi shows "
                f"{len(usable) or 'none'} usable ({report.listing()}){extra}"
            )
        ids[k] = tuple(g.index for g in sorted(usable, key=lambda g: g.index)[:count])
    return NodeGpus(node.name, MappingProxyType(ids), MappingProxyType({}), False)


def number_emulated(node: Node, report: GpuReport, offset: int = 0) -> NodeGpus:
    """Number an emulated node's GPUs: its declared ids on the machine's devices in turn
    (starting at device ``offset`` mod m), or on the ids themselves when it shows no GPU."""
    base = declared_numbering(node)
    real = sorted(g.index for g in report.gpus)
    if not real:
        return base
    if node.gpu_indices is not None:
        missing = [i for v in base.ids.values() for i in v if i not in real]
        if missing:
            raise GpuMismatchError(
                f"node {node.name}: gpu_indices: GPU {missing[0]} does not exist "
                f"(nvidia-smi shows {report.listing()})"
            )
        return base
    order = [i for v in base.ids.values() for i in v]
    devices = {gid: real[(offset + n) % len(real)] for n, gid in enumerate(order)}
    return NodeGpus(node.name, base.ids, MappingProxyType(devices), True)


def number_nodes(
    nodes: Sequence[Node],
    reports: Mapping[str, GpuReport],
    *,
    shared_machine: bool,
    numbered: Mapping[str, NodeGpus] | None = None,
) -> tuple[dict[str, NodeGpus], dict[str, str]]:
    """Number ``nodes`` in order from their probe ``reports`` (a node without a report gets its
    declared numbering). On a shared machine (local nodes) devices held by ``numbered`` and by
    earlier nodes are not handed out again. Returns the numberings and, per node that does not
    match, its one-line problem."""
    taken: dict[int, str] = {}
    offset = 0
    if shared_machine:
        for g in (numbered or {}).values():
            offset += _claim(g, taken)
    out: dict[str, NodeGpus] = {}
    problems: dict[str, str] = {}
    for node in nodes:
        report = reports.get(node.name)
        try:
            if report is None:
                g = declared_numbering(node)
            elif node.emulate:
                g = number_emulated(node, report, offset)
            else:
                g = number_real(node, report, taken if shared_machine else None)
        except GpuMismatchError as exc:
            problems[node.name] = str(exc)
            continue
        out[node.name] = g
        if shared_machine:
            offset += _claim(g, taken)
    return out, problems


def _claim(g: NodeGpus, taken: dict[int, str]) -> int:
    """Record a real node's devices as taken; return an emulated node's GPU count (the offset
    the next emulated node continues from)."""
    ids = [i for v in g.ids.values() for i in v]
    if g.emulated:
        return len(ids)
    for i in ids:
        taken[g.device(i)] = g.node
    return 0
