"""A hostile provider section is refused when the cluster file is loaded: one line naming the
file, the section and the field (exit 2, no traceback), before anything runs or is written. The
section's ``setup:`` (documented to run) never runs from a refused file, and a shell-shaped
environment name, user name or host never reaches a shell. Commands run as users run them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.runlib import write_jobs
from tests.fixtures.cli import hadar_cli, one_error_line

PWNED = "pwned"


def cluster(tmp_path: Path, ssh: dict[str, Any], **node: Any) -> Path:
    f = tmp_path / "hostile.yaml"
    data = {
        "name": "hostile",
        "provider": "ssh",
        "nodes": [{"name": "a", "gpus": {"t4": 1}, "address": "127.0.0.1", **node}],
        "ssh": {"setup": [f"touch {tmp_path / PWNED}"], **ssh},
    }
    f.write_text(yaml.safe_dump(data))
    return f


HOSTILE = [
    ({"env": {f"X=1;touch {PWNED} #": "v"}}, {}, "ssh.env: invalid environment variable name"),
    ({"user": "u;touch pwned"}, {}, "ssh.user: user name 'u;touch pwned' holds a space"),
    ({"nodes": {"a": {"python": ["sh", "-c", "x"]}}}, {}, "ssh.nodes.a.python: Input should be"),
    ({"connect_timeout_s": "nan"}, {}, "ssh.connect_timeout_s: Input should be a valid number"),
    ({}, {"address": "$(touch pwned)"}, "nodes[a].address: host name '$(touch pwned)' holds"),
    # an infinite timeout made an unresponsive node hang the command
    ({"connect_timeout_s": float("inf")}, {}, "ssh.connect_timeout_s: Input should be"),
    ({"io_timeout_s": 1e300}, {}, "ssh.io_timeout_s: Input should be less than or equal to 86400"),
    # a null, a list or a control character became "None", "[1, 2]" or reached the node
    ({"env": {"A": None}}, {}, "ssh.env: A: expected a string or a number (got NoneType)"),
    ({"env": {"A": [1, 2]}}, {}, "ssh.env: A: expected a string or a number (got list)"),
    ({"env": {"A": "x\x1by"}}, {}, "ssh.env: A: holds a control character"),
    # ProxyJump hops were checked only when a run connected: exit 3, a run directory written
    ({"proxy_jump": "a;touch pwned"}, {}, "ssh.proxy_jump: ProxyJump: bad ProxyJump hop"),
    ({"proxy_jump": ",".join(f"h{i}" for i in range(9))}, {}, "ssh.proxy_jump: ProxyJump: more"),
    ({"proxy_jump": "a", "proxy_command": "nc %h %p"}, {}, "ssh.(top level): set proxy_jump or"),
]


@pytest.mark.parametrize(("ssh", "node", "expected"), HOSTILE, ids=lambda v: str(v)[:20])
def test_a_hostile_section_is_one_line_and_nothing_runs(
    tmp_path: Path, ssh: dict[str, Any], node: dict[str, Any], expected: str
) -> None:
    f = cluster(tmp_path, ssh, **node)
    res = hadar_cli("nodes", "check", "--cluster", str(f), cwd=tmp_path)
    assert res.returncode == 2, res.stdout + res.stderr
    line = one_error_line(res)
    assert line.startswith(f"hadar: error: {f}: {expected}"), line
    assert sorted(p.name for p in tmp_path.iterdir()) == [f.name]


def test_hadar_run_refuses_it_before_the_run_directory_exists(tmp_path: Path) -> None:
    f = cluster(tmp_path, {"port": "22; touch pwned", "keepalive_s": -1})
    jobs = write_jobs(tmp_path / "jobs.yaml", {"LT": 5})
    argv = ["run", "--cluster", str(f), "--workload", str(jobs), "--no-live", "--out", "run"]
    res = hadar_cli(*argv, cwd=tmp_path)
    assert res.returncode == 2, res.stdout + res.stderr
    assert one_error_line(res) == (
        f"hadar: error: {f}: ssh.port: Input should be a valid integer (got '22; touch pwned')"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hostile.yaml", "jobs.yaml"]


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        # paramiko ran Match exec through a shell with %h (here a HostName) pasted in unquoted
        (
            'Host a\n  HostName "127.0.0.1;touch pwned;"\nMatch exec "touch pwned"\n  User bob\n',
            "~/.ssh/config: Match exec 'touch pwned' is refused: hadar runs no command",
        ),
        ("Host a\n  Port abc\n", "Port 'abc' is not a TCP port (1-65535)"),  # a traceback
    ],
    ids=["match-exec", "port-text"],
)
def test_an_ssh_config_that_would_run_a_command_or_crash_is_refused_per_node(
    tmp_path: Path, config: str, expected: str
) -> None:
    ssh_config = tmp_path / "ssh_config"
    ssh_config.write_text(config)
    f = tmp_path / "c.yaml"
    f.write_text(
        yaml.safe_dump(
            {
                "name": "c",
                "provider": "ssh",
                "nodes": [{"name": "a", "gpus": {"t4": 1}}],
                "ssh": {"ssh_config": str(ssh_config), "connect_attempts": 1},
            }
        )
    )
    res = hadar_cli("nodes", "check", "--cluster", str(f), cwd=tmp_path)
    assert res.returncode == 3 and "Traceback" not in res.stderr, res.stdout + res.stderr
    assert expected in res.stdout, res.stdout
    assert not (tmp_path / PWNED).exists()
