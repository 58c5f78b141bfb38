"""`hadar nodes check` as users run it (a subprocess) against the sshd nodes and local nodes."""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures.processes import run_group
from tests.fixtures.sshd import SshdFarm, free_port
from tests.fixtures.terminal import on_terminal


def hadar(*args: str, cwd: Path | None = None, timeout: float = 180) -> subprocess.CompletedProcess:
    return run_group(
        [sys.executable, "-m", "hadar", *args],
        cwd=cwd,
        timeout=timeout,
        env={**os.environ, "COLUMNS": "200"},
    )


@pytest.mark.ssh
def test_nodes_check_on_the_sshd_nodes(sshd_farm: SshdFarm, tmp_path: Path) -> None:
    cfg = sshd_farm.write_cluster(tmp_path / "ssh3.yaml")
    res = hadar("nodes", "check", "--cluster", str(cfg))
    assert res.returncode == 0, res.stdout + res.stderr
    out = res.stdout
    for s in sshd_farm.servers:
        row = next(line for line in out.splitlines() if f" {s.name} " in line)
        assert (
            f"127.0.0.1:{s.port}" in row
            and "UNREACHABLE" not in row
            and platform.python_version() in row
        )
    assert "3/3 nodes reachable" in out


@pytest.mark.ssh
def test_nodes_check_reports_an_unreachable_node_with_exit_3(
    sshd_farm: SshdFarm, tmp_path: Path
) -> None:
    data = sshd_farm.cluster_dict(connect_attempts=1)
    dead = free_port()
    data["nodes"][1]["port"] = dead
    import yaml

    cfg = tmp_path / "one-dead.yaml"
    cfg.write_text(yaml.safe_dump(data))
    res = hadar("nodes", "check", "--cluster", str(cfg), "--json")
    assert res.returncode == 3, res.stderr
    rows = {r["node"]: r for r in map(json.loads, res.stdout.splitlines())}
    assert [rows[s.name]["reachable"] for s in sshd_farm.servers] == [True, False, True]
    bad = rows[sshd_farm.servers[1].name]
    assert bad["address"] == f"127.0.0.1:{dead}"
    assert bad["error"] == (
        f"node {sshd_farm.servers[1].name} (127.0.0.1:{dead}): unreachable after 1 attempts: "
        f"connection refused"
    )


@pytest.mark.ssh
def test_nodes_check_host_key_policy_and_trust_flag(sshd_farm: SshdFarm, tmp_path: Path) -> None:
    kh = tmp_path / "known_hosts"
    cfg = sshd_farm.write_cluster(tmp_path / "fresh.yaml", known_hosts=str(kh))
    strict = hadar("nodes", "check", "--cluster", str(cfg), "--json", "--timeout", "60")
    assert strict.returncode == 3
    rows = list(map(json.loads, strict.stdout.splitlines()))
    assert all(not r["reachable"] and "unknown host key" in r["error"] for r in rows)
    assert not kh.exists()
    trusted = hadar("nodes", "check", "--cluster", str(cfg), "--trust-new-hosts", "--json")
    assert trusted.returncode == 0, trusted.stdout + trusted.stderr
    assert sorted(line.split()[0] for line in kh.read_text().splitlines()) == sorted(
        s.known_hosts_name for s in sshd_farm.servers
    )
    again = hadar("nodes", "check", "--cluster", str(cfg), "--json")  # now known: strict passes
    assert again.returncode == 0


def test_nodes_check_on_local_nodes() -> None:
    res = hadar("nodes", "check", "--cluster", "local-3node")
    assert res.returncode == 0, res.stdout + res.stderr
    gpu_machine = shutil.which("nvidia-smi") is not None
    for name in ("v100", "t4", "k80"):
        row = next(line for line in res.stdout.splitlines() if f" {name} " in line)
        assert "localhost" in row and "UNREACHABLE" not in row
        # local nodes emulate their GPUs: on whatever this machine has, never a mismatch
        assert "emulated (devices" in row and "MISMATCH" not in row
        assert gpu_machine or "none (CPU)" in row
    assert "3/3 nodes reachable" in res.stdout


