"""``hadar run`` on SSH nodes it cannot use: exit 3 with one line naming each node's host:port and
the reason (refused, timeout, authentication, missing key file), on real OpenSSH servers (issue 17)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.e2e.runlib import hadar, write_jobs
from tests.fixtures.processes import HANG_S
from tests.fixtures.sshd import SshdFarm, free_port, generate_ed25519

pytestmark = [pytest.mark.slow, pytest.mark.ssh]


def run_on(cluster: dict, tmp_path: Path):
    """``hadar run`` on ``cluster``, refused because no node is reachable: (process, its line)."""
    path = tmp_path / "c.yaml"
    proc, err = attempt(cluster, tmp_path)
    assert err.startswith(f"hadar: error: {path}: no node of cluster sshd-test is reachable: ")
    return proc, err


def attempt(cluster: dict, tmp_path: Path):
    """``hadar run`` of one small job on ``cluster`` (written to ``tmp_path/c.yaml``), refused
    in one line without a traceback: (process, its line)."""
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(cluster, sort_keys=False))
    jobs = write_jobs(tmp_path / "jobs.yaml", {"MM": 20})
    out = tmp_path / "run"
    proc = hadar(
        "run",
        "--cluster",
        str(path),
        "--workload",
        str(jobs),
        "--round",
        "5",
        "--no-live",
        "--no-eval",
        "--out",
        str(out),
        timeout=HANG_S,
    )
    err = proc.stderr.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, proc.stdout + proc.stderr
    return proc, err


def one_node(farm: SshdFarm, **ssh: object) -> dict:
    data = farm.cluster_dict(connect_attempts=1, connect_timeout_s=1, **ssh)
    data["nodes"] = data["nodes"][:1]
    return data


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A TCP port that accepts connections and never speaks SSH."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(8)
        yield s.getsockname()[1]


def test_refused_connections_are_exit_3_naming_every_host_and_port(
    sshd_farm: SshdFarm, tmp_path: Path
) -> None:
    data = sshd_farm.cluster_dict(connect_attempts=1, connect_timeout_s=1)
    ports = [free_port() for _ in data["nodes"]]
    for node, port in zip(data["nodes"], ports, strict=True):
        node["port"] = port
    proc, err = run_on(data, tmp_path)
    assert proc.returncode == 3
    for node, port in zip(data["nodes"], ports, strict=True):
        assert (
            f"node {node['name']} (127.0.0.1:{port}): unreachable after 1 attempts: connection refused"
            in err
        )


def test_a_silent_server_is_exit_3_with_a_timeout(
    sshd_farm: SshdFarm, tmp_path: Path, silent_port: int
) -> None:
    data = one_node(sshd_farm)
    data["nodes"][0]["port"] = silent_port
    proc, err = run_on(data, tmp_path)
    assert proc.returncode == 3
    assert err.endswith(
        f"node ssh-v100 (127.0.0.1:{silent_port}): unreachable after 1 attempts: timed out after 1s"
    )


def test_an_unauthorised_key_is_exit_3_with_authentication_failed(
    sshd_farm: SshdFarm, tmp_path: Path
) -> None:
    stranger = tmp_path / "stranger_ed25519"
    generate_ed25519(stranger)
    proc, err = run_on(one_node(sshd_farm, identity_file=str(stranger)), tmp_path)
    port = sshd_farm.servers[0].port
    assert proc.returncode == 3
    assert (
        f"node ssh-v100 (127.0.0.1:{port}): authentication failed for user {sshd_farm.user}" in err
    )
    assert str(stranger) in err


def test_a_missing_key_file_is_exit_2_naming_the_cluster_file_node_and_file(
    sshd_farm: SshdFarm, tmp_path: Path
) -> None:
    """A key file that is not there is bad input, found before anything is written: one line
    naming the cluster file, the node and the file, exit 2 (it used to be found only when
    connecting: exit 3, "no node reachable")."""
    missing = tmp_path / "no_such_key"
    proc, err = attempt(one_node(sshd_farm, identity_file=str(missing)), tmp_path)
    path, out = tmp_path / "c.yaml", tmp_path / "run"
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert err == f"hadar: error: {path}: node ssh-v100: identity_file {missing} not found"
    assert not out.exists()
