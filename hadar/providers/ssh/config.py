"""An SSH cluster's settings resolved per node: the ``ssh:`` section, the node entries and
``~/.ssh/config`` (first match wins), the route through bastions, the node's Python."""

from __future__ import annotations

import os
import shlex
from pathlib import Path

import paramiko

from hadar.core.cluster import Cluster, Node
from hadar.core.errors import InputError
from hadar.providers.base import NodeProvider, load_section
from hadar.providers.ssh import SshNode, SshNodeSettings, SshSettings
from hadar.providers.ssh.route import Endpoint, RawProxyCommandConfig, Route, pick_route, resolve
from hadar.providers.transport import node_transport


class SshConfig(NodeProvider):
    """The settings part of :class:`hadar.providers.ssh.provider.SshProvider`."""

    settings: SshSettings
    known_hosts: Path
    _trust_override: bool | None

    def _apply_settings(self, cluster: Cluster, settings: SshSettings | None = None) -> None:
        s = settings or load_section(cluster, "ssh", SshSettings)
        if self._trust_override is not None:
            s = s.model_copy(update={"trust_new_hosts": self._trust_override})
        unknown = sorted(set(s.nodes) - set(cluster.node_names))
        if unknown:
            raise InputError(
                f"{cluster.source or cluster.name}: ssh.nodes.{unknown[0]}: no such node in the cluster"
            )
        for n in cluster.nodes:  # a bad node entry fails here, not at first use
            node_transport(cluster, n, SshNode)
        self.settings = s
        self.known_hosts = Path(os.path.expanduser(s.known_hosts))
        self._ssh_config = self._load_ssh_config()

    # -- configuration ---------------------------------------------------------------------
    def _load_ssh_config(self) -> paramiko.SSHConfig | None:
        if not self.settings.ssh_config:
            return None
        path = Path(os.path.expanduser(self.settings.ssh_config))
        if not path.is_file():
            return None
        try:
            return RawProxyCommandConfig.from_path(str(path))
        except Exception as exc:  # paramiko raises ConfigParseError and friends
            raise InputError(f"{path}: cannot parse SSH config: {exc}") from None

    def endpoint(self, node: Node | str) -> Endpoint:
        """The merged connection settings of a node (node entry > ssh section > ~/.ssh/config),
        with its route: ProxyJump hops or a ProxyCommand (ssh.nodes.<node> > ssh > ssh_config)."""
        n = self.node(node)
        s = self.settings
        ns = self._node_settings(n)
        t = self.transport(n)
        source = self.cluster.source or self.cluster.name
        where, route = pick_route(
            [
                (f"{source}: ssh.nodes.{n.name}", Route(ns.proxy_jump, ns.proxy_command)),
                (f"{source}: ssh", Route(s.proxy_jump, s.proxy_command)),
            ]
        )
        return resolve(
            t.address or n.name,
            config=self._ssh_config,
            port=t.port or s.port,
            user=t.user or s.user,
            explicit_key=t.identity_file or s.identity_file,
            route=route,
            route_where=where,
            where=f"node {n.name}",
        )

    def transport(self, node: Node | str) -> SshNode:
        """The node entry's SSH keys (address, port, user, identity_file)."""
        return node_transport(self.cluster, self.node(node), SshNode)

    def _node_settings(self, node: Node) -> SshNodeSettings:
        return self.settings.nodes.get(node.name) or SshNodeSettings()

    def python(self, node: Node | str) -> list[str]:
        n = self.node(node)
        return shlex.split(self._node_settings(n).python or self.settings.python)

    def rendezvous_address(self, node: Node | str) -> str:
        n = self.node(node)
        return self._node_settings(n).rendezvous_address or self.endpoint(n).host
