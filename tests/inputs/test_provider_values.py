"""Provider settings that hung, crashed or reached a cloud API unchecked: a FIFO as
``known_hosts`` when trusting new host keys, AWS tags and the AWS SSH user."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import paramiko
import pytest
from pydantic import ValidationError

from hadar.core.errors import InputError
from hadar.providers.aws import AwsSettings
from hadar.providers.ssh.hostkeys import record_host_key


def test_recording_a_host_key_in_a_fifo_is_refused_not_a_wait(tmp_path: Path) -> None:
    """``open(path, "a")`` on a FIFO with no reader waited forever, even through SIGTERM."""
    fifo = tmp_path / "known_hosts"
    os.mkfifo(fifo)
    key = paramiko.Ed25519Key.from_private_key_file(str(_ed25519(tmp_path)))
    outcome: list[BaseException | None] = []

    def record() -> None:
        try:
            record_host_key(fifo, "127.0.0.1", key)
            outcome.append(None)
        except BaseException as exc:  # noqa: BLE001 - the test reads it
            outcome.append(exc)

    worker = threading.Thread(target=record, daemon=True)
    worker.start()
    worker.join(timeout=30)
    assert not worker.is_alive(), "recording the host key waited on the FIFO"
    assert isinstance(outcome[0], InputError) and "known_hosts" in str(outcome[0])


def _ed25519(tmp_path: Path) -> Path:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    path = tmp_path / "key"
    path.write_bytes(
        Ed25519PrivateKey.generate().private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.OpenSSH,
            serialization.NoEncryption(),
        )
    )
    return path


@pytest.mark.parametrize(
    "settings, problem",
    [
        ({"tags": {"a": None}}, "expected a string or a number (got NoneType)"),
        ({"tags": {"k\x1bey": "v"}}, "holds a control character"),
        ({"ssh_user": "u;touch pwned"}, "user name 'u;touch pwned' holds a space"),
        ({"ssh_wait_timeout_s": float("inf")}, "Input should be"),
    ],
)
def test_aws_settings_refuse_values_ec2_or_ssh_would_choke_on(
    settings: dict[str, object], problem: str
) -> None:
    """A control character in a tag made every later describe_instances fail; a shell-shaped
    SSH user was written into the cluster file ``cluster up`` writes."""
    with pytest.raises(ValidationError) as err:
        AwsSettings(ami="ami-0123456789abcdef0", **settings)  # type: ignore[arg-type]
    assert problem in str(err.value)
    assert AwsSettings(ami="ami-0123456789abcdef0", tags={"cost": 12}).tags == {"cost": "12"}


def test_closing_a_proxy_command_ends_what_its_shell_started(tmp_path: Path) -> None:
    """paramiko signalled ``sh`` alone: the command it ran (a relay) outlived the run."""
    from hadar.providers.ssh.connections import ProxyProcess

    marker = tmp_path / "relay-ran"
    proxy = ProxyProcess(f"touch {marker}; sleep 3600 | cat")
    deadline = time.monotonic() + 30
    while not marker.exists():
        assert time.monotonic() < deadline, "the proxy command never started"
        time.sleep(0.01)
    group = proxy.process.pid
    assert len(_running_in_group(group)) >= 2  # the shell's children: sleep and cat
    proxy.close()
    assert proxy.process.poll() is not None
    deadline = time.monotonic() + 30
    while _running_in_group(group):  # zombies waiting for their reaper do not count
        assert time.monotonic() < deadline, f"left running: {_running_in_group(group)}"
        time.sleep(0.05)


def _running_in_group(group: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == group and fields[0] != "Z":
            out.append(int(entry))
    return out
