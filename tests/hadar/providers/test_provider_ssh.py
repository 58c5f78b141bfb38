"""The SSH provider against real OpenSSH servers on loopback (the session's 3-node sshd farm)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pytest

from hadar.clusters import cluster_from_dict
from hadar.core.errors import InputError, UnreachableNodeError
from hadar.providers.base import (
    ChecksumMismatchError,
    NodeTransferError,
    RemotePathError,
    make_provider,
)
from hadar.providers.ssh.provider import SshProvider
from tests.fixtures.processes import HANG_S
from tests.fixtures.sshd import SshdFarm, free_port, generate_ed25519

pytestmark = pytest.mark.ssh


def accepted_logins(farm: SshdFarm, name: str) -> int:
    return farm.server(name).log_path.read_text().count("Accepted publickey")


@pytest.fixture
def ssh(sshd_farm: SshdFarm) -> SshProvider:
    p = make_provider(sshd_farm.cluster(), "run-ssh")
    assert isinstance(p, SshProvider)
    yield p
    p.close()


def test_each_node_runs_in_its_own_workdir(ssh: SshProvider, sshd_farm: SshdFarm) -> None:
    for server in sshd_farm.servers:
        res = ssh.run(
            server.name,
            ["sh", "-c", 'echo "$HOME"; pwd; echo "$HADAR_NODE"'],
            30,
            env={"HADAR_NODE": server.name},
        )
        assert res.ok, res.stderr
        home, cwd, env_node = res.stdout.split()
        assert home == str(server.home)
        expected = f"{server.home}/.hadar/runs/run-ssh/{server.name}"
        assert cwd == ssh.workdir(server.name) == expected
        assert env_node == server.name
        assert ssh.rendezvous_address(server.name) == "127.0.0.1"
        assert ssh.python(server.name) == [sshd_farm.python]
    assert ssh.speed_factor("ssh-k80") == 0.25


def test_worker_like_python_round_trip(
    ssh: SshProvider, sshd_farm: SshdFarm, tmp_path: Path
) -> None:
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"steps": 5, "seed": 3}))
    spec_sha = ssh.put("ssh-t4", spec, "round-0/spec.json")
    snippet = (
        "import hashlib, json, sys\n"
        "spec = json.load(open(sys.argv[1]))\n"
        "data = bytes(range(256)) * spec['steps']\n"
        "open('round-0/ckpt.bin', 'wb').write(data)\n"
        "json.dump({'steps_done': spec['steps'], 'sha256': hashlib.sha256(data).hexdigest()},"
        " open('round-0/result.json', 'w'))\n"
    )
    res = ssh.run("ssh-t4", [*ssh.python("ssh-t4"), "-c", snippet, "round-0/spec.json"], 60)
    assert res.ok, res.stderr
    ssh.get("ssh-t4", "round-0/result.json", tmp_path / "result.json")
    result = json.loads((tmp_path / "result.json").read_text())
    got = ssh.get(
        "ssh-t4", "round-0/ckpt.bin", tmp_path / "ckpt.bin", expected_sha256=result["sha256"]
    )
    assert (
        got == result["sha256"] == hashlib.sha256((tmp_path / "ckpt.bin").read_bytes()).hexdigest()
    )
    assert result["steps_done"] == 5
    assert spec_sha == hashlib.sha256(spec.read_bytes()).hexdigest()


def test_put_get_sha256_verified_and_mismatch_detected(
    ssh: SshProvider, sshd_farm: SshdFarm, tmp_path: Path
) -> None:
    data = os.urandom(3_000_000)
    src = tmp_path / "blob"
    src.write_bytes(data)
    digest = hashlib.sha256(data).hexdigest()
    assert ssh.put("ssh-v100", src, "a/b/blob") == digest
    remote = Path(ssh.workdir("ssh-v100")) / "a" / "b" / "blob"  # loopback: same filesystem
    assert remote.read_bytes() == data
    assert not [p for p in remote.parent.iterdir() if ".part-" in p.name]  # no temp leftovers
    assert ssh.sha256("ssh-v100", "a/b/blob") == digest
    assert ssh.get("ssh-v100", "a/b/blob", tmp_path / "copy") == digest
    assert (tmp_path / "copy").read_bytes() == data
    remote.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))  # the node's copy is corrupted
    with pytest.raises(
        ChecksumMismatchError, match=r"node ssh-v100 \(127\.0\.0\.1:\d+\).*expected"
    ):
        ssh.get("ssh-v100", "a/b/blob", tmp_path / "bad", expected_sha256=digest)
    assert not (tmp_path / "bad").exists()
    with pytest.raises(NodeTransferError, match="no file nothing.bin"):
        ssh.get("ssh-v100", "nothing.bin", tmp_path / "none")


@pytest.mark.parametrize("bad", ["../x", "/etc/passwd", "a/../../x", "~/x", ".."])
def test_remote_paths_cannot_escape_the_run_dir(ssh: SshProvider, tmp_path: Path, bad: str) -> None:
    src = tmp_path / "f"
    src.write_text("x")
    with pytest.raises(RemotePathError, match="node ssh-k80"):
        ssh.put("ssh-k80", src, bad)
    with pytest.raises(RemotePathError):
        ssh.get("ssh-k80", bad, tmp_path / "o")
    with pytest.raises(RemotePathError):
        ssh.sha256("ssh-k80", bad)


def test_connection_is_reused_across_operations(
    ssh: SshProvider, sshd_farm: SshdFarm, tmp_path: Path
) -> None:
    before = accepted_logins(sshd_farm, "ssh-k80")
    src = tmp_path / "f"
    src.write_text("hello")
    for i in range(3):
        assert ssh.run("ssh-k80", ["true"], 30).ok
        ssh.put("ssh-k80", src, f"f{i}")
        ssh.get("ssh-k80", f"f{i}", tmp_path / f"g{i}")
    time.sleep(0.2)  # sshd writes its log line asynchronously
    assert accepted_logins(sshd_farm, "ssh-k80") == before + 1


def test_concurrent_operations_on_all_nodes(
    ssh: SshProvider, sshd_farm: SshdFarm, tmp_path: Path
) -> None:
    errors: list[BaseException] = []
    outputs: dict[str, str] = {}

    def work(name: str) -> None:
        try:
            src = tmp_path / f"{name}.in"
            src.write_bytes(name.encode() * 10_000)
            ssh.put(name, src, "c/in.bin")
            res = ssh.run(name, ["sh", "-c", "sleep 1; sha256sum c/in.bin | cut -c1-64"], 30)
            assert res.ok, res.stderr
            outputs[name] = res.stdout.strip()
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(s.name,)) for s in sshd_farm.servers]
    start = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    for s in sshd_farm.servers:
        assert outputs[s.name] == hashlib.sha256(s.name.encode() * 10_000).hexdigest()
    assert time.monotonic() - start < 30  # nothing hung


def test_timeout_kills_the_remote_process_group(ssh: SshProvider) -> None:
    res = ssh.run(
        "ssh-v100", ["sh", "-c", "sleep 120 & echo $! > bg.pid; sleep 120"], timeout_s=1.5
    )
    assert res.timed_out and not res.ok
    pid = int((Path(ssh.workdir("ssh-v100")) / "bg.pid").read_text())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            break
        if state in {"Z", "X"}:
            break
        time.sleep(0.05)
    else:
        pytest.fail("the remote background process survived the timeout")
    # the node is still usable afterwards
    assert ssh.run("ssh-v100", ["true"], 30).ok


def test_unknown_host_key_is_rejected(sshd_farm: SshdFarm, tmp_path: Path) -> None:
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    p = SshProvider(sshd_farm.cluster(known_hosts=str(empty)), "r")
    port = sshd_farm.server("ssh-t4").port
    start = time.monotonic()
    with pytest.raises(UnreachableNodeError) as err:
        p.run("ssh-t4", ["true"], 30)
    msg = str(err.value)
    assert "\n" not in msg
    assert msg.startswith(f"node ssh-t4 (127.0.0.1:{port}): unknown host key ssh-ed25519 SHA256:")
    assert "--trust-new-hosts" in msg
    assert time.monotonic() - start < 3  # host-key errors are not retried
    assert empty.read_text() == ""  # nothing was recorded


def test_trust_new_hosts_records_the_key(sshd_farm: SshdFarm, tmp_path: Path) -> None:
    kh = tmp_path / "kh" / "known_hosts"  # not existing yet
    with SshProvider(sshd_farm.cluster(known_hosts=str(kh)), "r", trust_new_hosts=True) as p:
        for s in sshd_farm.servers:
            assert p.run(s.name, ["true"], 30).ok
    text = kh.read_text()
    for s in sshd_farm.servers:
        assert s.known_hosts_line().split()[:3] == next(
            line.split() for line in text.splitlines() if line.startswith(s.known_hosts_name)
        )
    # the recorded file now works with strict checking
    with SshProvider(sshd_farm.cluster(known_hosts=str(kh)), "r") as strict:
        assert strict.run("ssh-k80", ["true"], 30).ok


def test_changed_host_key_is_rejected_even_when_trusting(
    sshd_farm: SshdFarm, tmp_path: Path
) -> None:
    server = sshd_farm.server("ssh-k80")
    other = generate_ed25519(tmp_path / "impostor")
    kh = tmp_path / "known_hosts"
    kh.write_text(f"{server.known_hosts_name} {other.get_name()} {other.get_base64()}\n")
    for trust in (False, True):
        p = SshProvider(sshd_farm.cluster(known_hosts=str(kh)), "r", trust_new_hosts=trust)
        with pytest.raises(UnreachableNodeError) as err:
            p.run("ssh-k80", ["true"], 30)
        msg = str(err.value)
        assert msg.startswith(f"node ssh-k80 (127.0.0.1:{server.port}): host key CHANGED")
        assert "man-in-the-middle" in msg and "\n" not in msg
    assert kh.read_text().count("\n") == 1  # the old entry was not replaced


def test_wrong_key_is_a_clear_authentication_error(sshd_farm: SshdFarm, tmp_path: Path) -> None:
    generate_ed25519(tmp_path / "wrong_key")
    p = SshProvider(sshd_farm.cluster(identity_file=str(tmp_path / "wrong_key")), "r")
    start = time.monotonic()
    with pytest.raises(UnreachableNodeError) as err:
        p.run("ssh-v100", ["true"], 30)
    msg = str(err.value)
    assert msg.startswith("node ssh-v100 (127.0.0.1:") and "authentication failed" in msg
    assert str(tmp_path / "wrong_key") in msg and "\n" not in msg
    assert time.monotonic() - start < 5  # not retried
    h = p.check("ssh-v100")
    assert not h.reachable and "authentication failed" in (h.error or "")


def test_missing_identity_file_is_an_input_error(sshd_farm: SshdFarm, tmp_path: Path) -> None:
    p = SshProvider(sshd_farm.cluster(identity_file=str(tmp_path / "nope")), "r")
    with pytest.raises(InputError, match="identity_file .*nope not found"):
        p.run("ssh-v100", ["true"], 30)


def test_unreachable_port_fails_fast_with_host_and_port(sshd_farm: SshdFarm) -> None:
    data = sshd_farm.cluster_dict()
    port = free_port()
    data["nodes"][0]["port"] = port
    p = SshProvider(cluster_from_dict(data), "r")
    start = time.monotonic()
    with pytest.raises(UnreachableNodeError) as err:
        p.run("ssh-v100", ["true"], 30)
    elapsed = time.monotonic() - start
    assert str(err.value) == (
        f"node ssh-v100 (127.0.0.1:{port}): unreachable after 3 attempts: connection refused"
    )
    assert elapsed < 5
    h = p.check("ssh-v100")
    assert not h.reachable and h.address == f"127.0.0.1:{port}"


def test_ssh_config_supplies_host_port_user_and_key(sshd_farm: SshdFarm, tmp_path: Path) -> None:
    server = sshd_farm.server("ssh-t4")
    cfg = tmp_path / "ssh_config"
    cfg.write_text(
        f"Host gpu-box\n  HostName 127.0.0.1\n  Port {server.port}\n  User {sshd_farm.user}\n"
        f"  IdentityFile {sshd_farm.client_key}\n"
        f"Host wrong-port\n  HostName 127.0.0.1\n  Port {free_port()}\n"
        f"  IdentityFile {sshd_farm.client_key}\n"
    )
    data = {
        "name": "cfg",
        "provider": "ssh",
        "nodes": [
            {"name": "n1", "gpus": {"t4": 1}, "address": "gpu-box"},
            # the node entry's port wins over the config's
            {"name": "n2", "gpus": {"t4": 1}, "address": "wrong-port", "port": server.port},
        ],
        "ssh": {
            "ssh_config": str(cfg),
            "known_hosts": str(sshd_farm.known_hosts),
            "allow_agent": False,
            "look_for_keys": False,
            "python": sshd_farm.python,
        },
    }
    with SshProvider(cluster_from_dict(data), "r") as p:
        ep = p.endpoint("n1")
        assert (ep.host, ep.port, ep.user, ep.key_files) == (
            "127.0.0.1",
            server.port,
            sshd_farm.user,
            (str(sshd_farm.client_key),),
        )
        assert p.run("n1", ["sh", "-c", "echo $HOME"], 30).stdout.strip() == str(server.home)
        assert p.run("n2", ["true"], 30).ok
        assert p.rendezvous_address("n1") == "127.0.0.1"


def test_agent_keys_are_used(sshd_farm: SshdFarm, monkeypatch: pytest.MonkeyPatch) -> None:
    if not (shutil.which("ssh-agent") and shutil.which("ssh-add")):
        pytest.skip("ssh-agent/ssh-add not installed")
    # the agent's socket in a short private folder of its own: under tmp_path (a long TMPDIR) its
    # path could pass the 107 bytes a Unix socket's path holds
    private = Path(tempfile.mkdtemp(prefix="hadar-agent-", dir="/tmp"))
    sock = private / "agent.sock"
    agent = subprocess.Popen(["ssh-agent", "-D", "-a", str(sock)], stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + HANG_S
        while not sock.exists() and agent.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert sock.exists(), f"ssh-agent exited {agent.poll()} without making {sock}"
        env = {**os.environ, "SSH_AUTH_SOCK": str(sock)}
        subprocess.run(
            ["ssh-add", str(sshd_farm.client_key)], env=env, check=True, capture_output=True
        )
        monkeypatch.setenv("SSH_AUTH_SOCK", str(sock))
        data = sshd_farm.cluster_dict(identity_file=None, allow_agent=True)
        with SshProvider(cluster_from_dict(data), "r") as p:
            assert p.endpoint("ssh-v100").key_files == ()
            assert p.run("ssh-v100", ["true"], 30).ok
        data_no_agent = sshd_farm.cluster_dict(identity_file=None, allow_agent=False)
        with pytest.raises(UnreachableNodeError, match="authentication failed"):
            SshProvider(cluster_from_dict(data_no_agent), "r").run("ssh-v100", ["true"], 30)
    finally:
        agent.send_signal(signal.SIGTERM)
        agent.wait(HANG_S)
        shutil.rmtree(private, ignore_errors=True)


def test_health_check_over_ssh(ssh: SshProvider) -> None:
    import platform

    h = ssh.check("ssh-t4")
    assert h.reachable and h.error is None, h
    assert h.python == platform.python_version() and h.torch
    assert h.address.startswith("127.0.0.1:")


def test_missing_remote_python_is_reported(sshd_farm: SshdFarm) -> None:
    data = sshd_farm.cluster_dict(nodes={"ssh-k80": {"python": "/opt/none/bin/python3"}})
    with SshProvider(cluster_from_dict(data), "r") as p:
        assert p.python("ssh-k80") == ["/opt/none/bin/python3"]
        assert p.python("ssh-t4") == [sshd_farm.python]
        h = p.check("ssh-k80", timeout_s=30)
    assert h.reachable and h.python is None
    assert h.error == "/opt/none/bin/python3: command not found on the node"


def test_invalid_ssh_settings_name_the_field(sshd_farm: SshdFarm) -> None:
    with pytest.raises(InputError, match=r"^<x>: ssh.connect_timeout_s: "):
        SshProvider(
            cluster_from_dict(sshd_farm.cluster_dict(connect_timeout_s=-1), source="<x>"), "r"
        )
    with pytest.raises(InputError, match=r"ssh.nodes.ghost: no such node"):
        SshProvider(cluster_from_dict(sshd_farm.cluster_dict(nodes={"ghost": {}})), "r")
    with pytest.raises(InputError, match=r"ssh.hostname: unknown field"):
        SshProvider(cluster_from_dict(sshd_farm.cluster_dict(hostname="x")), "r")


def test_remove_workdir(ssh: SshProvider, tmp_path: Path) -> None:
    src = tmp_path / "f"
    src.write_text("x")
    ssh.put("ssh-t4", src, "junk/f")
    wd = Path(ssh.workdir("ssh-t4"))
    assert (wd / "junk" / "f").exists()
    ssh.remove_workdir("ssh-t4")
    assert not wd.exists()
    ssh.put("ssh-t4", src, "junk/f")  # directories are re-created on demand
    assert (wd / "junk" / "f").exists()
