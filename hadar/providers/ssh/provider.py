"""SSH provider (paramiko): nodes are machines reached over SSH, directly or through a bastion.

Where a node's connection settings come from, first match wins:
the node entry (``address``, ``port``, ``user``, ``identity_file``), the cluster file's ``ssh:``
section, then ``~/.ssh/config`` (``Host`` aliases with ``HostName``, ``Port``, ``User``,
``IdentityFile``, ``ProxyJump``, ``ProxyCommand``). The route (ProxyJump hops or a
ProxyCommand) comes from ``ssh.nodes.<node>``, then ``ssh:``, then ``~/.ssh/config``; jump
hosts are themselves looked up in ``~/.ssh/config`` and share one connection per hop. Keys from
a running SSH agent are tried too. Host keys (of every hop) are checked strictly against
``known_hosts``: an unknown key is refused unless ``trust_new_hosts`` is set (then it is
recorded), a changed key is always refused. All remote files live in
``<remote_base>/<run-id>/<node>/``; paths that try to leave it are refused.

The provider is split as lifecycle vs transport: :class:`SshProvider` (here) sets up, updates,
checks and closes; the transport, commands and files (:mod:`hadar.providers.ssh.commands`), runs
over the connections of :mod:`hadar.providers.ssh.connections`, with the settings of
:mod:`hadar.providers.ssh.config` and the host keys of :mod:`hadar.providers.ssh.hostkeys`.

Environment: ``setup:`` lines run once per run on each node (first use), in one shell, in the
node's workdir (``set -e``); the variables they set (``conda activate`` ...) are kept for every
later command of the run, as are those of the user's login shell with ``login_shell: true``;
``env:`` adds fixed variables. Connection retries use tenacity (bounded exponential backoff).

``ssh:`` section keys (all optional)::

    user: ubuntu                  port: 22                 identity_file: ~/.ssh/id_ed25519
    known_hosts: ~/.ssh/known_hosts                        trust_new_hosts: false
    ssh_config: ~/.ssh/config     # null: do not read one
    proxy_jump: me@bastion.lab:22 # OpenSSH syntax, comma-separated hops; or
    proxy_command: ssh -W %h:%p bastion                    # (not both; "none": off)
    allow_agent: true             look_for_keys: true      # paramiko's ~/.ssh/id_* lookup
    connect_timeout_s: 10         io_timeout_s: 120        keepalive_s: 15
    connect_attempts: 3           retry_backoff_s: 0.5     kill_grace_s: 3
    remote_base: ~/.hadar/runs    python: python3
    env: {OMP_NUM_THREADS: "4"}   login_shell: false
    setup: [source ~/miniconda3/etc/profile.d/conda.sh, conda activate hadar]
    setup_timeout_s: 1800
    nodes:                        # per-node overrides (env adds to the section's)
      gpu1: {python: /opt/venv/bin/python, remote_base: /scratch/hadar, rendezvous_address: 10.0.0.5,
             proxy_jump: me@other-bastion, env: {CUDA_VISIBLE_DEVICES: "0"}, setup: [...]}
"""

from __future__ import annotations

import shlex
import threading
import time

from hadar.core.cluster import Cluster, Node
from hadar.core.errors import InputError, UnreachableNodeError
from hadar.providers import health
from hadar.providers.base import PROBE_TIMEOUT_S, NodeHealth, load_section
from hadar.providers.ssh import SshNode, SshSettings
from hadar.providers.ssh.commands import NodeSetupError, SshCommands
from hadar.providers.ssh.connections import Conn
from hadar.providers.ssh.env import env_prefix
from hadar.providers.ssh.hostkeys import fingerprint, known_hosts_name, record_host_key
from hadar.providers.ssh.route import Endpoint, key_file_problem
from hadar.providers.transport import node_transport

__all__ = ["NodeSetupError", "SshProvider", "fingerprint", "known_hosts_name", "record_host_key"]


class SshProvider(SshCommands):
    """Nodes reached over SSH with paramiko (see the module docstring for the settings)."""

    def __init__(
        self,
        cluster: Cluster,
        run_id: str,
        *,
        trust_new_hosts: bool | None = None,
        settings: SshSettings | None = None,
    ) -> None:
        super().__init__(cluster, run_id)
        self._trust_override = trust_new_hosts
        self._apply_settings(cluster, settings)
        self._conns: dict[str, Conn] = {}
        self._jumps: dict[Endpoint, Conn] = {}
        self._conns_lock = threading.Lock()
        self._run_env: dict[str, dict[str, str]] = {}
        self._setup_locks: dict[str, threading.Lock] = {}

    @classmethod
    def check_setup(cls, cluster: Cluster) -> None:
        """Every ``identity_file`` the cluster file names is a regular file (exit 2 before the
        run writes anything, not an unreachable node, exit 3, at the first probe)."""
        s = load_section(cluster, "ssh", SshSettings)
        source = cluster.source or cluster.name
        for n in cluster.nodes:
            key = node_transport(cluster, n, SshNode).identity_file or s.identity_file
            missing = None if key is None else key_file_problem(key)
            if missing is not None:
                raise InputError(f"{source}: node {n.name}: identity_file {key} {missing}")

    def update_cluster(self, cluster: Cluster) -> None:
        """Swap in a new node list and ssh settings (cloud churn); connections of changed or
        gone nodes close (and their setup runs again on next use), the others stay open."""
        self._apply_settings(cluster)
        self.cluster = cluster
        with self._conns_lock:
            for name, conn in list(self._conns.items()):
                gone = name not in cluster.node_index
                if gone or (conn.endpoint and conn.endpoint != self.endpoint(name)):
                    conn.drop()
                    del self._conns[name]
                    self._run_env.pop(name, None)

    # -- health ----------------------------------------------------------------------------
    def check(self, node: Node | str, timeout_s: float = PROBE_TIMEOUT_S) -> NodeHealth:
        n = self.node(node)
        start = time.monotonic()
        try:
            ep = self.endpoint(n)
        except InputError as exc:
            return NodeHealth(n.name, False, self.transport(n).address, error=str(exc))
        address = str(ep)
        try:
            py = self.python(n)
            cmd = env_prefix(self.run_env(n)) + " ".join(
                shlex.quote(a) for a in [*py, "-c", health.SNIPPET]
            )
            res = self._retrying(n, "health check", lambda c: self._exec(n, c, cmd, timeout_s))
        except UnreachableNodeError as exc:
            return NodeHealth(
                n.name, False, address, error=str(exc), seconds=time.monotonic() - start
            )
        seconds = time.monotonic() - start
        return health.node_health(n.name, address, res, seconds, timeout_s, py[0])

    def close(self) -> None:
        with self._conns_lock:
            for conn in [*self._conns.values(), *self._jumps.values()]:
                conn.drop()
            self._conns.clear()
            self._jumps.clear()
