"""The lifecycle of a ``provider: aws`` cluster's instances: launch (with a dry run and a cost
estimate), wait until they run, prepare them, terminate them (``hadar cluster up|down``)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import botocore.exceptions
import botocore.parsers
import botocore.waiter

from hadar.core.cluster import Node
from hadar.providers.aws import CLUSTER_TAG, NODE_TAG
from hadar.providers.aws.ec2 import (
    ACTIVE_STATES,
    ALL_STATES,
    BOTO_FAILURES,
    AwsError,
    Instance,
    botocore_error,
    error_line,
)
from hadar.providers.aws.prices import estimate
from hadar.providers.aws.ssh_side import Ec2SshSide
from hadar.providers.lifecycle import LaunchCost, Log, Machine


class AwsCluster(Ec2SshSide):
    """The EC2 side of a ``provider: aws`` cluster: launch, discover and terminate its instances."""

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
