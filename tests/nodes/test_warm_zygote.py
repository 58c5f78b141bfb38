"""Nodes that share one machine fork their warm servers from one zygote (``nodes/warm.py``): one
process imports torch for all of them, each node still has its own server working in its own
directory, the zygote forks servers only for directories directly inside its own, and
``stop --zygote`` ends it and leaves none of its files. Real processes; a stand-in ``torch`` that
records which process imported it."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from nodes import warm
from tests.fixtures.processes import HANG_S
from tests.nodes.helpers import REPO
from tests.nodes.test_warm_stop import serve_pids, wait


def torch_that_records_its_importers(folder: Path) -> Path:
    """A stand-in ``torch`` in ``folder`` that appends the importing process's id to
    ``folder/importers`` (the worker then fails, which does not matter here)."""
    (folder / "torch").mkdir(parents=True)
    importers = folder / "importers"
    (folder / "torch" / "__init__.py").write_text(
        f"import os\nwith open({str(importers)!r}, 'a') as f:\n    f.write(f'{{os.getpid()}}\\n')\n"
    )
    return importers


def run_client(node: Path, zygote: Path, stand_in: Path) -> None:
    """One worker invocation on ``node`` through its warm server (as the coordinator runs one
    each round on a local node); its request is not a valid worker invocation."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(stand_in), str(REPO)]))
    subprocess.run(
        [sys.executable, "-m", "nodes.warm", "run", "--zygote", str(zygote), "--", "--help"],
        cwd=node,
        env=env,
        capture_output=True,
        timeout=HANG_S,
        check=False,
    )


def parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def test_one_torch_import_serves_every_node_and_each_node_keeps_its_own_server(
    tmp_path: Path,
) -> None:
    importers = torch_that_records_its_importers(tmp_path / "stand-in")
    run_folder = tmp_path / "run" / "nodes" / "run-1"
    nodes = [run_folder / "a", run_folder / "b"]
    for node in nodes:
        node.mkdir(parents=True)
    try:
        for node in nodes:
            run_client(node, run_folder, tmp_path / "stand-in")
        (zygote,) = serve_pids(run_folder)
        servers = [serve_pids(node) for node in nodes]
        assert all(len(s) == 1 for s in servers), servers
        assert servers[0] != servers[1]
        assert [parent(s[0]) for s in servers] == [zygote, zygote]
        for node, s in zip(nodes, servers, strict=True):
            assert (node / warm.PID_NAME).read_text() == f"{s[0]}\n"
        # one import of torch, in the zygote, for both nodes' servers
        assert importers.read_text().split() == [str(zygote)]
        # a second round on a node reuses its server
        run_client(nodes[0], run_folder, tmp_path / "stand-in")
        assert serve_pids(nodes[0]) == servers[0]
    finally:
        for node in nodes:
            warm.stop(node)
        warm.stop(run_folder, (warm.SOCKET_NAME, warm.PID_NAME, warm.LOCK_NAME, warm.LOG_NAME))
    assert serve_pids(run_folder) == [] and all(serve_pids(n) == [] for n in nodes)
    assert sorted(p.name for p in run_folder.iterdir()) == ["a", "b"]  # none of its files


def test_the_zygote_forks_no_server_outside_its_own_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    torch_that_records_its_importers(tmp_path / "stand-in")
    run_folder = tmp_path / "run-1"
    node = run_folder / "a"
    node.mkdir(parents=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (run_folder / "link").symlink_to(elsewhere)
    try:
        run_client(node, run_folder, tmp_path / "stand-in")
        assert len(serve_pids(run_folder)) == 1
        # a relative socket name, as the product's clients use: a long tmp_path is over AF_UNIX's limit
        monkeypatch.chdir(run_folder)
        for target in (elsewhere, run_folder / "link", run_folder, run_folder / "a" / ".."):
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
                conn.settimeout(HANG_S)
                conn.connect(warm.SOCKET_NAME)
                conn.sendall((json.dumps({"serve": str(target)}) + "\n").encode())
                assert conn.recv(4096) == b""  # closed without a reply
        assert serve_pids(elsewhere) == [] and list(elsewhere.iterdir()) == []
        wait(lambda: len(serve_pids(run_folder)) == 1, HANG_S, "only the zygote in its folder")
    finally:
        warm.stop(node)
        warm.stop(run_folder, (warm.SOCKET_NAME, warm.PID_NAME, warm.LOCK_NAME, warm.LOG_NAME))
    assert serve_pids(run_folder) == []
