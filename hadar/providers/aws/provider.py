"""AWS provider (boto3): launch one EC2 instance per node of a cluster file, find them again by
tag, terminate them, and run work on them over SSH (:class:`hadar.providers.ssh.provider.SshProvider`).

Every instance is tagged ``hadar-cluster: <cluster name>`` and ``hadar-node: <node name>`` (plus
``Name`` and the section's ``tags``); ``down`` and discovery only ever touch instances carrying
the cluster's tag. Credentials and region come from the standard AWS chain (environment,
``~/.aws`` files, ``profile``, instance role); ``endpoint_url`` (or the environment variable
``HADAR_AWS_ENDPOINT_URL``, which wins) points boto3 at another endpoint, e.g. moto in tests.

``aws:`` section keys::

    ami: ami-0123456789abcdef0        # required: an AMI with Python (and PyTorch + hadar)
    region: us-east-1                 profile: default        endpoint_url: null
    key_name: hadar                   # EC2 key pair for SSH
    ssh_user: ubuntu                  identity_file: ~/.ssh/hadar.pem
    security_group_ids: [sg-...]      subnet_id: subnet-...    tags: {project: hadar}
    address: public                   # which IP the SSH cluster file uses (public | private)
    root_volume_gb: null              python: python3          remote_base: null
    known_hosts: null                 trust_new_hosts: false   # passed to the SSH side
    wait_timeout_s: 900               ssh_wait_timeout_s: 600  poll_interval_s: 5
    spot: false                       spot_max_price: null     # USD/hour cap for spot
    setup: [pip install hadar-scheduler]  setup_timeout_s: 1800    # run once per instance after boot
    max_attempts: 10                  ssh_port: 22             # botocore adaptive retries

boto3 does the mechanics: a paginator lists instances, waiters wait for ``running`` and
``terminated``, and the client retries throttled calls in botocore's ``adaptive`` mode.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import datetime as dt
import hashlib
import json
import math
import os
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import botocore.exceptions
import botocore.parsers
import botocore.waiter
import yaml
from botocore.config import Config

from hadar.core.cluster import Cluster, Node
from hadar.core.cluster_config import cluster_from_dict
from hadar.core.errors import HadarError, InputError, UnreachableNodeError
from hadar.core.io import open_append, write_text
from hadar.providers.aws import CLUSTER_TAG, NODE_TAG, AwsNode, AwsSettings
from hadar.providers.aws.prices import estimate
from hadar.providers.base import (
    PROBE_TIMEOUT_S,
    NodeHealth,
    NodeProvider,
    RunsThroughAnother,
    load_section,
)
from hadar.providers.lifecycle import LaunchCost, Log, Machine, NodeLifecycle
from hadar.providers.ssh import DEFAULT_KNOWN_HOSTS
from hadar.providers.ssh.provider import SshProvider, known_hosts_name
from hadar.providers.ssh.route import key_file_problem
from hadar.providers.transport import node_transport, provider_schema

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


def host_keys_from_console(text: str) -> list[tuple[str, str]]:
    """``(key type, base64)`` pairs cloud-init prints between ``-----BEGIN SSH HOST KEY KEYS-----``
    and ``-----END SSH HOST KEY KEYS-----`` on the instance console (an out-of-band channel
    to learn a new instance's host keys)."""
    keys: list[tuple[str, str]] = []
    inside = False
    for raw in text.splitlines():
        line = raw.strip()
        if "BEGIN SSH HOST KEY KEYS" in line:
            inside = True
            continue
        if "END SSH HOST KEY KEYS" in line:
            inside = False
            continue
        parts = line.split()
        if inside and len(parts) >= 2 and (parts[0].startswith(("ssh-", "ecdsa-"))):
            with contextlib.suppress(binascii.Error, ValueError):
                base64.b64decode(parts[1], validate=True)
                keys.append((parts[0], parts[1]))
    return keys


def ssh_banner(host: str, port: int = 22, timeout_s: float = 5.0) -> bool:
    """True if an SSH server answers with its banner at ``host:port``."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as s:
            s.settimeout(timeout_s)
            return s.recv(8).startswith(b"SSH-")
    except OSError:
        return False


class AwsCluster(NodeLifecycle):
    """The EC2 side of a ``provider: aws`` cluster: launch, discover and terminate its instances."""

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

    # -- launch ----------------------------------------------------------------------------
    def _launch_args(self, node: Node) -> dict[str, Any]:
        s = self.settings
        tags = {
            **s.tags,
            "Name": f"hadar-{self.cluster.name}-{node.name}",
            CLUSTER_TAG: self.cluster.name,
            NODE_TAG: node.name,
        }
        args: dict[str, Any] = {
            "ImageId": s.ami,
            "InstanceType": self.instance_types[node.name],
            "MinCount": 1,
            "MaxCount": 1,
            "TagSpecifications": [
                {
                    "ResourceType": "instance",
                    "Tags": [{"Key": k, "Value": v} for k, v in tags.items()],
                },
                {
                    "ResourceType": "volume",
                    "Tags": [{"Key": CLUSTER_TAG, "Value": self.cluster.name}],
                },
            ],
        }
        if s.key_name:
            args["KeyName"] = s.key_name
        if s.security_group_ids:
            args["SecurityGroupIds"] = list(s.security_group_ids)
        if s.subnet_id:
            args["SubnetId"] = s.subnet_id
        if s.root_volume_gb:
            args["BlockDeviceMappings"] = [
                {"DeviceName": "/dev/sda1", "Ebs": {"VolumeSize": s.root_volume_gb}}
            ]
        if s.spot:
            spot: dict[str, Any] = {
                "SpotInstanceType": "one-time",
                "InstanceInterruptionBehavior": "terminate",
            }
            if s.spot_max_price:
                spot["MaxPrice"] = s.spot_max_price
            args["InstanceMarketOptions"] = {"MarketType": "spot", "SpotOptions": spot}
        return args

    def to_launch(self) -> tuple[list[Node], dict[str, Instance]]:
        """The nodes that have no pending or running instance (what ``up`` would launch), and
        the instances the others already have."""
        self._require_instance_types()
        have = {i.node: i for i in self.instances(("pending", "running"))}
        return [n for n in self.cluster.nodes if n.name not in have], have

    def _launch_failure(
        self,
        exc: botocore.exceptions.ClientError,
        node: Node,
        failures: dict[tuple[str, str, str, str], list[str]],
    ) -> None:
        kind, code, text = error_line(exc)
        if self.settings.spot and kind in ("no capacity", "spot quota exceeded"):
            kind = f"{kind} for spot instances"
            text = f"{text} (retry later, pick another instance type or subnet, or set aws.spot: false)"
        itype = str(self.instance_types[node.name])
        failures.setdefault((itype, kind, code, text), []).append(node.name)

    @staticmethod
    def _failure_lines(failures: Mapping[tuple[str, str, str, str], list[str]]) -> list[str]:
        return [
            f"{itype} (node{'s' if len(names) > 1 else ''} {', '.join(names)}): {kind}: {code}: {text}"
            for (itype, kind, code, text), names in failures.items()
        ]

    def cost(self, nodes: Sequence[Node]) -> LaunchCost:
        """The hourly price of ``nodes``' instance types from the bundled, dated table
        (:mod:`hadar.providers.aws.prices`), with its notes (unknown types, region, spot, age)."""
        s = self.settings
        return estimate(
            [str(self.instance_types[n.name]) for n in nodes],
            region=s.region,
            spot=s.spot,
            spot_max_price=s.spot_max_price,
        )

    def dry_run(self, nodes: Sequence[Node]) -> str:
        """Ask EC2 whether launching ``nodes`` would succeed (``DryRun=True``: permissions, AMI,
        instance types, key pair, subnet and security groups are checked, nothing is
        launched); failures are one :class:`AwsError` with a line per instance type and cause."""
        failures: dict[tuple[str, str, str, str], list[str]] = {}
        for node in nodes:
            try:
                self.ec2.run_instances(**self._launch_args(node), DryRun=True)
            except botocore.exceptions.ClientError as exc:
                if exc.response.get("Error", {}).get("Code") == "DryRunOperation":
                    continue  # "Request would have succeeded, but DryRun flag is set"
                self._launch_failure(exc, node, failures)
            except botocore.exceptions.BotoCoreError as exc:
                raise botocore_error("run_instances", exc) from None
            else:  # an endpoint that ignores DryRun launched it: say so rather than hide it
                raise AwsError(
                    f"EC2 run_instances: the endpoint ignored DryRun and launched an instance "
                    f"for node {node.name}; run `hadar cluster down`"
                )
        if failures:
            raise AwsError(
                f"dry run: {sum(len(v) for v in failures.values())} of {len(nodes)} launches "
                "would fail:\n  " + "\n  ".join(self._failure_lines(failures))
            )
        return (
            f"dry run: EC2 would launch all {len(nodes)} instances (DryRun accepted every "
            "request); nothing launched"
        )

    def up(self, *, wait_ssh: bool = True, log: Log = lambda _m: None) -> list[Instance]:
        """Launch an instance for every node that has none (idempotent), wait until all are
        running (and answer on SSH unless ``wait_ssh`` is False); returns them in node order.
        Launch failures are reported per instance type, one line each, as :class:`AwsError`."""
        missing, have = self.to_launch()
        failures: dict[tuple[str, str, str, str], list[str]] = {}
        expected = {name: inst.instance_id for name, inst in have.items()}
        for node in self.cluster.nodes:
            if node.name in have:
                log(
                    f"{node.name}: already has {have[node.name].instance_id} ({have[node.name].state})"
                )
                continue
            try:
                resp = self.ec2.run_instances(**self._launch_args(node))
            except botocore.exceptions.ClientError as exc:
                self._launch_failure(exc, node, failures)
                continue
            except BOTO_FAILURES as exc:
                raise botocore_error("run_instances", exc) from None
            inst = resp["Instances"][0]
            expected[node.name] = inst["InstanceId"]
            market = " spot" if self.settings.spot else ""
            log(
                f"{node.name}: launched {inst['InstanceId']} ({self.instance_types[node.name]}{market})"
            )
        if failures:
            ok = len(self.cluster.nodes) - sum(len(v) for v in failures.values())
            raise AwsError(
                f"{sum(len(v) for v in failures.values())} of {len(self.cluster.nodes)} instances "
                f"could not be launched ({ok} launched or already up; re-run `hadar cluster up` "
                f"to retry, `hadar cluster down` to terminate):\n  "
                + "\n  ".join(self._failure_lines(failures))
            )
        instances = self.wait_running(expected)
        if wait_ssh:
            self.wait_ssh(instances)
        return instances

    def wait_running(self, expected: Mapping[str, str]) -> list[Instance]:
        """Wait (boto3's ``instance_running`` waiter) until each node's instance (``expected``:
        node -> instance id) runs; returns them in node order. An instance that stops or
        terminates meanwhile is an error naming its node."""
        s = self.settings
        if not expected:
            return []
        try:
            self.ec2.get_waiter("instance_running").wait(
                InstanceIds=list(expected.values()),
                WaiterConfig={
                    "Delay": s.poll_interval_s,
                    "MaxAttempts": max(1, math.ceil(s.wait_timeout_s / s.poll_interval_s)),
                },
            )
        except botocore.exceptions.WaiterError as exc:
            self._explain_wait_failure(expected, exc)
        except BOTO_FAILURES as exc:
            raise botocore_error("describe_instances", exc) from None
        found = {i.instance_id: i for i in self.instances(ALL_STATES)}
        return [found[expected[n]] for n in self.cluster.node_names if expected.get(n) in found]

    def _explain_wait_failure(
        self, expected: Mapping[str, str], exc: botocore.exceptions.WaiterError
    ) -> None:
        found = {i.instance_id: i for i in self.instances(ALL_STATES)}
        current = {node: found.get(iid) for node, iid in expected.items()}
        broken = [
            f"node {node}: instance {i.instance_id} is {i.state}"
            for node, i in current.items()
            if i is not None and i.state in ("shutting-down", "terminated", "stopping", "stopped")
        ]
        if broken:
            raise AwsError("; ".join(broken) + " (while waiting for it to run)")
        last = getattr(exc, "last_response", None) or {}
        if "Error" in last:
            err = last["Error"]
            raise AwsError(f"EC2 describe_instances: {err.get('Code')}: {err.get('Message')}")
        states = ", ".join(
            f"{n} ({i.state if i else 'not listed yet'})"
            for n, i in current.items()
            if i is None or i.state != "running"
        )
        raise AwsError(f"instances not running after {self.settings.wait_timeout_s:g}s: {states}")

    def wait_ssh(self, instances: Sequence[Instance], timeout_s: float | None = None) -> None:
        """Poll until every instance answers on port 22; learn host keys from the console."""
        s = self.settings
        deadline = time.monotonic() + (timeout_s if timeout_s is not None else s.ssh_wait_timeout_s)
        waiting = {i.node: i for i in instances}
        while waiting:
            for name, inst in list(waiting.items()):
                addr = inst.address(s.address)
                if addr and ssh_banner(addr, s.ssh_port, min(5.0, s.poll_interval_s)):
                    self.record_console_host_keys(inst)
                    del waiting[name]
            if not waiting:
                return
            if time.monotonic() > deadline:
                where = ", ".join(
                    f"{n} ({i.address(s.address)}:{s.ssh_port})" for n, i in waiting.items()
                )
                raise UnreachableNodeError(
                    f"not reachable over SSH after {timeout_s or s.ssh_wait_timeout_s:g}s: {where}"
                )
            time.sleep(s.poll_interval_s)

    def prepare(
        self, machines: Sequence[Machine], *, wait: bool, timeout_s: float | None, log: Log
    ) -> None:
        """Wait until the instances answer on SSH, then run ``aws.setup`` on them; without
        ``wait``, say that ``aws.setup`` was not run."""
        instances = [m for m in machines if isinstance(m, Instance)]
        if not wait:
            if self.settings.setup:
                log("aws.setup not run (--no-wait-ssh): run `hadar cluster up` again to run it")
            return
        log(f"waiting for SSH on {len(instances)} instances...")
        self.wait_ssh(instances, timeout_s)
        if self.settings.setup:
            log(f"running aws.setup on {len(instances)} instances...")
            self.run_setup(instances, log=log)

    def known_hosts_path(self) -> Path:
        """Where console host keys are recorded: the aws section's file, else the ssh section's
        (the file the SSH side will check against), else ~/.ssh/known_hosts."""
        ssh_side = (self.cluster.settings.get("ssh") or {}).get("known_hosts")
        return Path(
            os.path.expanduser(self.settings.known_hosts or ssh_side or DEFAULT_KNOWN_HOSTS)
        )

    def record_console_host_keys(self, inst: Instance) -> int:
        """Record the host keys an instance printed on its console (cloud-init) in known_hosts,
        so strict host-key checking works without trusting the first connection."""
        addr = inst.address(self.settings.address)
        if not addr:
            return 0
        try:
            resp = self.ec2.get_console_output(InstanceId=inst.instance_id, Latest=True)
        except botocore.exceptions.ClientError:
            return 0
        text = resp.get("Output") or ""
        keys = host_keys_from_console(text)
        if not keys:
            return 0
        path = self.known_hosts_path()
        path.parent.mkdir(parents=True, exist_ok=True)
        existing = path.read_text() if path.is_file() else ""
        name = known_hosts_name(addr, self.settings.ssh_port)
        new = [f"{name} {kt} {b64}\n" for kt, b64 in keys if f"{name} {kt} {b64}" not in existing]
        # links followed: a dotfile manager may link ~/.ssh/known_hosts
        with open_append(path, follow_links=True, mode=0o600) as f:
            f.writelines(new)
        return len(new)

    # -- teardown --------------------------------------------------------------------------
    def down(self, log: Log = lambda _m: None, wait: bool = True) -> list[str]:
        """Terminate every instance tagged for this cluster (none: nothing to do) and, with
        ``wait``, block until EC2 reports them terminated (boto3's waiter)."""
        victims = self.instances(ACTIVE_STATES)
        if not victims:
            return []
        ids = [i.instance_id for i in victims]
        self._call("terminate_instances", InstanceIds=ids)
        for i in victims:
            log(f"{i.node or '?'}: terminating {i.instance_id} ({i.instance_type}, was {i.state})")
        if wait:
            s = self.settings
            try:
                self.ec2.get_waiter("instance_terminated").wait(
                    InstanceIds=ids,
                    WaiterConfig={
                        "Delay": s.poll_interval_s,
                        "MaxAttempts": max(1, math.ceil(s.wait_timeout_s / s.poll_interval_s)),
                    },
                )
            except botocore.exceptions.WaiterError as exc:
                raise AwsError(
                    f"termination requested for {len(ids)} instances but not confirmed after "
                    f"{s.wait_timeout_s:g}s ({exc.kwargs.get('reason', exc)}); "
                    f"check with `hadar cluster status`"
                ) from None
        return ids

    # -- setup after boot ------------------------------------------------------------------
    def run_setup(
        self, instances: Sequence[Instance], log: Callable[[str], None] = lambda _m: None
    ) -> None:
        """Run ``aws.setup`` over SSH on every instance, in parallel, once per instance: a
        marker file in ``~/.hadar`` (named by the commands' hash) skips instances that already
        ran the same commands. Failures: one :class:`AwsError` with one line per instance."""
        setup = self.settings.setup
        if not setup or not instances:
            return
        digest = hashlib.sha256(json.dumps(setup).encode()).hexdigest()[:12]
        marker = f'"$HOME/.hadar/setup-{digest}.done"'
        script = "\n".join(
            [
                f"if [ -f {marker} ]; then echo HADAR-SETUP-SKIPPED; exit 0; fi",
                "set -e",
                *setup,
                f'mkdir -p "$HOME/.hadar"; touch {marker}',
            ]
        )
        data = self.ssh_cluster_dict(instances)
        ssh_side = dict(data["ssh"])
        ssh_side.pop("setup", None)  # the per-run setup may need what this one installs
        ssh_side["nodes"] = {
            k: {kk: vv for kk, vv in v.items() if kk != "setup"}
            for k, v in (ssh_side.get("nodes") or {}).items()
        }
        cluster = cluster_from_dict(
            {**data, "ssh": ssh_side},
            source=f"{self.source} (setup)",
            schema=provider_schema(),
        )
        by_node = {i.node: i for i in instances}
        timeout = self.settings.setup_timeout_s

        def one(node: Node) -> str | None:
            inst = by_node[node.name]
            try:
                res = ssh.run(node, ["sh", "-c", script], timeout)
            except HadarError as exc:
                return f"{node.name} ({inst.instance_id}): {exc}"
            if res.timed_out:
                return f"{node.name} ({inst.instance_id}): setup timed out after {timeout:g}s"
            if res.returncode != 0:
                return (
                    f"{node.name} ({inst.instance_id}): setup failed (exit {res.returncode}): "
                    f"{res.tail(2) or 'no output'}"
                )
            done = "already set up" if "HADAR-SETUP-SKIPPED" in res.stdout else "setup done"
            log(f"{node.name}: {done} ({res.seconds:.1f}s)")
            return None

        with SshProvider(cluster, "hadar-setup") as ssh, ThreadPoolExecutor(8) as pool:
            failures = [f for f in pool.map(one, cluster.nodes) if f]
        if failures:
            raise AwsError(
                f"setup failed on {len(failures)} of {len(instances)} instances (fix aws.setup "
                f"and re-run `hadar cluster up`; finished instances are skipped):\n  "
                + "\n  ".join(failures)
            )

    # -- the SSH view ----------------------------------------------------------------------
    def ssh_cluster_dict(
        self, instances: Sequence[Instance] | Mapping[str, Instance]
    ) -> dict[str, Any]:
        """The ``provider: ssh`` cluster mapping for the given instances (GPUs and speed factors
        from the aws cluster file; rendezvous over the private network)."""
        by_node = (
            dict(instances) if isinstance(instances, Mapping) else {i.node: i for i in instances}
        )
        s = self.settings
        nodes: list[dict[str, Any]] = []
        overrides: dict[str, dict[str, Any]] = {}
        for node in self.cluster.nodes:
            inst = by_node.get(node.name)
            if inst is None or not inst.address(s.address):
                continue
            entry: dict[str, Any] = {
                "name": node.name,
                "gpus": dict(node.gpus),
                "pcie_gen": node.pcie_gen,
                "address": inst.address(s.address),
                "port": s.ssh_port,
                "user": s.ssh_user,
                "instance_type": inst.instance_type,
            }
            if s.identity_file:
                entry["identity_file"] = s.identity_file
            if node.speed_factor != 1.0:
                entry["speed_factor"] = node.speed_factor
            nodes.append(entry)
            if inst.private_ip:
                overrides[node.name] = {"rendezvous_address": inst.private_ip}
        # The cluster file's own `ssh:` section (timeouts, retries...) carries over; the aws
        # section's SSH-side keys win where they are set.
        ssh: dict[str, Any] = dict(self.cluster.settings.get("ssh") or {})
        for key in ("python", "trust_new_hosts", "remote_base", "known_hosts"):
            value = getattr(s, key)
            if value is not None and (key in s.model_fields_set or key not in ssh):
                ssh[key] = value
        present = {n["name"] for n in nodes}
        user_nodes = ssh.pop("nodes", None) or {}
        for name, extra in user_nodes.items() if isinstance(user_nodes, Mapping) else ():
            if name in present and isinstance(extra, Mapping):
                overrides[name] = {**overrides.get(name, {}), **extra}
        if overrides:
            ssh["nodes"] = {k: v for k, v in overrides.items() if k in present}
        out: dict[str, Any] = {
            "name": self.cluster.name,
            "provider": "ssh",
            "description": f"EC2 instances of {self.cluster.name} launched by hadar cluster up",
        }
        if self.cluster.settings.get("gpu_types"):  # the user's own GPU types travel along
            out["gpu_types"] = dict(self.cluster.settings["gpu_types"])
        if self.cluster.network is not None:  # so does the network, over the nodes launched
            out["network"] = network_over(self.cluster.network.as_spec(), present)
        return {**out, "nodes": nodes, "ssh": ssh}

    def write_cluster_file(self, path: Path | None, machines: Sequence[Machine]) -> Path:
        """The SSH cluster file (default: ``./<cluster name>-ssh.yaml``)."""
        instances = [m for m in machines if isinstance(m, Instance)]
        return self.write_ssh_cluster(path or Path(f"{self.cluster.name}-ssh.yaml"), instances)

    def write_ssh_cluster(self, path: str | Path, instances: Sequence[Instance]) -> Path:
        """Write the SSH cluster YAML for ``instances`` (a header lists the instance ids)."""
        p = Path(path)
        data = self.ssh_cluster_dict(instances)
        header = [
            f"# Written by `hadar cluster up --config {self.source}` at "
            f"{dt.datetime.now(dt.timezone.utc).isoformat(timespec='seconds')}.",
            f"# Terminate with `hadar cluster down --config {self.source}`.",
        ]
        header += [
            f"#   {i.node}: {i.instance_id} {i.instance_type} public={i.public_ip} private={i.private_ip}"
            for i in instances
        ]
        return write_text(p, "\n".join(header) + "\n" + yaml.safe_dump(data, sort_keys=False))


def network_over(spec: dict[str, Any], present: set[str]) -> dict[str, Any]:
    """A ``network:`` section restricted to the ``present`` nodes: racks keep only those nodes,
    and racks left empty (with the links that name them) are dropped."""
    racks = []
    for rack in spec["racks"]:
        kept = [n for n in rack["nodes"] if n in present]
        if kept:
            racks.append({**rack, "nodes": kept})
    names = {r["name"] for r in racks}
    links = [link for link in spec.get("links", []) if set(link["between"]) <= names]
    out = {k: v for k, v in spec.items() if k != "links"}
    out["racks"] = racks
    if links:
        out["links"] = links
    return out


class AwsProvider(RunsThroughAnother):
    """Run work on the cluster's running EC2 instances over SSH. :meth:`nodes` re-reads EC2, so
    a reclaimed instance drops out (node churn); operations on it raise UnreachableNodeError."""

    def __init__(
        self,
        cluster: Cluster,
        run_id: str,
        *,
        trust_new_hosts: bool | None = None,
        aws: AwsCluster | None = None,
    ) -> None:
        super().__init__(cluster, run_id)
        self.aws = aws or AwsCluster(cluster)
        self._trust = trust_new_hosts
        self._ssh: SshProvider | None = None
        self._running: dict[str, Instance] = {}
        self._lock = threading.RLock()

    @classmethod
    def check_setup(cls, cluster: Cluster) -> None:
        """Before a run writes anything: ``aws.identity_file`` is a regular file (exit 2), and
        the standard chain (environment, ``~/.aws``, ``aws.profile``, instance role) has
        credentials (the one line EC2 calls give without them)."""
        aws = AwsCluster(cluster)
        key = aws.settings.identity_file
        missing = None if key is None else key_file_problem(key)
        if missing is not None:
            raise InputError(f"{aws.source}: aws.identity_file: {key} {missing}")
        aws.check_credentials()

    def refresh(self) -> dict[str, Instance]:
        """Re-read which nodes have a running instance and update the SSH side."""
        with self._lock:
            return self._refresh()

    def _refresh(self) -> dict[str, Instance]:
        running = self.aws.running_nodes()
        data = self.aws.ssh_cluster_dict(running)
        reachable = {n["name"] for n in data["nodes"]}
        self._running = {k: v for k, v in running.items() if k in reachable}
        if not self._running:
            if self._ssh is not None:
                self._ssh.close()
            self._ssh = None
            return {}
        ssh_cluster = cluster_from_dict(
            data, source=f"{self.aws.source} (running instances)", schema=provider_schema()
        )
        if self._ssh is None:
            self._ssh = SshProvider(ssh_cluster, self.run_id, trust_new_hosts=self._trust)
        else:
            self._ssh.update_cluster(ssh_cluster)
        return dict(self._running)

    def nodes(self) -> list[Node]:
        self.refresh()
        return [self.node(n) for n in self.cluster.node_names if n in self._running]

    def _via(self, node: Node | str) -> tuple[SshProvider, str]:
        name = self.node(node).name
        with self._lock:
            if self._ssh is None or name not in self._running:
                self._refresh()
            ssh = self._ssh
        if ssh is None or name not in self._running:
            raise UnreachableNodeError(
                f"node {name}: no running EC2 instance tagged {CLUSTER_TAG}={self.cluster.name}, "
                f"{NODE_TAG}={name}"
            )
        return ssh, name

    def check(self, node: Node | str, timeout_s: float = PROBE_TIMEOUT_S) -> NodeHealth:
        try:
            ssh, name = self._via(node)
        except (UnreachableNodeError, AwsError) as exc:
            return NodeHealth(self.node(node).name, False, None, error=str(exc))
        return ssh.check(name, timeout_s)

    def runner(self, node: Node | str) -> tuple[NodeProvider, str]:
        """The SSH provider of the running instances, and the node's name there."""
        return self._via(node)

    def close(self) -> None:
        if self._ssh is not None:
            self._ssh.close()
            self._ssh = None
