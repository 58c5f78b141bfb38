"""EC2 access for the ``aws`` provider (boto3): the client, one-line errors, and the cluster's
instances found by tag. The ``aws:`` section's keys are in :mod:`hadar.providers.aws.provider`'s
docstring."""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import boto3
import botocore.exceptions
import botocore.parsers
import botocore.waiter
from botocore.config import Config

from hadar.core.cluster import Cluster
from hadar.core.errors import HadarError, InputError
from hadar.providers.aws import CLUSTER_TAG, NODE_TAG, AwsNode, AwsSettings
from hadar.providers.base import load_section
from hadar.providers.lifecycle import NodeLifecycle
from hadar.providers.transport import node_transport

ENDPOINT_ENV = "HADAR_AWS_ENDPOINT_URL"
PAGE_SIZE = 200  # instances per describe_instances page
ACTIVE_STATES = ("pending", "running", "stopping", "stopped")
ALL_STATES = (*ACTIVE_STATES, "shutting-down", "terminated")

# Error codes EC2 returns when it cannot give us an instance type, and for permission problems.
CAPACITY_CODES = {
    "InsufficientInstanceCapacity": "no capacity",
    "InsufficientHostCapacity": "no capacity",
    "InsufficientReservedInstanceCapacity": "no capacity",
    "InstanceLimitExceeded": "instance quota exceeded",
    "VcpuLimitExceeded": "vCPU quota exceeded",
    "MaxSpotInstanceCountExceeded": "spot quota exceeded",
    "SpotMaxPriceTooLow": "spot price above aws.spot_max_price",
    "InsufficientCapacity": "no capacity",
    "Unsupported": "not offered here",
    "InvalidInstanceType": "not offered here",
    "InvalidInstanceType.NotFound": "not offered here",
}
THROTTLE_CODES = {"RequestLimitExceeded", "Throttling", "ThrottlingException"}
PERMISSION_CODES = {
    "UnauthorizedOperation",
    "AuthFailure",
    "AccessDenied",
    "AccessDeniedException",
    "OptInRequired",
    "Blocked",
    "InvalidClientTokenId",
    "SignatureDoesNotMatch",
    "UnrecognizedClientException",
    "ExpiredToken",
    "RequestExpired",
}


class AwsError(HadarError):
    """EC2 refused or failed a request (capacity, quota, permission...); one line per cause."""

    exit_code = 1


@dataclass(frozen=True)
class Instance:
    """One EC2 instance of the cluster, as describe_instances reports it."""

    instance_id: str
    node: str
    instance_type: str
    state: str
    public_ip: str | None
    private_ip: str | None
    launch_time: dt.datetime | None = None
    cluster: str = ""
    lifecycle: str = "on-demand"  # or "spot"

    def address(self, which: str = "public") -> str | None:
        return (self.public_ip or self.private_ip) if which == "public" else self.private_ip

    @property
    def machine_id(self) -> str:
        return self.instance_id

    @property
    def machine_type(self) -> str:
        return self.instance_type


def error_line(exc: botocore.exceptions.ClientError) -> tuple[str, str, str]:
    """``(kind, code, message)`` of an EC2 error: kind is a capacity label, ``permission
    denied`` or ``error``; message is the first line of AWS's text."""
    err = exc.response.get("Error", {})
    code = str(err.get("Code") or "Unknown")
    msg = str(err.get("Message") or exc).strip().splitlines()
    text = (msg[0] if msg else "")[:200]
    if code in CAPACITY_CODES:
        return CAPACITY_CODES[code], code, text
    if code in PERMISSION_CODES:
        return "permission denied", code, text
    if code in THROTTLE_CODES:
        return "throttled (still, after aws.max_attempts tries)", code, text
    return "error", code, text


BOTO_FAILURES = (botocore.exceptions.BotoCoreError, botocore.parsers.ResponseParserError)
"""Client-side failures: no credentials, endpoint down, an answer that is not EC2's."""


