"""Load and validate cluster YAML files (``cluster_configs/*.yaml``) into :class:`Cluster`.

Schema (unknown keys are rejected so typos surface; a node entry's keys beyond the core's must
be among the ``transport_keys`` the caller accepts, see :func:`cluster_from_dict`)::

    name: sim-60gpu
    provider: simulated            # simulated (no machines), or a provider the caller names
    description: free text
    nodes:
      - name: v100                 # with count > 1 the nodes are v100-0, v100-1, ...
        count: 5
        gpus: {v100: 4}            # GPU type (catalogue id or alias) -> count, a whole
                                   # number >= 1; one key per type
        pcie_gen: 3                # motherboard PCIe generation (default 3)
        speed_factor: 0.5          # emulate a GPU this fraction as fast
        emulate: true              # declared GPUs are emulated, not checked against the machine's
                                   # (default: the provider's, ``ProviderSchema.emulates_gpus``)
        gpu_indices: {v100: [0, 1, 2, 3]}   # nvidia-smi indices of each type (default: matched)
        <key>: <value>             # transport keys: the provider's own, kept uninterpreted in
                                   # Node.transport and parsed by the provider
    gpu_types: {...} | FILE        # GPU types the catalogue lacks (hadar/core/user_gpus.py)
    <section>: {...}               # a provider's settings (the sections the caller's
                                   # ProviderSchema names; each validated by its provider)
    network:                       # optional interconnect (hadar/core/topology.py, docs/estimators.md)
      nic_gbps: 25                 # each node's link to its rack switch, Gbit/s
      racks:
        - {name: rack-a, nodes: [v100, p100-0], uplink_gbps: 100}   # a nodes entry's name = all its nodes
      links: [{between: [rack-a, rack-b], gbps: 40}]                # optional switch-to-switch links
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    create_model,
    field_validator,
    model_validator,
)

from hadar.core.cluster import Cluster, Node
from hadar.core.errors import InputError, shorten
from hadar.core.gpu_catalogue import canonical_gpu
from hadar.core.safe_paths import check_safe_name
from hadar.core.suggest import did_you_mean
from hadar.core.topology import NetworkSpec, build_topology
from hadar.core.user_gpus import resolve_gpu_types
from hadar.core.validation import (
    MAX_GPUS_PER_NODE,
    MAX_NODES,
    from_validation_error,
    load_yaml,
    look_up,
    shown_value,
)

TransportKeys = Callable[[str], Collection[str]]
"""A provider's name -> the node-entry keys it accepts beyond the core's (its transport keys)."""
EmulatesGpus = Callable[[str], bool]
"""A provider's name -> whether its nodes emulate their declared GPUs unless ``emulate:`` says."""


class _NodeSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    name: str
    count: int = 1
    gpus: dict[str, int]
    pcie_gen: int = Field(default=3, ge=1, le=6)
    speed_factor: float = Field(default=1.0, ge=0.001, le=1.0)
    emulate: bool | None = None
    gpu_indices: dict[str, list[int]] | None = None

    _name_safe = field_validator("name")(check_safe_name)  # node names become directory names

    @field_validator("count")
    @classmethod
    def _count_positive(cls, v: int) -> int:
        if not 1 <= v <= MAX_NODES:
            raise ValueError(
                f"must be a positive integer of at most {MAX_NODES:,} nodes (got {shown_value(v)})"
            )
        return v

    @field_validator("gpus", "count", mode="before")
    @classmethod
    def _whole_numbers(cls, v: Any, info: ValidationInfo) -> Any:
        """A count is a YAML integer: ``true``, ``"2"`` and ``2.0`` are not counts (pydantic
        would read them as 1 and 2)."""
        if info.field_name == "gpus" and not isinstance(v, dict):
            return v  # not a mapping: the schema says so
        for name, count in v.items() if info.field_name == "gpus" else [(None, v)]:
            if isinstance(count, bool) or not isinstance(count, int):
                what = f"{shorten(str(name))}: GPU count" if name is not None else "count"
                raise ValueError(f"{what} must be a positive integer (got {shown_value(count)})")
        return v

    @field_validator("gpus")
    @classmethod
    def _gpus_valid(cls, v: dict[str, int]) -> dict[str, int]:
        if not v:
            raise ValueError("a node needs at least one GPU type")
        out: dict[str, int] = {}
        spelt: dict[str, str] = {}
        for name, count in v.items():
            gid = _gpu_id(name, spelt)
            if not isinstance(count, int) or isinstance(count, bool) or count < 1:
                raise ValueError(
                    f"{name}: GPU count must be a positive integer (got {shown_value(count)})"
                )
            if count > MAX_GPUS_PER_NODE:
                raise ValueError(
                    f"{name}: at most {MAX_GPUS_PER_NODE} GPUs of a type per node "
                    f"(got {shown_value(count)})"
                )
            out[gid] = count
        return out

    @field_validator("gpu_indices")
    @classmethod
    def _indices_valid(cls, v: dict[str, list[int]] | None) -> dict[str, list[int]] | None:
        if v is None:
            return None
        out: dict[str, list[int]] = {}
        spelt: dict[str, str] = {}
        for name, indices in v.items():
            gid = _gpu_id(name, spelt)
            if not isinstance(indices, list) or any(
                not isinstance(i, int) or isinstance(i, bool) or i < 0 for i in indices
            ):
                raise ValueError(
                    f"{name}: a list of device indices >= 0 (got {shown_value(indices)})"
                )
            out[gid] = indices
        seen = [i for indices in out.values() for i in indices]
        dup = next((i for i in seen if seen.count(i) > 1), None)
        if dup is not None:
            raise ValueError(f"device index {dup} is listed twice")
        return out

    @model_validator(mode="after")
    def _indices_match_gpus(self) -> _NodeSpec:
        if self.gpu_indices is None:
            return self
        for gid, indices in self.gpu_indices.items():
            if gid not in self.gpus:
                raise ValueError(f"gpu_indices: {gid} is not among the node's gpus")
            if len(indices) != self.gpus[gid]:
                raise ValueError(
                    f"gpu_indices: {gid} lists {len(indices)} indices for {self.gpus[gid]} GPUs"
                )
        missing = [gid for gid in self.gpus if gid not in self.gpu_indices]
        if missing:
            raise ValueError(f"gpu_indices: no indices for {', '.join(missing)}")
        return self


