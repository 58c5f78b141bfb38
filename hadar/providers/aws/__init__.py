"""The ``aws`` provider: EC2 instances launched, listed and terminated with boto3 (the ``[aws]``
extra), each node reached over SSH.

This module registers the provider and declares its node entries' keys (light: no boto3); the
provider and the instances' lifecycle are :mod:`hadar.providers.aws.provider`.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from hadar.providers.registry import ProviderKind, register_provider


class AwsNode(BaseModel):
    """The keys of a node entry of a ``provider: aws`` cluster."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    instance_type: str | None = None
    """The EC2 instance type launched for the node (required by ``hadar cluster up``)."""


KIND = register_provider(
    ProviderKind(
        "aws",
        "hadar.providers.aws.provider:AwsProvider",
        AwsNode,
        lifecycle="hadar.providers.aws.provider:AwsCluster",
        rank=2,
    )
)
