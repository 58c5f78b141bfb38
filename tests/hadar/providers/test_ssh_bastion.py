"""SSH through a bastion: a real jump host and a node whose sshd lives in its own network
namespace, so it can only be reached through the jump host (tests/fixtures/sshd.py:Bastion)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from hadar.clusters import cluster_from_dict
from hadar.core.errors import InputError, UnreachableNodeError
from hadar.providers.base import make_provider
from hadar.providers.ssh.provider import SshProvider
from tests.fixtures.sshd import Bastion, free_port

pytestmark = pytest.mark.ssh
NODE = "gpu-behind"


def provider(b: Bastion, run_id: str = "r", node: dict | None = None, **ssh) -> SshProvider:
    data = b.cluster_dict(**ssh)
    data["nodes"][0].update(node or {})
    p = make_provider(cluster_from_dict(data, source="lab.yaml"), run_id)
    assert isinstance(p, SshProvider)
    return p


def netns_interfaces(p: SshProvider) -> list[str]:
    """Network interfaces the node's commands see (/proc/net/dev is per network namespace)."""
    res = p.run(NODE, ["cat", "/proc/net/dev"], 30)
    assert res.ok, res.stderr
    return [line.split(":")[0].strip() for line in res.stdout.splitlines()[2:]]


def test_the_node_is_unreachable_without_the_jump_host(bastion: Bastion) -> None:
    with provider(bastion, proxy_jump=None) as p:
        health = p.check(NODE, timeout_s=20)
    assert not health.reachable
    assert f"node {NODE} (127.0.0.1:{bastion.target.port})" in health.error
    assert "connection refused" in health.error


def test_proxy_jump_from_the_cluster_file_runs_and_transfers(
    bastion: Bastion, tmp_path: Path
) -> None:
    jumps_before, logins_before = bastion.logins()
    with provider(bastion) as p:
        assert str(p.endpoint(NODE)) == (
            f"127.0.0.1:{bastion.target.port} via 127.0.0.1:{bastion.jump.port}"
        )
        assert netns_interfaces(p) == ["lo"]  # the command ran inside the hidden namespace
        blob = tmp_path / "blob"
        blob.write_bytes(os.urandom(200_000))
        sha = p.put(NODE, blob, "in/blob")
        assert p.get(NODE, "in/blob", tmp_path / "back", expected_sha256=sha) == sha
        assert (tmp_path / "back").read_bytes() == blob.read_bytes()
        health = p.check(NODE, timeout_s=30)
        assert health.reachable, health.error
    jumps, logins = bastion.logins()
    assert jumps == jumps_before + 1  # one jump session carried every operation
    assert logins == logins_before + 1


