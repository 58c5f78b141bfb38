"""The local provider: per-node working directories, verified copies, commands with timeouts."""

from __future__ import annotations

import hashlib
import os
import platform
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest

from hadar.clusters import cluster_from_dict, load_cluster
from hadar.core.errors import InputError
from hadar.providers.base import (
    ChecksumMismatchError,
    NodeTransferError,
    RemotePathError,
    make_provider,
)
from hadar.providers.local.provider import LocalProvider


def pid_gone(pid: int) -> bool:
    """True if ``pid`` no longer runs (absent, or a zombie nobody reaped yet)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in {"Z", "X"}


@pytest.fixture
def provider(tmp_path: Path) -> LocalProvider:
    p = make_provider(load_cluster("local-3node"), "run-1", base_dir=tmp_path / "nodes")
    assert isinstance(p, LocalProvider)
    yield p
    p.close()


def test_bundled_configs_emulate_the_paper_gpus() -> None:
    c3 = load_cluster("local-3node")
    assert c3.provider == "local"
    assert [(n.name, dict(n.gpus), n.speed_factor) for n in c3.nodes] == [
        ("v100", {"v100": 1}, 1.0),
        ("t4", {"t4": 1}, 0.5),
        ("k80", {"k80": 1}, 0.25),
    ]
    c5 = load_cluster("local-5node")
    assert c5.provider == "local"
    assert sorted(t for n in c5.nodes for t in n.gpus) == ["k80", "k80", "t4", "t4", "v100"]
    aws = load_cluster("aws-5node")
    assert sorted(t for n in aws.nodes for t in n.gpus) == sorted(
        t for n in c5.nodes for t in n.gpus
    )


def test_layout_python_speed_and_rendezvous(provider: LocalProvider, tmp_path: Path) -> None:
    assert provider.workdir("t4") == str((tmp_path / "nodes" / "run-1" / "t4").resolve())
    assert provider.python("v100") == [sys.executable]
    assert provider.speed_factor("k80") == 0.25
    assert provider.rendezvous_address("t4") == "127.0.0.1"
    assert [n.name for n in provider.nodes()] == ["v100", "t4", "k80"]
    with pytest.raises(InputError, match="unknown node 'p100'"):
        provider.workdir("p100")


def test_put_get_verified_roundtrip(provider: LocalProvider, tmp_path: Path) -> None:
    src = tmp_path / "spec.bin"
    data = os.urandom(300_000)
    src.write_bytes(data)
    digest = hashlib.sha256(data).hexdigest()
    assert provider.put("t4", src, "in/spec.bin") == digest
    assert (Path(provider.workdir("t4")) / "in" / "spec.bin").read_bytes() == data
    assert provider.sha256("t4", "in/spec.bin") == digest
    out = tmp_path / "back" / "spec.bin"
    assert provider.get("t4", "in/spec.bin", out, expected_sha256=digest) == digest
    assert out.read_bytes() == data
    # A file that changed on the node is caught against the sha the worker reported (the last
    # byte flipped: overwriting it with 0 left the file as it was when random data ended in 0).
    (Path(provider.workdir("t4")) / "in" / "spec.bin").write_bytes(
        data[:-1] + bytes([data[-1] ^ 1])
    )
    with pytest.raises(ChecksumMismatchError, match="node t4"):
        provider.get("t4", "in/spec.bin", tmp_path / "bad.bin", expected_sha256=digest)
    assert not (tmp_path / "bad.bin").exists()
    with pytest.raises(NodeTransferError, match="no file missing.bin"):
        provider.get("t4", "missing.bin", tmp_path / "x")


@pytest.mark.parametrize("bad", ["../escape.txt", "/etc/passwd", "a/../../b", "..", "~/x", ""])
def test_paths_cannot_escape_the_workdir(provider: LocalProvider, tmp_path: Path, bad: str) -> None:
    src = tmp_path / "f"
    src.write_text("x")
    with pytest.raises(RemotePathError):
        provider.put("v100", src, bad)
    with pytest.raises(RemotePathError):
        provider.get("v100", bad, tmp_path / "out")
    assert not (tmp_path / "nodes" / "run-1" / "escape.txt").exists()


def test_run_in_workdir_with_env_and_exit_codes(provider: LocalProvider) -> None:
    res = provider.run(
        "k80",
        [
            *provider.python("k80"),
            "-c",
            "import os;print(os.getcwd());print(os.environ['HADAR_X'])",
        ],
        30,
        env={"HADAR_X": "42"},
    )
    assert res.ok, res.stderr
    assert res.stdout.split() == [provider.workdir("k80"), "42"]
    bad = provider.run("k80", ["sh", "-c", "echo oops >&2; exit 7"], 30)
    assert (bad.returncode, bad.timed_out, bad.ok) == (7, False, False)
    assert bad.tail() == "oops"
    missing = provider.run("k80", ["/no/such/binary"], 30)
    assert missing.returncode == 127 and "No such file" in missing.stderr
    # -m nodes.* works from the node's workdir (the package root is on PYTHONPATH)
    res = provider.run("k80", [*provider.python("k80"), "-c", "import hadar.providers.base"], 30)
    assert res.ok, res.stderr


def test_timeout_kills_the_whole_process_group(provider: LocalProvider) -> None:
    script = "sleep 60 & echo $! > child.pid; sleep 60"
    res = provider.run("v100", ["sh", "-c", script], timeout_s=1.0)
    assert res.timed_out and not res.ok
    assert res.returncode < 0  # killed by a signal
    child = int((Path(provider.workdir("v100")) / "child.pid").read_text())
    deadline = time.monotonic() + 5
    while not pid_gone(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert pid_gone(child), "the background child of the timed-out command survived"


def test_concurrent_runs_on_different_nodes_overlap(provider: LocalProvider) -> None:
    results = {}

    def go(name: str) -> None:
        results[name] = provider.run(name, ["sh", "-c", "date +%s.%N; sleep 1; date +%s.%N"], 30)

    threads = [threading.Thread(target=go, args=(n,)) for n in ("v100", "t4", "k80")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    spans = [tuple(map(float, r.stdout.split())) for r in results.values()]
    assert all(r.ok for r in results.values())
    # every pair of runs overlapped in time: they ran concurrently, not one after another
    assert max(s for s, _ in spans) < min(e for _, e in spans)


def test_check_reports_python_and_torch(provider: LocalProvider) -> None:
    from importlib.metadata import version

    h = provider.check("t4")
    assert h.reachable and h.error is None
    assert h.python == platform.python_version()
    assert h.torch == version("torch").split("+")[0]
    assert h.gpus == ()  # CPU-only test machine: nvidia-smi / torch.cuda see nothing


def test_missing_interpreter_is_reported(tmp_path: Path) -> None:
    c = load_cluster("local-3node")
    p = LocalProvider(c, "r", base_dir=tmp_path, python="/no/such/python3")
    h = p.check("v100", timeout_s=10)
    assert h.reachable and h.python is None
    assert "/no/such/python3" in (h.error or "")


def test_bad_settings_and_run_ids_are_one_line_input_errors(tmp_path: Path) -> None:
    base = {"name": "c", "provider": "local", "nodes": [{"name": "a", "gpus": {"v100": 1}}]}
    bad = {**base, "local": {"base_dirr": "/tmp"}}
    with pytest.raises(InputError, match=r"^c.yaml: local.base_dirr: unknown field$"):
        cluster_from_dict(bad, source="c.yaml")  # refused when the file is loaded
    # a cluster built past the providers' checks is still refused when the provider starts
    c = replace(cluster_from_dict(base, source="c.yaml"), settings={"local": bad["local"]})
    with pytest.raises(InputError, match=r"^c.yaml: local.base_dirr: unknown field$"):
        make_provider(c, "r")
    with pytest.raises(InputError, match="run id"):
        make_provider(cluster_from_dict(base), "../etc")
    with pytest.raises(InputError, match="simulated"):
        make_provider(load_cluster("sim-60gpu"), "r")


def test_end_strays_ends_the_warm_servers_a_planted_link_hides(
    provider: LocalProvider, tmp_path: Path
) -> None:
    """A node folder swapped for a link refuses ``nodes.warm stop`` there, so the run's warm
    servers outlived it; they are found by their processes' working directories instead."""
    import subprocess

    node_dir = Path(provider.workdir("v100"))
    node_dir.mkdir(parents=True, exist_ok=True)
    stand_in = [sys.executable, "-c", "import time; time.sleep(3600)", "-m", "nodes.warm", "serve"]
    server = subprocess.Popen(stand_in, cwd=node_dir)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    outsider = subprocess.Popen(stand_in, cwd=elsewhere)  # another run's: not this run's to end
    try:
        deadline = time.monotonic() + 30
        while b"serve" not in Path(f"/proc/{server.pid}/cmdline").read_bytes():
            assert time.monotonic() < deadline
            time.sleep(0.01)
        node_dir.rename(node_dir.with_name("v100.moved"))
        node_dir.symlink_to(elsewhere)
        with pytest.raises(InputError, match="symbolic link|outside"):
            provider.workdir("v100")
        provider.end_strays()
        assert server.wait(timeout=30) == -15
        assert outsider.poll() is None
    finally:
        for p in (server, outsider):
            p.kill()
            p.wait()
