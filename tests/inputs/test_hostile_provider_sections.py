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
