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

The provider is split as transport vs lifecycle: :class:`AwsProvider` (here) runs commands and
moves files on the running instances over SSH; :class:`AwsCluster`
(:mod:`hadar.providers.aws.lifecycle`) launches and terminates them, over the EC2 access of
:mod:`hadar.providers.aws.ec2` and the SSH side of :mod:`hadar.providers.aws.ssh_side`.

boto3 does the mechanics: a paginator lists instances, waiters wait for ``running`` and
``terminated``, and the client retries throttled calls in botocore's ``adaptive`` mode.
"""

from __future__ import annotations

import threading

from hadar.core.cluster import Cluster, Node
from hadar.core.cluster_config import cluster_from_dict
from hadar.core.errors import InputError, UnreachableNodeError
from hadar.providers.aws import CLUSTER_TAG, NODE_TAG
from hadar.providers.aws.ec2 import AwsError, Instance
from hadar.providers.aws.lifecycle import AwsCluster
from hadar.providers.aws.ssh_side import host_keys_from_console
from hadar.providers.base import PROBE_TIMEOUT_S, NodeHealth, NodeProvider, RunsThroughAnother
from hadar.providers.ssh.provider import SshProvider
from hadar.providers.ssh.route import key_file_problem
from hadar.providers.transport import provider_schema

__all__ = ["AwsCluster", "AwsError", "AwsProvider", "Instance", "host_keys_from_console"]


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
