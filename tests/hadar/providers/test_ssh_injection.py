"""No local command execution through a node's address or user: ProxyCommand's ``%h %p %r``
tokens reach ``sh -c`` on the coordinator. Names OpenSSH would refuse (shell metacharacters) are
refused where the cluster file is loaded, names from ``~/.ssh/config`` where a node is resolved,
and every expanded token is shell-quoted besides. Each test that could have run ``touch PWNED``
asserts the file does not exist."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from hadar.core.errors import InputError
from hadar.providers.ssh.route import expand_tokens, parse_hops
from tests.fixtures.cli import hadar_cli
from tests.fixtures.sshd import SshdFarm

INJECTED = "127.0.0.1;touch PWNED;"


def hadar(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return hadar_cli(*args, cwd=cwd, env={"HOME": str(cwd), "COLUMNS": "200"})


def ssh_cluster(path: Path, node: dict, **ssh: object) -> Path:
    data = {
        "name": "lab",
        "provider": "ssh",
        "nodes": [{"name": "n1", "gpus": {"t4": 1}, **node}],
        "ssh": {"ssh_config": None, "connect_attempts": 1, "connect_timeout_s": 2, **ssh},
    }
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.mark.parametrize(
    ("node", "field"),
    [
        ({"address": INJECTED}, "address"),
        ({"address": "$(touch PWNED)"}, "address"),
        ({"address": "-oProxyCommand=touch PWNED"}, "address"),
        ({"address": "127.0.0.1", "user": "me;touch PWNED"}, "user"),
        ({"address": "127.0.0.1", "user": "`touch PWNED`"}, "user"),
    ],
)
def test_a_host_or_user_with_shell_metacharacters_is_refused_at_load(
    tmp_path: Path, node: dict, field: str
) -> None:
    cfg = ssh_cluster(tmp_path / "lab.yaml", node, proxy_command="true %h %p %r")
    res = hadar("nodes", "check", "--cluster", str(cfg), cwd=tmp_path)
    assert res.returncode == 2, res.stdout + res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
    assert str(cfg) in lines[0] and f"nodes[n1].{field}" in lines[0], lines[0]
    assert not (tmp_path / "PWNED").exists()


def test_the_ssh_section_user_is_checked_too(tmp_path: Path) -> None:
    cfg = ssh_cluster(
        tmp_path / "lab.yaml",
        {"address": "127.0.0.1"},
        user="a|touch PWNED",
        proxy_command="true %r",
    )
    res = hadar("nodes", "check", "--cluster", str(cfg), cwd=tmp_path)
    assert res.returncode == 2, res.stderr
    assert "ssh.user" in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "PWNED").exists()


def test_an_ssh_config_proxy_command_cannot_be_fed_a_bad_address(tmp_path: Path) -> None:
    """The issue's second route: no proxy in the cluster file, ``ProxyCommand`` in ssh_config."""
    (tmp_path / "ssh_config").write_text("Host *\n  ProxyCommand true %h %p %r\n")
    cfg = ssh_cluster(
        tmp_path / "lab.yaml", {"address": INJECTED}, ssh_config=str(tmp_path / "ssh_config")
    )
    res = hadar("nodes", "check", "--cluster", str(cfg), cwd=tmp_path)
    assert res.returncode == 2, res.stderr
    assert "nodes[n1].address" in res.stderr
    assert not (tmp_path / "PWNED").exists()


def test_a_bad_host_name_from_ssh_config_is_refused_naming_the_node(tmp_path: Path) -> None:
    """A name that comes from ssh_config is checked where the node is resolved: `nodes check`
    shows the node's one-line error in its row (as for any node set-up error), runs nothing."""
    (tmp_path / "ssh_config").write_text(
        "Host gpu\n  HostName 127.0.0.1;touch${IFS}PWNED\n  ProxyCommand true %h %p\n"
    )
    cfg = ssh_cluster(
        tmp_path / "lab.yaml", {"address": "gpu"}, ssh_config=str(tmp_path / "ssh_config")
    )
    res = hadar("nodes", "check", "--cluster", str(cfg), "--json", cwd=tmp_path)
    assert res.returncode == 3, res.stdout + res.stderr
    (row,) = map(json.loads, res.stdout.splitlines())
    assert not row["reachable"]
    assert row["error"].startswith(
        "node n1 (after ~/.ssh/config): host name '127.0.0.1;touch${IFS}PWNED' holds"
    ), row["error"]
    assert not (tmp_path / "PWNED").exists()


def test_a_proxy_jump_hop_with_metacharacters_is_refused() -> None:
    with pytest.raises(InputError, match="lab.yaml: ssh: ProxyJump hop 'a;b'"):
        parse_hops("me@bastion,a;b", "lab.yaml: ssh")


def test_expanded_tokens_are_shell_quoted(tmp_path: Path) -> None:
    """Defence in depth: whatever reaches a token stays one word of the command."""
    command = expand_tokens("printf '[%%s]' %h %p %r %n", INJECTED, 22, "u$(id)", "a b")
    out = subprocess.run(
        ["sh", "-c", command], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    assert out.stdout == f"[{INJECTED}][22][u$(id)][a b]"
    assert not (tmp_path / "PWNED").exists()
    # a valid name is left as it is, so a quoted template keeps working
    assert expand_tokens("ssh -W '%h:%p' b", "10.0.0.1", 22, "me", "x") == "ssh -W '10.0.0.1:22' b"


RELAY = """
import os, selectors, socket, sys
s = socket.create_connection((sys.argv[1], int(sys.argv[2])))
sel = selectors.DefaultSelector()
sel.register(0, selectors.EVENT_READ)
sel.register(s, selectors.EVENT_READ)
while True:
    for key, _ in sel.select():
        if key.fileobj == 0:
            data = os.read(0, 65536)
            if not data:
                sys.exit(0)
            s.sendall(data)
        else:
            data = s.recv(65536)
            if not data:
                sys.exit(0)
            os.write(1, data)
"""


@pytest.mark.ssh
def test_an_ssh_config_proxy_command_still_connects(sshd_farm: SshdFarm, tmp_path: Path) -> None:
    """ssh_config's ProxyCommand now reaches us unexpanded; its tokens still work end to end."""
    server = sshd_farm.servers[0]
    relay = tmp_path / "relay.py"
    relay.write_text(RELAY)
    (tmp_path / "ssh_config").write_text(
        f"Host gpu-alias\n  HostName 127.0.0.1\n  Port {server.port}\n"
        f"  ProxyCommand {sys.executable} {relay} %h %p\n"
    )
    data = sshd_farm.cluster_dict(ssh_config=str(tmp_path / "ssh_config"), connect_attempts=1)
    data["nodes"] = [{**data["nodes"][0], "address": "gpu-alias"}]
    del data["nodes"][0]["port"]
    cfg = tmp_path / "lab.yaml"
    cfg.write_text(yaml.safe_dump(data, sort_keys=False))
    res = hadar("nodes", "check", "--cluster", str(cfg), cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "1/1 nodes reachable" in res.stdout, res.stdout
    assert f"127.0.0.1:{server.port} via ProxyCommand" in res.stdout
