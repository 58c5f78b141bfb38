"""The ``aws`` provider: EC2 instances launched, listed and terminated with boto3 (the ``[aws]``
extra), each node reached over SSH.

This module registers the provider and declares its node entries' keys and its ``aws:``
section (light: no boto3); the
provider (commands and files over SSH) is :mod:`hadar.providers.aws.provider`, the instances'
lifecycle :mod:`hadar.providers.aws.lifecycle`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from hadar.core.errors import shorten
from hadar.core.validation import DAY_S
from hadar.providers.command_setting import PythonCommand
from hadar.providers.registry import ProviderKind, register_provider
from hadar.providers.ssh import SshUser, scalar_text

INSTANCE_TYPE_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,31}\.[a-z0-9-]{1,31}$")
"""An EC2 instance type: family and size (``p3.2xlarge``, ``u-6tb1.metal``, ``c7i-flex.large``)."""
REGION_RE = re.compile(r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$")
"""An AWS region (``us-east-1``): one DNS label, as botocore requires."""


def _matching(value: str | None, pattern: re.Pattern[str], what: str) -> str | None:
    """``value`` if it is None or matches ``pattern``, else ``ValueError`` saying it is not ``what``
    (it is shown on the terminal and sent to EC2, so no markup or control characters get by)."""
    if value is not None and not pattern.fullmatch(value):
        raise ValueError(f"not {what}")
    return value


class AwsNode(BaseModel):
    """The keys of a node entry of a ``provider: aws`` cluster."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    instance_type: str | None = None
    """The EC2 instance type launched for the node (required by ``hadar cluster up``)."""

    @field_validator("instance_type")
    @classmethod
    def _instance_type(cls, v: str | None) -> str | None:
        return _matching(v, INSTANCE_TYPE_RE, "an EC2 instance type (like p3.2xlarge)")


CLUSTER_TAG = "hadar-cluster"
NODE_TAG = "hadar-node"


class AwsSettings(BaseModel):
    """The ``aws:`` section of a cluster file."""

    model_config = ConfigDict(extra="forbid")

    ami: str = Field(min_length=1)
    region: str | None = None
    profile: str | None = None
    endpoint_url: str | None = None
    key_name: str | None = None
    ssh_user: SshUser = "ubuntu"
    identity_file: str | None = None
    security_group_ids: list[str] = Field(default_factory=list)
    subnet_id: str | None = None
    tags: dict[str, str] = Field(default_factory=dict)
    address: Literal["public", "private"] = "public"
    root_volume_gb: int | None = Field(default=None, ge=8, le=16384)
    python: PythonCommand = "python3"
    remote_base: str | None = None
    known_hosts: str | None = None
    trust_new_hosts: bool = False
    wait_timeout_s: float = Field(default=900.0, gt=0, le=DAY_S, allow_inf_nan=False)
    ssh_wait_timeout_s: float = Field(default=600.0, gt=0, le=DAY_S, allow_inf_nan=False)
    poll_interval_s: float = Field(default=5.0, gt=0, le=DAY_S, allow_inf_nan=False)
    spot: bool = False
    spot_max_price: str | None = Field(default=None, pattern=r"^\d+(\.\d+)?$")
    setup: list[str] | None = None
    setup_timeout_s: float = Field(default=1800.0, gt=0, le=DAY_S, allow_inf_nan=False)
    max_attempts: int = Field(default=10, ge=1, le=50)
    ssh_port: int = Field(default=22, ge=1, le=65535, strict=True)

    @field_validator("region")
    @classmethod
    def _region(cls, v: str | None) -> str | None:
        return _matching(v, REGION_RE, "an AWS region (like us-east-1)")

    @field_validator("setup", mode="before")
    @classmethod
    def _setup_lines(cls, v: Any) -> Any:
        return [v] if isinstance(v, str) else v

    @field_validator("spot_max_price", mode="before")
    @classmethod
    def _price_text(cls, v: Any) -> Any:
        return str(v) if isinstance(v, int | float) and not isinstance(v, bool) else v

    @field_validator("tags", mode="before")
    @classmethod
    def _tags(cls, v: Any) -> Any:
        if isinstance(v, Mapping):
            for key in v:
                if str(key) in {CLUSTER_TAG, NODE_TAG}:
                    raise ValueError(f"tag {key!r} is reserved for hadar")
            return {
                scalar_text(k, f"tag {shorten(str(k))!r}"): scalar_text(
                    val, f"tag {shorten(str(k))!r}"
                )
                for k, val in v.items()
            }
        return v


KIND = register_provider(
    ProviderKind(
        "aws",
        "hadar.providers.aws.provider:AwsProvider",
        AwsNode,
        AwsSettings,
        lifecycle="hadar.providers.aws.lifecycle:AwsCluster",
        rank=2,
    )
)
