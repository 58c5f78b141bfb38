"""The SSH side of a ``provider: aws`` cluster's instances: waiting until they answer, their host
keys from the console, ``aws.setup`` run over SSH, and the ``provider: ssh`` cluster file that
reaches them."""

from __future__ import annotations

import base64
import binascii
import contextlib
import datetime as dt
import hashlib
import json
import os
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import botocore.exceptions
import botocore.parsers
import botocore.waiter
import yaml

from hadar.core.cluster import Node
from hadar.core.cluster_config import cluster_from_dict
from hadar.core.errors import HadarError, UnreachableNodeError
from hadar.core.io import open_append, write_text
from hadar.providers.aws.ec2 import AwsError, Ec2Cluster, Instance
from hadar.providers.lifecycle import Machine
from hadar.providers.ssh import DEFAULT_KNOWN_HOSTS
from hadar.providers.ssh.provider import SshProvider, known_hosts_name
from hadar.providers.transport import provider_schema


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


class Ec2SshSide(Ec2Cluster):
    """Reaching a cluster's instances over SSH once they run."""

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
