"""Adding a provider touches its own module only: a provider defined in this test module (and
registered by a fixture) is read from a cluster file by the loader (its own node key and
settings section, its capabilities), checked by ``hadar nodes check`` and runs ``hadar run``,
with no other file knowing it.

``testloop`` finds its machines itself (every node is this machine: it shares it and emulates
its GPUs) and runs everything through a local provider, Ray's ``NodeProvider`` /
``CommandRunner`` split as ``aws`` does with ``ssh``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, Field

from hadar.cli import main
from hadar.clusters import load_cluster
from hadar.core.cluster import Cluster, Node
from hadar.core.errors import InputError
from hadar.providers.base import NodeHealth, NodeProvider, RunsThroughAnother, load_section
from hadar.providers.local.provider import LocalProvider
from hadar.providers.registry import ProviderKind, register_provider, unregister_provider
from hadar.providers.transport import node_transport
from tests.e2e.runlib import tracker_progress, write_jobs

ROOT = Path(__file__).resolve().parents[3]
NAME = "testloop"


class LoopNode(BaseModel):
    """The provider's own node key."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    slot: int = Field(ge=0)


class LoopSettings(BaseModel):
    """The provider's own settings section (``testloop:``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    label: str = "loop"


class LoopProvider(RunsThroughAnother):
    """Every node is this machine; commands run through a local provider."""

    def __init__(
        self,
        cluster: Cluster,
        run_id: str,
        *,
        base_dir: str | None = None,
        trust_new_hosts: bool | None = None,
    ) -> None:
        super().__init__(cluster, run_id)
        self.settings: LoopSettings = load_section(cluster, NAME, LoopSettings)
        self.slots = {n.name: node_transport(cluster, n, LoopNode).slot for n in cluster.nodes}
        local = replace(cluster, provider="local", settings={})
        self._local = LocalProvider(local, run_id, base_dir=base_dir)

    def runner(self, node: Node | str) -> tuple[NodeProvider, str]:
        return self._local, self.node(node).name

    def check(self, node: Node | str, timeout_s: float = 60.0) -> NodeHealth:
        health = self._local.check(self.node(node).name, timeout_s)
        return replace(health, address=f"{self.settings.label}:{self.slots[health.node]}")

    def close(self) -> None:
        self._local.close()


@pytest.fixture
def testloop() -> Iterator[ProviderKind]:
    kind = register_provider(
        ProviderKind(
            NAME, LoopProvider, LoopNode, LoopSettings, emulates_gpus=True, shares_machine=True
        )
    )
    yield kind
    unregister_provider(NAME)


def _cluster_file(tmp_path: Path, **extra: Any) -> Path:
    f = tmp_path / "loop.yaml"
    node = {"name": "a", "gpus": {"t4": 1}, "slot": 4, **extra}
    f.write_text(
        json.dumps({"name": "loop", "provider": NAME, "nodes": [node], NAME: {"label": "lo"}})
    )
    return f


def test_no_other_file_names_the_provider() -> None:
    for package in ("hadar", "nodes"):
        for path in (ROOT / package).rglob("*.py"):
            assert NAME not in path.read_text(), path
    assert NAME not in (ROOT / "pyproject.toml").read_text()


def test_the_loader_takes_its_node_key_section_and_capabilities(
    testloop: ProviderKind, tmp_path: Path
) -> None:
    cluster = load_cluster(_cluster_file(tmp_path))
    assert cluster.provider == NAME and cluster.settings[NAME] == {"label": "lo"}
    node = cluster.node("a")
    assert node.transport == {"slot": 4} and node.emulate is True
    with pytest.raises(InputError, match=r"loop.yaml: nodes\[a\]\.slot: Input should be greater"):
        load_cluster(_cluster_file(tmp_path, slot=-1))
    with pytest.raises(InputError, match=r"loop.yaml: nodes\[0\]\.address: unknown field"):
        load_cluster(_cluster_file(tmp_path, address="h"))


def test_unregistered_it_is_an_unknown_provider(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"loop.yaml: nodes\[0\]\.slot: unknown field"):
        load_cluster(_cluster_file(tmp_path))
    f = tmp_path / "no-keys.yaml"
    f.write_text(f"name: c\nprovider: {NAME}\nnodes:\n  - {{name: a, gpus: {{t4: 1}}}}\n")
    with pytest.raises(InputError, match=r"provider: Input should be 'simulated', 'local'"):
        load_cluster(f)


def test_nodes_check_reaches_its_nodes(
    testloop: ProviderKind, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["nodes", "check", "--cluster", str(_cluster_file(tmp_path)), "--json"]) == 0
    (row,) = map(json.loads, capsys.readouterr().out.splitlines())
    assert row["node"] == "a" and row["reachable"] and row["address"] == "lo:4"


@pytest.mark.slow
def test_hadar_run_trains_on_its_nodes(
    testloop: ProviderKind, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    jobs = write_jobs(tmp_path / "jobs.yaml", {"LT": 20})
    out = tmp_path / "run"
    argv = ["run", "--cluster", str(_cluster_file(tmp_path)), "--workload", str(jobs)]
    code = main([*argv, "--out", str(out), "--round", "3", "--no-live"])
    assert code == 0, capsys.readouterr()
    summary = json.loads((out / "summary.json").read_text())
    assert summary["completed"] == summary["jobs"] == 1
    assert tracker_progress(out) == {0: 20}
