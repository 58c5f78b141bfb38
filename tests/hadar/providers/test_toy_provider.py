"""A new provider is one package under ``hadar/providers/`` (CONTRIBUTING.md, "Where new things
go"); the one below lives in this test only. It is the transport half of the split Ray makes
(``CommandRunner``): it runs commands itself, as child processes of this one, and takes its files
from :class:`hadar.providers.transfer.FolderFiles` (its nodes' working directories are folders
here). Registered by a fixture, it passes the provider interface's checks (files in and out,
verified and confined to the node's folder; commands in that folder with their environment; a
timeout kills the command), ``hadar nodes check`` reaches its nodes and a tiny real ``hadar run``
trains on them. No product module names it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import pytest

from hadar.cli import main
from hadar.clusters import load_cluster
from hadar.core.cluster import Cluster, Node
from hadar.core.integrity import sha256_file
from hadar.core.safe_paths import PathEscapeError
from hadar.providers import health
from hadar.providers.base import CommandResult, NodeHealth, RemotePathError
from hadar.providers.registry import ProviderKind, register_provider, unregister_provider
from hadar.providers.transfer import FolderFiles
from tests.e2e.runlib import train_one_tiny_job

ROOT = Path(__file__).resolve().parents[3]
NAME = "toyshell"


class ToyShellProvider(FolderFiles):
    """Every node is a folder ``<base_dir>/<run-id>/<node>`` on this machine; commands are child
    processes in their own session, killed whole on a timeout."""

    def __init__(self, cluster: Cluster, run_id: str, base_dir: str | None = None, **_: object):
        super().__init__(cluster, run_id)  # (``hadar run`` passes trust_new_hosts too)
        self.base_dir = Path(base_dir or Path.home() / ".toyshell").resolve()
        self._python = [sys.executable]

    def workdir(self, node: Node | str) -> str:
        return str(self.base_dir / self.run_id / self.dir_name(node))

    def rendezvous_address(self, node: Node | str) -> str:
        self.node(node)
        return "127.0.0.1"

    def run(
        self,
        node: Node | str,
        argv: Sequence[str],
        timeout_s: float | None,
        env: Mapping[str, str] | None = None,
    ) -> CommandResult:
        start = time.monotonic()
        proc = subprocess.Popen(
            list(argv),
            cwd=self._workdir(node),
            env=self._env(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        timed_out = False
        try:
            out, err = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
        text = (out.decode(errors="replace"), err.decode(errors="replace"))
        return CommandResult(proc.returncode, *text, time.monotonic() - start, timed_out)

    def check(self, node: Node | str, timeout_s: float = 60.0) -> NodeHealth:
        n = self.node(node)
        res = self.run(n, [*self._python, "-c", health.SNIPPET], timeout_s)
        return health.node_health(n.name, "toy", res, res.seconds, timeout_s, self._python[0])


@pytest.fixture
def toyshell() -> Iterator[ProviderKind]:
    kind = register_provider(
        ProviderKind(NAME, ToyShellProvider, emulates_gpus=True, shares_machine=True)
    )
    yield kind
    unregister_provider(NAME)


def _cluster_file(tmp_path: Path) -> Path:
    f = tmp_path / "toy.yaml"
    nodes = [{"name": "a", "gpus": {"t4": 1}}, {"name": "b", "gpus": {"t4": 1}}]
    f.write_text(json.dumps({"name": "toy", "provider": NAME, "nodes": nodes}))
    return f


def test_it_passes_the_provider_interface_checks(toyshell: ProviderKind, tmp_path: Path) -> None:
    cluster = load_cluster(_cluster_file(tmp_path))
    with ToyShellProvider(cluster, "run-1", base_dir=str(tmp_path / "nodes")) as p:
        assert [n.name for n in p.nodes()] == ["a", "b"]
        src = tmp_path / "payload.bin"
        src.write_bytes(os.urandom(1 << 16))
        want = sha256_file(src)
        assert p.put("a", src, "in/payload.bin") == want
        assert p.sha256("a", "in/payload.bin") == want
        res = p.run(
            "a",
            ["sh", "-c", 'cat in/payload.bin > out.bin; echo "$GREETING"'],
            30,
            {"GREETING": "hi"},
        )
        assert res.ok and res.stdout.strip() == "hi"
        assert p.get("a", "out.bin", tmp_path / "back.bin", want) == want
        assert (tmp_path / "back.bin").read_bytes() == src.read_bytes()
        assert not (Path(p.workdir("b")) / "in").exists()  # each node has its own folder
        with pytest.raises((RemotePathError, PathEscapeError)):
            p.put("a", src, "../b/escape.bin")
        slow = p.run("b", ["sleep", "30"], 0.5)
        assert slow.timed_out and not slow.ok and slow.seconds < 10
        assert p.check("b").reachable


def test_nodes_check_reaches_its_nodes(
    toyshell: ProviderKind, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["nodes", "check", "--cluster", str(_cluster_file(tmp_path)), "--json"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(r["node"], r["reachable"], r["address"]) for r in rows] == [
        ("a", True, "toy"),
        ("b", True, "toy"),
    ]


@pytest.mark.slow
def test_hadar_run_trains_on_its_nodes(toyshell: ProviderKind, tmp_path: Path) -> None:
    out = train_one_tiny_job(_cluster_file(tmp_path), tmp_path)
    assert (out / "nodes").is_dir()  # its nodes' folders went under the run directory


def test_no_product_module_names_it() -> None:
    for package in ("hadar", "nodes", "tracker"):
        for path in (ROOT / package).rglob("*.py"):
            assert NAME not in path.read_text(), path