def botocore_error(op: str, exc: Exception) -> AwsError:
    """One line for a client-side boto failure (no credentials, endpoint down, garbage)."""
    if isinstance(exc, botocore.exceptions.NoCredentialsError):
        return AwsError(
            "no AWS credentials found (environment, ~/.aws/credentials, aws.profile or instance role)"
        )
    if isinstance(exc, botocore.exceptions.EndpointConnectionError):
        return AwsError(f"EC2 {op}: cannot reach endpoint {exc.kwargs.get('endpoint_url')}")
    if isinstance(exc, botocore.parsers.ResponseParserError):
        return AwsError(
            f"EC2 {op}: the endpoint's answer is not an EC2 response ({str(exc).splitlines()[0][:160]})"
        )
    return AwsError(
        f"EC2 {op}: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    )


class Ec2Cluster(NodeLifecycle):
    """A ``provider: aws`` cluster's EC2 client and its instances (found by the cluster tag)."""

    machine_word = "instance"
    cluster_file_word = "SSH cluster file"

    def __init__(self, cluster: Cluster, *, client: Any = None, endpoint_url: str | None = None):
        super().__init__(cluster)
        self.settings: AwsSettings = load_section(cluster, "aws", AwsSettings)
        self.instance_types: dict[str, str | None] = {
            n.name: node_transport(cluster, n, AwsNode).instance_type for n in cluster.nodes
        }
        """Each node's ``instance_type`` (from its entry in the cluster file)."""
        self.source = cluster.source or cluster.name
        self.endpoint_url = (
            os.environ.get(ENDPOINT_ENV) or endpoint_url or self.settings.endpoint_url
        )
        self._client = client

    # -- boto3 -----------------------------------------------------------------------------
    @property
    def ec2(self) -> Any:
        """The EC2 client (credentials/region from the standard chain, profile, endpoint)."""
        if self._client is None:
            s = self.settings
            try:
                session = boto3.Session(profile_name=s.profile, region_name=s.region)
                config = Config(
                    retries={"mode": "adaptive", "total_max_attempts": s.max_attempts},
                    connect_timeout=30,
                    read_timeout=60,
                )
                self._client = session.client("ec2", endpoint_url=self.endpoint_url, config=config)
            except botocore.exceptions.ProfileNotFound:
                raise InputError(
                    f"{self.source}: aws.profile: AWS profile {s.profile!r} not found"
                ) from None
            except botocore.exceptions.NoRegionError:
                raise InputError(
                    f"{self.source}: aws.region: no region set (config, AWS_DEFAULT_REGION or profile)"
                ) from None
        return self._client

    def check_credentials(self) -> None:
        """:class:`AwsError` (no AWS credentials found) unless the standard chain finds some;
        nothing is asked of EC2."""
        if self._client is not None:
            return  # given one (tests, a caller's own session)
        s = self.settings
        try:
            found = boto3.Session(profile_name=s.profile, region_name=s.region).get_credentials()
        except botocore.exceptions.ProfileNotFound:
            raise InputError(
                f"{self.source}: aws.profile: AWS profile {s.profile!r} not found"
            ) from None
        except BOTO_FAILURES as exc:
            raise botocore_error("credentials", exc) from None
        if found is None:
            raise botocore_error("credentials", botocore.exceptions.NoCredentialsError())

    def _call(self, op: str, **kwargs: Any) -> Any:
        """Call an EC2 operation, turning credential/permission/other errors into one line."""
        try:
            return getattr(self.ec2, op)(**kwargs)
        except botocore.exceptions.ClientError as exc:
            kind, code, text = error_line(exc)
            raise AwsError(f"EC2 {op}: {kind}: {code}: {text}") from None
        except BOTO_FAILURES as exc:
            raise botocore_error(op, exc) from None

    def _require_instance_types(self) -> None:
        for node in self.cluster.nodes:
            if not self.instance_types[node.name]:
                raise InputError(
                    f"{self.source}: nodes[{node.name}].instance_type: missing required field "
                    f"(aws clusters launch one instance per node)"
                )

    # -- discovery -------------------------------------------------------------------------
    def instances(self, states: Sequence[str] = ACTIVE_STATES) -> list[Instance]:
        """This cluster's instances (by the ``hadar-cluster`` tag) in the given states."""
        filters = [
            {"Name": f"tag:{CLUSTER_TAG}", "Values": [self.cluster.name]},
            {"Name": "instance-state-name", "Values": list(states)},
        ]
        out: list[Instance] = []
        try:
            pages = self.ec2.get_paginator("describe_instances").paginate(
                Filters=filters, PaginationConfig={"PageSize": PAGE_SIZE}
            )
            for page in pages:
                for res in page.get("Reservations", []):
                    out.extend(self._instance(inst) for inst in res.get("Instances", []))
        except botocore.exceptions.ClientError as exc:
            kind, code, text = error_line(exc)
            raise AwsError(f"EC2 describe_instances: {kind}: {code}: {text}") from None
        except BOTO_FAILURES as exc:
            raise botocore_error("describe_instances", exc) from None
        out = [i for i in out if i.cluster == self.cluster.name]
        return sorted(out, key=lambda i: (self._order(i.node), i.instance_id))

    @staticmethod
    def _instance(inst: Mapping[str, Any]) -> Instance:
        tags = {t["Key"]: t["Value"] for t in inst.get("Tags", [])}
        return Instance(
            instance_id=inst["InstanceId"],
            node=tags.get(NODE_TAG, ""),
            instance_type=inst.get("InstanceType", ""),
            state=inst.get("State", {}).get("Name", "unknown"),
            public_ip=inst.get("PublicIpAddress"),
            private_ip=inst.get("PrivateIpAddress"),
            launch_time=inst.get("LaunchTime"),
            cluster=tags.get(CLUSTER_TAG, ""),
            lifecycle=inst.get("InstanceLifecycle", "on-demand"),
        )

    def _order(self, node: str) -> int:
        return self.cluster.node_index.get(node, len(self.cluster.nodes))

    def machines(self, everything: bool = False) -> list[Instance]:
        return self.instances(ALL_STATES if everything else ACTIVE_STATES)

    def scope(self) -> str:
        return f"instances tagged {CLUSTER_TAG}={self.cluster.name}"

    def running_nodes(self) -> dict[str, Instance]:
        """Node name -> its running instance (nodes whose instance was reclaimed are absent)."""
        out: dict[str, Instance] = {}
        for inst in self.instances(("running",)):
            if inst.node in self.cluster.node_index:
                out.setdefault(inst.node, inst)
        return out