def test_proxy_jump_from_the_users_ssh_config(bastion: Bastion, tmp_path: Path) -> None:
    config = bastion.write_ssh_config(tmp_path / "ssh_config")
    # OpenSSH itself accepts the same file: the set-up is a real one
    if shutil.which("ssh"):
        out = subprocess.run(
            ["ssh", "-F", str(config), "-o", "BatchMode=yes", NODE, "cat /proc/net/dev"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 0, out.stderr
    data = bastion.cluster_dict(
        proxy_jump=None, ssh_config=str(config), identity_file=None, user=None
    )
    data["nodes"][0] = {"name": NODE, "gpus": {"t4": 1}, "address": "gpu-behind"}
    with make_provider(cluster_from_dict(data, source="lab.yaml"), "r") as p:
        assert str(p.endpoint(NODE)) == (
            f"127.0.0.1:{bastion.target.port} via 127.0.0.1:{bastion.jump.port}"
        )
        assert netns_interfaces(p) == ["lo"]


def test_proxy_command_through_openssh(bastion: Bastion, tmp_path: Path) -> None:
    if not shutil.which("ssh"):
        pytest.skip("OpenSSH client not installed")
    config = bastion.write_ssh_config(tmp_path / "ssh_config")
    with provider(
        bastion, proxy_jump=None, proxy_command=f"ssh -F {config} -o BatchMode=yes -W %h:%p bastion"
    ) as p:
        assert str(p.endpoint(NODE)).endswith("via ProxyCommand")
        assert netns_interfaces(p) == ["lo"]


def test_per_node_route_overrides_the_section(bastion: Bastion) -> None:
    with provider(
        bastion,
        proxy_jump=f"nobody@127.0.0.1:{free_port()}",
        nodes={NODE: {"proxy_jump": bastion.jump_spec}},
    ) as p:
        assert netns_interfaces(p) == ["lo"]
    data = bastion.cluster_dict(nodes={NODE: {"proxy_jump": "a", "proxy_command": "b"}})
    with pytest.raises(
        InputError, match=f"lab.yaml: ssh.nodes.{NODE}: set proxy_jump or proxy_command, not both"
    ):
        make_provider(cluster_from_dict(data, source="lab.yaml"), "r").endpoint(NODE)


def test_host_keys_stay_strict_on_both_hops(bastion: Bastion, tmp_path: Path) -> None:
    lines = bastion.known_hosts.read_text().splitlines(keepends=True)
    only_jump = tmp_path / "only_jump"
    only_jump.write_text(lines[0])
    unknown = rf"node {NODE} .*: unknown host key ssh-ed25519 SHA256:"
    with (
        provider(bastion, known_hosts=str(only_jump)) as p,
        pytest.raises(UnreachableNodeError, match=unknown),
    ):
        p.run(NODE, ["true"], 10)
    only_target = tmp_path / "only_target"
    only_target.write_text(lines[1])
    with (
        provider(bastion, known_hosts=str(only_target)) as p,
        pytest.raises(UnreachableNodeError) as err,
    ):
        p.run(NODE, ["true"], 10)
    assert f"jump host 127.0.0.1:{bastion.jump.port}: unknown host key" in str(err.value)
    assert "\n" not in str(err.value)


def test_jump_host_failures_name_the_jump_host(bastion: Bastion) -> None:
    with provider(bastion, proxy_jump=f"nosuchuser@127.0.0.1:{bastion.jump.port}") as p:
        health = p.check(NODE, timeout_s=20)
    assert not health.reachable
    assert (
        f"jump host 127.0.0.1:{bastion.jump.port}: authentication failed for user nosuchuser"
        in health.error
    )
    dead = free_port()
    with (
        provider(bastion, proxy_jump=f"127.0.0.1:{dead}") as p,
        pytest.raises(UnreachableNodeError) as err,
    ):
        p.run(NODE, ["true"], 10)
    assert str(err.value) == (
        f"node {NODE} (127.0.0.1:{bastion.target.port} via 127.0.0.1:{dead}): unreachable after "
        f"2 attempts: jump host 127.0.0.1:{dead}: connection refused"
    )


def test_bad_proxy_jump_is_one_line(bastion: Bastion) -> None:
    """Refused where the cluster file is loaded (it was found only when connecting)."""
    with pytest.raises(
        InputError, match=r"lab.yaml: ssh.proxy_jump: ProxyJump: bad ProxyJump hop 'a@b:99999'"
    ):
        provider(bastion, proxy_jump="a@b:99999").endpoint(NODE)


def test_nodes_check_through_the_bastion_with_a_conda_like_setup(
    bastion: Bastion, tmp_path: Path
) -> None:
    """What a lab admin runs: `hadar nodes check` on a cluster file behind the bastion, whose
    setup activates an environment; then the same with a setup that fails (exit 3)."""
    import json
    import sys

    import yaml

    root = Path(__file__).resolve().parents[3]
    env_dir = tmp_path / "envs" / "hadar"
    (env_dir / "bin").mkdir(parents=True)
    python = env_dir / "bin" / "python"  # a launcher, as an environment's python is (a bare
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')  # symlink would lose the venv)
    python.chmod(0o755)
    (env_dir / "activate").write_text(f'export PATH="{env_dir}/bin:$PATH"\n')
    data = bastion.cluster_dict(python="python", setup=[f". {env_dir}/activate"])
    cfg = tmp_path / "lab.yaml"
    cfg.write_text(yaml.safe_dump(data))

    def check() -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "hadar", "nodes", "check", "--cluster", str(cfg), "--json"],
            capture_output=True,
            text=True,
            cwd=root,
            timeout=180,
        )

    res = check()
    assert res.returncode == 0, res.stdout + res.stderr
    row = json.loads(res.stdout)
    assert row["reachable"] and row["python"] == ".".join(map(str, sys.version_info[:3]))
    assert row["address"] == f"127.0.0.1:{bastion.target.port} via 127.0.0.1:{bastion.jump.port}"

    data["ssh"]["setup"] = ["conda activate no-such-env"]
    cfg.write_text(yaml.safe_dump(data))
    res = check()
    assert res.returncode == 3
    row = json.loads(res.stdout)
    assert not row["reachable"]
    assert row["error"].startswith(f"node {NODE} (127.0.0.1:{bastion.target.port} via ")
    assert "setup failed (exit 127): " in row["error"] and "conda" in row["error"]


def test_a_dropped_bastion_connection_is_reopened(bastion: Bastion) -> None:
    import contextlib
    import signal

    from tests.fixtures.sshd import descendants

    assert bastion.proc is not None
    with provider(bastion) as p:
        assert netns_interfaces(p) == ["lo"]
        jumps_before, _ = bastion.logins()
        # kill the jump host's sessions (the bastion drops us, and keeps listening): every
        # process under the namespace's helper except the hidden node's sshd and its sessions
        target = str(bastion.target.config_path).encode()
        keep: set[int] = set()
        for pid in descendants(bastion.proc.pid):
            try:
                if target in Path(f"/proc/{pid}/cmdline").read_bytes():
                    keep |= {pid, *descendants(pid)}
            except OSError:
                continue
        assert keep, "the hidden node's sshd was not found"
        victims = [pid for pid in descendants(bastion.proc.pid) if pid not in keep]
        assert victims
        for pid in victims:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        assert netns_interfaces(p) == ["lo"]  # reconnected through a new jump session
        assert bastion.logins()[0] == jumps_before + 1