def _gpu_id(name: str, spelt: dict[str, str]) -> str:
    """The catalogue id of a node's GPU type ``name``; a ValueError when it is unknown or when
    another key of the same mapping (``spelt``: id -> the key that named it) already names that
    type (``v100`` and ``V100``: the counts would otherwise be summed silently)."""
    try:
        gid = canonical_gpu(name, field=str(name))
    except InputError as exc:
        raise ValueError(str(exc)) from None
    if gid in spelt:
        raise ValueError(f"{spelt[gid]!r} and {name!r} are the same GPU type ({gid}); give it once")
    spelt[gid] = name
    return gid


@dataclass(frozen=True)
class ProviderSchema:
    """What a cluster file may hold beyond the core's keys, as the providers declare it (the core
    names no provider): :func:`hadar.clusters.load_cluster` passes the registered providers'
    (``hadar.providers.registry``)."""

    providers: tuple[str, ...] | None = None
    """``provider:`` values besides ``simulated``; None = any name (the core alone)."""
    sections: tuple[str, ...] = ()
    """Top-level sections the providers read: each a mapping, validated by its provider when it
    starts."""
    transport_keys: TransportKeys = lambda provider: ()
    """A provider's name -> the node-entry keys it accepts beyond the core's."""
    emulates_gpus: EmulatesGpus = lambda provider: False
    """A provider's name -> whether its nodes emulate their GPUs unless ``emulate:`` says."""


@lru_cache(maxsize=8)
def _cluster_spec(providers: tuple[str, ...] | None, sections: tuple[str, ...]) -> type[BaseModel]:
    """The cluster file's schema for these providers and sections (fields in the file's order)."""
    # a Literal of the names the caller gives (pydantic's message lists them, as before)
    provider: Any = str if providers is None else Literal.__getitem__(("simulated", *providers))
    fields: dict[str, Any] = {
        "name": (str, ...),
        "provider": (provider, "simulated"),
        "description": (str | None, None),
        "gpu_types": (dict[str, Any] | str | None, None),
        "nodes": (list[_NodeSpec], Field(min_length=1)),
        **{s: (dict[str, Any], Field(default_factory=dict)) for s in sections},
        "network": (NetworkSpec | None, None),
    }
    return create_model(
        "_ClusterSpec",
        __config__=ConfigDict(extra="forbid", allow_inf_nan=False),
        __validators__={"_name_safe": field_validator("name")(check_safe_name)},
        **fields,
    )


