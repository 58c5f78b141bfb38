"""SSH faults on servers of the test's own: killed mid-transfer, killed mid-command, restarted."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from hadar.core.errors import UnreachableNodeError
from hadar.providers.ssh.provider import SshProvider
from tests.fixtures.sshd import SshdFarm, require_sshd

pytestmark = pytest.mark.ssh


@pytest.fixture
def farm(tmp_path: Path) -> SshdFarm:
    require_sshd()
    with SshdFarm.start(tmp_path / "farm", n=1) as f:
        yield f


def run_in_thread(fn) -> tuple[threading.Thread, dict]:
    box: dict = {}

    def target() -> None:
        start = time.monotonic()
        try:
            box["value"] = fn()
        except BaseException as exc:
            box["error"] = exc
        box["seconds"] = time.monotonic() - start

    t = threading.Thread(target=target, daemon=True)
    t.start()
    return t, box


def test_server_killed_mid_transfer_gives_a_clear_error(farm: SshdFarm, tmp_path: Path) -> None:
    server = farm.servers[0]
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(50 * 1024 * 1024))
    p = SshProvider(farm.cluster(), "r")
    wd = Path(p.workdir(server.name))  # connects and resolves the node's home first
    thread, box = run_in_thread(lambda: p.put(server.name, big, "data/big.bin"))
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # kill once a partial upload is on the node's disk
        parts = list((wd / "data").glob(".big.bin.part-*")) if (wd / "data").is_dir() else []
        if parts and parts[0].stat().st_size > 2 * 1024 * 1024:
            break
        time.sleep(0.005)
    else:
        pytest.fail("the upload never started")
    server.kill()
    thread.join(30)
    assert not thread.is_alive(), "put() hung after the server died"
    err = box.get("error")
    assert isinstance(err, UnreachableNodeError), box
    msg = str(err)
    assert msg.startswith(
        f"node {server.name} (127.0.0.1:{server.port}): connection lost during put of data/big.bin"
    )
    assert "connection refused" in msg and "\n" not in msg
    assert box["seconds"] < 20
    assert not (wd / "data" / "big.bin").exists()  # never a half-written final file
    p.close()


def test_server_killed_mid_command_is_not_rerun(farm: SshdFarm) -> None:
    server = farm.servers[0]
    p = SshProvider(farm.cluster(), "r")
    wd = Path(p.workdir(server.name))
    thread, box = run_in_thread(
        lambda: p.run(server.name, ["sh", "-c", "echo started >> starts.txt; sleep 30"], 60)
    )
    deadline = time.monotonic() + 10
    while not (wd / "starts.txt").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    server.kill()
    thread.join(20)
    assert not thread.is_alive()
    err = box.get("error")
    assert isinstance(err, UnreachableNodeError), box
    assert (
        str(err)
        == f"node {server.name} (127.0.0.1:{server.port}): connection lost while running sh"
    )
    server.start()  # the machine comes back: the command was not started a second time
    time.sleep(0.5)
    assert (wd / "starts.txt").read_text() == "started\n"
    p.close()


def test_restarted_server_is_reconnected_transparently(farm: SshdFarm) -> None:
    server = farm.servers[0]
    with SshProvider(farm.cluster(), "r") as p:
        assert p.run(server.name, ["true"], 30).ok
        server.restart()  # every session dies; the cached transport is now dead
        res = p.run(server.name, ["sh", "-c", "echo again"], 30)
        assert res.ok and res.stdout == "again\n"
    time.sleep(0.2)
    assert server.log_path.read_text().count("Accepted publickey") == 2


def test_bounded_retry_rides_out_a_short_outage(farm: SshdFarm) -> None:
    server = farm.servers[0]
    server.kill()
    threading.Timer(1.0, server.start).start()  # back within the retry window
    settings = {"connect_attempts": 5, "retry_backoff_s": 0.4}
    with SshProvider(farm.cluster(**settings), "r") as p:
        start = time.monotonic()
        assert p.run(server.name, ["true"], 30).ok
        assert time.monotonic() - start >= 0.9  # it really had to wait for the server
    # without retries the same outage is an immediate, clear error
    server.kill()
    threading.Timer(1.0, server.start).start()
    with (
        SshProvider(farm.cluster(connect_attempts=1), "r") as p,
        pytest.raises(
            UnreachableNodeError, match="unreachable after 1 attempts: connection refused"
        ),
    ):
        p.run(server.name, ["true"], 30)
    time.sleep(1.5)
    assert server.running
