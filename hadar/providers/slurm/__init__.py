"""The ``slurm`` provider: each node of the cluster is a Slurm allocation (``salloc
--no-shell``) on which every command runs as a job step (``srun --jobid``); the coordinator and
the nodes share a file system, as a Slurm cluster's login and compute nodes do (docs/slurm.md).

This module registers the provider and declares its node entries' keys and its ``slurm:``
section (light: it only names the provider's module, :mod:`hadar.providers.slurm.provider`).
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from hadar.providers.command_setting import PythonCommand
from hadar.providers.registry import ProviderKind, register_provider

_SLURM_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")
_TIME_LIMIT = re.compile(r"(\d+-)?\d+(:\d{1,2}){0,2}|UNLIMITED|INFINITE", re.IGNORECASE)


def _word(value: str) -> str:
    """A Slurm name (partition, account, QoS, node, gres type): letters, digits, ``._+-``."""
    if not _SLURM_WORD.fullmatch(value):
        raise ValueError(f"{value!r} is not a Slurm name (letters, digits, '._+-')")
    return value


def _time_limit(value: str) -> str:
    if not _TIME_LIMIT.fullmatch(value):
        raise ValueError(
            f"{value!r} is not a Slurm time limit (minutes, MM:SS, HH:MM:SS, D-HH[:MM[:SS]])"
        )
    return value


SlurmName = Annotated[str, AfterValidator(_word)]
SlurmTime = Annotated[str, AfterValidator(_time_limit)]


class SlurmNode(BaseModel):
    """The keys of a node entry of a ``provider: slurm`` cluster."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    slurm_node: SlurmName | None = None
    """The Slurm node this node's allocation must land on (``salloc -w``); None: any node of the
    partition with the node's GPUs."""


class SlurmSettings(BaseModel):
    """The ``slurm:`` section of a cluster file."""

    model_config = ConfigDict(extra="forbid")

    partition: SlurmName | None = None
    """``salloc -p`` (None: the cluster's default partition)."""
    account: SlurmName | None = None
    qos: SlurmName | None = None
    time_limit: SlurmTime | None = None
    """``salloc -t`` of each node's allocation (None: the partition's default)."""
    gres_types: dict[str, SlurmName] = Field(default_factory=dict)
    """The Slurm gres type of a GPU type of the catalogue where the two differ
    (``{a100: a100_80g}``); others are asked for under their own name (``gpu:v100:2``)."""
    slurm_conf: str | None = None
    """The ``slurm.conf`` of the cluster to reach (``SLURM_CONF``); None: the environment's
    ``SLURM_CONF`` or Slurm's own default."""
    python: PythonCommand | None = None
    """The interpreter that runs the worker on a node (default: the one running hadar)."""
    rendezvous_address: str | None = None
    """The address gang members use for torch.distributed (default: the node's NodeAddr)."""
    cpus_per_gpu: int = Field(default=1, ge=1, le=1024, strict=True)
    """CPUs each node's allocation asks per GPU (and one more for the probes)."""
    grant_timeout_s: float = Field(default=30.0, gt=0, le=3600)
    """How long to wait for Slurm to grant a node's allocation before calling the node down."""
    kill_grace_s: float = Field(default=3.0, ge=0)


KIND = register_provider(
    ProviderKind(
        "slurm",
        "hadar.providers.slurm.provider:SlurmProvider",
        SlurmNode,
        SlurmSettings,
        shared_filesystem=True,
        warm_workers=False,
        rank=3,
    )
)