def test_nodes_check_rejects_bad_input_in_one_line(tmp_path: Path) -> None:
    sim = hadar("nodes", "check", "--cluster", "sim-60gpu")
    assert sim.returncode == 2
    assert sim.stderr.strip() == (
        "hadar: error: sim-60gpu: provider: simulated clusters have no machines to check "
        "(use provider: local, ssh, aws or slurm)"
    )
    missing = hadar("nodes", "check", "--cluster", str(tmp_path / "nope.yaml"))
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "name: b\nprovider: ssh\nnodes: [{name: a, gpus: {t4: 1}}]\nssh: {trust_new_host: true}\n"
    )
    res = hadar("nodes", "check", "--cluster", str(bad))
    assert res.returncode == 2
    assert res.stderr.strip() == f"hadar: error: {bad}: ssh.trust_new_host: unknown field"


def test_a_node_without_torch_is_not_ready_and_fits_80_columns(tmp_path: Path) -> None:
    """``python -S`` hides site-packages (torch included) from the probe: the node answers but
    cannot train, so the check fails (exit 2) and says why, on an 80-column terminal in lines
    that fit it."""
    cfg = tmp_path / "notorch.yaml"
    cfg.write_text(
        "name: notorch\nprovider: local\nnodes:\n"
        "  - {name: v100, gpus: {v100: 1}}\n  - {name: t4, gpus: {t4: 1}}\n"
        f"local: {{python: '{sys.executable} -S'}}\n"
    )
    code, shown = on_terminal("nodes", "check", "--cluster", str(cfg), cwd=tmp_path, columns=80)
    assert code == 2, shown
    lines = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", shown).splitlines()
    assert max(len(line) for line in lines) <= 80
    assert lines[-2:] == [
        "2/2 nodes reachable, 0 ready; no torch: v100, t4",
        "hadar: error: nodes check: 2/2 nodes reachable, 0 ready; no torch: v100, t4",
    ]  # the table's summary, then the failed command's one stderr line
    text = " ".join("\n".join(lines).split())
    assert "node t4: torch is not installed for Python" in text and "NO TORCH" in text
    rows = {
        r["node"]: r
        for r in map(
            json.loads, hadar("nodes", "check", "--cluster", str(cfg), "--json").stdout.splitlines()
        )
    }
    assert not rows["v100"]["ready"] and "torch is not installed" in rows["v100"]["torch_missing"]


def test_the_closing_line_gives_each_unreachable_nodes_reason() -> None:
    from hadar.commands.nodes import summary_line
    from hadar.providers.base import NodeHealth

    results = [
        NodeHealth(
            "titan",
            False,
            "10.0.0.1:22",
            error="node titan (10.0.0.1:22): unreachable after 3 attempts: connection refused",
        ),
        NodeHealth("t4", True, "10.0.0.2:22", python="3.11.7", torch="2.13.0"),
    ]
    assert summary_line(results, {}, {}) == (
        "1/2 nodes reachable, 1 ready; unreachable: titan (connection refused)"
    )


@pytest.mark.ssh
def test_a_known_hosts_line_paramiko_cannot_decode_is_named_with_its_file_and_line(
    sshd_farm: SshdFarm, tmp_path: Path
) -> None:
    kh = tmp_path / "known_hosts"
    kh.write_text("# mine\nexample.org ssh-ed25519 AAAA!!not-base64\n")
    cfg = sshd_farm.write_cluster(tmp_path / "kh.yaml", known_hosts=str(kh))
    res = hadar("nodes", "check", "--cluster", str(cfg), "--json", "--timeout", "60")
    assert res.returncode == 3, res.stdout + res.stderr
    rows = list(map(json.loads, res.stdout.splitlines()))
    assert len(rows) == len(sshd_farm.servers)
    for row in rows:
        assert not row["reachable"]
        assert row["error"].endswith(
            f"known_hosts {kh}: line 2: a host key that cannot be decoded; remove or fix that line"
        ), row["error"]
    assert "Traceback" not in res.stderr
    kh.write_bytes(b"\xff\xfe bad\n")
    res = hadar("nodes", "check", "--cluster", str(cfg), "--json", "--timeout", "60")
    assert res.returncode == 3
    assert all(
        json.loads(line)["error"].endswith(f"known_hosts {kh}: not UTF-8 text")
        for line in res.stdout.splitlines()
    )
