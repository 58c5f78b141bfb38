"""Load and validate cluster YAML files (``cluster_configs/*.yaml``) into :class:`Cluster`.

Schema (unknown keys are rejected so typos surface)::

    name: sim-60gpu
    provider: simulated            # simulated | local | ssh | aws
    description: free text
    nodes:
      - name: v100                 # with count > 1 the nodes are v100-0, v100-1, ...
        count: 5
        gpus: {v100: 4}            # GPU type (catalogue id or alias) -> count, each >= 1
        pcie_gen: 3                # motherboard PCIe generation (default 3)
        address: host-or-ip        # ssh: host name, ~/.ssh/config alias or IP
        port: 22
        user: ubuntu
        identity_file: ~/.ssh/id_ed25519
        instance_type: p3.2xlarge  # aws
        speed_factor: 0.5          # local: emulate a GPU this fraction as fast
    ssh: {...}                     # provider sections, validated by the providers
    aws: {...}
    local: {...}
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from estimators.gpu_catalogue import canonical_gpu
from hadar.cluster import Cluster, Node
from hadar.errors import InputError
from hadar.validation import from_validation_error, load_yaml

PROVIDERS = ("simulated", "local", "ssh", "aws")


class _NodeSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1)
    count: int = 1
    gpus: dict[str, int]
    pcie_gen: int = Field(default=3, ge=1, le=6)
    address: str | None = None
    port: int | None = Field(default=None, ge=1, le=65535)
    user: str | None = None
    identity_file: str | None = None
    instance_type: str | None = None
    speed_factor: float = Field(default=1.0, gt=0.0, le=1.0)

    @field_validator("count")
    @classmethod
    def _count_positive(cls, v: int) -> int:
        if v < 1:
            raise ValueError(f"must be a positive integer (got {v})")
        return v

    @field_validator("gpus")
    @classmethod
    def _gpus_valid(cls, v: dict[str, int]) -> dict[str, int]:
        if not v:
            raise ValueError("a node needs at least one GPU type")
        out: dict[str, int] = {}
        for name, count in v.items():
            try:
                gid = canonical_gpu(name, field=str(name))
            except InputError as exc:
                raise ValueError(str(exc)) from None
            if not isinstance(count, int) or isinstance(count, bool) or count < 1:
                raise ValueError(f"{name}: GPU count must be a positive integer (got {count!r})")
            out[gid] = out.get(gid, 0) + count
        return out


class _ClusterSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1)
    provider: Literal["simulated", "local", "ssh", "aws"] = "simulated"
    description: str | None = None
    nodes: list[_NodeSpec] = Field(min_length=1)
    ssh: dict[str, Any] = Field(default_factory=dict)
    aws: dict[str, Any] = Field(default_factory=dict)
    local: dict[str, Any] = Field(default_factory=dict)


def cluster_from_dict(data: dict[str, Any], source: str = "<cluster>") -> Cluster:
    """Validate a parsed cluster mapping; errors name ``source`` and the offending field."""
    try:
        spec = _ClusterSpec.model_validate(data)
    except ValidationError as exc:
        raise from_validation_error(source, exc) from None
    nodes: list[Node] = []
    for ns in spec.nodes:
        names = [ns.name] if ns.count == 1 else [f"{ns.name}-{i}" for i in range(ns.count)]
        for name in names:
            nodes.append(
                Node(
                    name=name,
                    gpus=dict(ns.gpus),
                    pcie_gen=ns.pcie_gen,
                    address=ns.address,
                    port=ns.port,
                    user=ns.user,
                    identity_file=ns.identity_file,
                    instance_type=ns.instance_type,
                    speed_factor=ns.speed_factor,
                )
            )
    try:
        return Cluster(
            name=spec.name,
            nodes=tuple(nodes),
            provider=spec.provider,
            settings={"ssh": spec.ssh, "aws": spec.aws, "local": spec.local},
            source=source,
        )
    except ValueError as exc:
        raise InputError(f"{source}: nodes: {exc}") from None


def load_cluster(path: str | Path) -> Cluster:
    """Load a cluster YAML file; bundled names like ``sim-60gpu`` resolve to ``cluster_configs/``."""
    p = resolve_cluster_path(path)
    return cluster_from_dict(load_yaml(p, "cluster"), source=str(path))


def bundled_configs_dir() -> Path:
    """The ``cluster_configs/`` folder of this checkout or installation."""
    return Path(__file__).resolve().parent.parent / "cluster_configs"


def resolve_cluster_path(path: str | Path) -> Path:
    p = Path(path)
    if p.exists():
        return p
    bundled = bundled_configs_dir() / (p.name if p.suffix else f"{p.name}.yaml")
    return bundled if bundled.exists() else p
