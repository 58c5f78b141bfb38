"""A warm server works in the very folder its client is in (``nodes/warm.py``): the folder is
opened without following a link and checked against the device and inode the client sent, and
the worker's output files are made through that descriptor. A folder swapped for a link, or for
another folder, between the client's start and the fork is refused (exit 2) and nothing is
written in the folder the swap points to. Real processes for the server."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nodes import warm
from tests.fixtures.processes import HANG_S
from tests.nodes.helpers import REPO


def request_for(cwd: Path, identity_of: Path) -> dict[str, object]:
    st = os.stat(identity_of)
    return {"argv": ["--help"], "cwd": str(cwd), "cwd_id": [st.st_dev, st.st_ino], "t0": 0.0}


def test_the_clients_own_folder_is_opened(tmp_path: Path) -> None:
    fd = warm.open_client_folder(request_for(tmp_path, tmp_path))
    try:
        assert os.path.samestat(os.fstat(fd), os.stat(tmp_path))
    finally:
        os.close(fd)


def test_a_folder_swapped_for_a_link_is_refused(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "node").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(OSError, match="cannot open the working directory"):
        warm.open_client_folder(request_for(tmp_path / "node", tmp_path / "elsewhere"))


def test_a_folder_swapped_for_another_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "node").mkdir()
    (tmp_path / "other").mkdir()
    with pytest.raises(OSError, match="not the client's working directory"):
        warm.open_client_folder(request_for(tmp_path / "other", tmp_path / "node"))
    with pytest.raises(OSError, match="names no working directory"):
        warm.open_client_folder({"argv": []})


def ask(sock: Path, request: dict[str, object]) -> dict[str, object]:
    """Send ``request`` to the warm server on ``sock``; its reply."""
    deadline = time.monotonic() + HANG_S
    while True:
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.connect(str(sock))
            break
        except OSError:
            conn.close()
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    with conn:
        conn.settimeout(HANG_S)
        conn.sendall((json.dumps(request) + "\n").encode())
        data = b""
        while not data.endswith(b"\n"):
            chunk = conn.recv(65536)
            assert chunk, "the server closed the connection without a reply"
            data += chunk
    reply = json.loads(data)
    assert isinstance(reply, dict)
    return reply


def test_the_server_refuses_a_swapped_folder_and_writes_nothing_there(tmp_path: Path) -> None:
    node, elsewhere = tmp_path / "node", tmp_path / "elsewhere"
    node.mkdir()
    elsewhere.mkdir()
    sock = node / warm.SOCKET_NAME
    server = subprocess.Popen(
        [sys.executable, "-m", "nodes.warm", "serve", "--socket", str(sock), "--idle-exit", "30"],
        cwd=node,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        # the client started in `node`, which was then replaced by a link to `elsewhere`
        (tmp_path / "link").symlink_to(elsewhere)
        reply = ask(sock, request_for(tmp_path / "link", node))
        assert reply["returncode"] == 2
        assert "cannot open the working directory" in str(reply["stderr"])
        # or by another folder
        reply = ask(sock, request_for(elsewhere, node))
        assert reply["returncode"] == 2
        assert "not the client's working directory" in str(reply["stderr"])
        assert list(elsewhere.iterdir()) == []
        # the real folder is served: the worker runs there and its output files are gone after
        reply = ask(sock, request_for(node, node))  # `--help` (the worker's exit status is 1)
        assert reply["returncode"] != 2 and "usage: hadar-worker" in str(reply["stdout"]), reply
        assert not [p.name for p in node.iterdir() if p.name.startswith(".warm-")]
    finally:
        server.terminate()
        server.wait(timeout=HANG_S)
    assert list(elsewhere.iterdir()) == []