def cluster_from_dict(
    data: dict[str, Any],
    source: str = "<cluster>",
    base_dir: Path | None = None,
    transport_keys: TransportKeys = lambda provider: (),
    *,
    schema: ProviderSchema | None = None,
) -> Cluster:
    """Validate a parsed cluster mapping; errors name ``source`` and the offending field.
    ``gpu_types`` (a file name is relative to ``base_dir``) is registered before the nodes are
    read, so they (and later a throughputs table) may name those GPUs. A node entry's keys
    beyond the core's must be among ``transport_keys(provider)`` (else "unknown field"; by
    default there are none); they become the node's uninterpreted ``transport``. ``schema`` (which
    replaces ``transport_keys``) says which providers and provider sections there are and each
    provider's default ``emulate``; without it any provider name passes, no section does and
    nothing is emulated by default. The core knows no provider: load clusters for use with
    :func:`hadar.clusters.load_cluster`, which passes the providers' schema and checks their keys."""
    schema = schema or ProviderSchema(transport_keys=transport_keys)
    gpu_types: dict[str, Any] = {}
    if isinstance(data, dict) and data.get("gpu_types") is not None:
        gpu_types = resolve_gpu_types(data["gpu_types"], source, base_dir)
    provider = data.get("provider", "simulated") if isinstance(data, dict) else "simulated"
    data, transports = _split_transport(data, frozenset(schema.transport_keys(str(provider))))
    try:
        # strict: a YAML file has types (``true`` or ``"3"`` is no PCIe generation)
        spec: Any = _cluster_spec(schema.providers, schema.sections).model_validate(
            data, strict=True
        )
    except ValidationError as exc:
        raise from_validation_error(source, exc) from None
    total = sum(ns.count for ns in spec.nodes)
    if total > MAX_NODES:
        raise InputError(f"{source}: nodes: {total:,} nodes; at most {MAX_NODES:,} are accepted")
    nodes: list[Node] = []
    groups: dict[str, list[str]] = {}
    for ns, transport in zip(spec.nodes, transports, strict=True):
        names = [ns.name] if ns.count == 1 else [f"{ns.name}-{i}" for i in range(ns.count)]
        if ns.count > 1:
            groups[ns.name] = names
        for name in names:
            nodes.append(
                Node(
                    name=name,
                    gpus=dict(ns.gpus),
                    pcie_gen=ns.pcie_gen,
                    speed_factor=ns.speed_factor,
                    emulate=schema.emulates_gpus(spec.provider)
                    if ns.emulate is None
                    else ns.emulate,
                    gpu_indices=None
                    if ns.gpu_indices is None
                    else {gid: tuple(ix) for gid, ix in ns.gpu_indices.items()},
                    transport=transport,
                )
            )
    try:
        cluster = Cluster(
            name=spec.name,
            nodes=tuple(nodes),
            provider=spec.provider,
            settings={
                **{section: getattr(spec, section) for section in schema.sections},
                **({"gpu_types": gpu_types} if gpu_types else {}),
            },
            source=source,
        )
    except ValueError as exc:
        raise InputError(f"{source}: nodes: {exc}") from None
    if spec.network is None:
        return cluster
    try:
        network = build_topology(spec.network, cluster.node_names, groups)
    except InputError as exc:
        raise InputError(f"{source}: {exc}") from None
    return replace(cluster, network=network)


def _split_transport(data: Any, transport_keys: frozenset[str]) -> tuple[Any, list[dict[str, Any]]]:
    """``data`` with the transport keys taken out of each node entry, and those keys per entry
    (malformed input passes through for the schema to report)."""
    entries = data.get("nodes") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        return data, []
    kept: list[Any] = []
    transports: list[dict[str, Any]] = []
    for entry in entries:
        if not isinstance(entry, dict):
            kept.append(entry)
            transports.append({})
            continue
        kept.append({k: v for k, v in entry.items() if k not in transport_keys})
        transports.append({k: v for k, v in entry.items() if k in transport_keys})
    return {**data, "nodes": kept}, transports


def load_cluster(
    path: str | Path,
    transport_keys: TransportKeys = lambda provider: (),
    *,
    schema: ProviderSchema | None = None,
) -> Cluster:
    """Load a cluster YAML file; bundled names like ``sim-60gpu`` resolve to ``cluster_configs/``.
    ``transport_keys`` and ``schema`` as for :func:`cluster_from_dict`."""
    p = resolve_cluster_path(path)
    if look_up(p, "cluster file") is None:
        raise InputError(missing_cluster_message(str(path)))
    return cluster_from_dict(
        load_yaml(p, "cluster"),
        source=str(path),
        base_dir=p.parent,
        transport_keys=transport_keys,
        schema=schema,
    )


def bundled_configs_dir() -> Path:
    """The ``cluster_configs/`` folder of this checkout or installation."""
    return Path(__file__).resolve().parents[2] / "cluster_configs"


def bundled_cluster_names() -> list[str]:
    """The bundled cluster names ``--cluster`` accepts without a path (``sim-60gpu``, ...)."""
    return sorted(p.stem for p in bundled_configs_dir().glob("*.yaml"))


def missing_cluster_message(path: str) -> str:
    """One line for a ``--cluster`` that is neither a file nor a bundled name: it lists the
    bundled names and suggests the closest one."""
    names = bundled_cluster_names()
    hint = did_you_mean(Path(path).stem, names)
    return (
        f"{path}: cluster file not found{hint} "
        f"(bundled clusters: {', '.join(names)}; or give a cluster YAML path)"
    )


def resolve_cluster_path(path: str | Path) -> Path:
    """``path``, or the bundled cluster file it names; a path the system cannot look up (a name
    over 255 bytes, a symbolic link loop) is refused in one line (:func:`look_up`)."""
    p = Path(path)
    if look_up(p, "cluster file") is not None:
        return p
    bundled = bundled_configs_dir() / (p.name if p.suffix else f"{p.name}.yaml")
    return bundled if bundled.exists() else p
