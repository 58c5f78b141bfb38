"""Adding a provider touches its own module only: a provider defined in this test module (and
registered by a fixture) is read from a cluster file by the loader (its own node key and
settings section, its capabilities), checked by ``hadar nodes check`` and runs ``hadar run``,
with no other file knowing it; declared with a lifecycle (``launches_nodes``), ``hadar cluster
up|down|status`` and ``hadar run --down-after`` launch, list and terminate its machines.

``testloop`` finds its machines itself (every node is this machine: it shares it and emulates
its GPUs) and runs everything through a local provider, Ray's ``NodeProvider`` /
``CommandRunner`` split as ``aws`` does with ``ssh``. Its lifecycle's machines are records in
``testloop.machines_dir`` (a launch writes one, a termination marks it terminated).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict, Field

from hadar.cli import main
from hadar.clusters import load_cluster
from hadar.commands.cluster import teardown
from hadar.commands.run import check_down_after
from hadar.core.cluster import Cluster, Node
from hadar.core.errors import InputError
from hadar.providers.base import NodeHealth, NodeProvider, RunsThroughAnother, load_section
from hadar.providers.lifecycle import Log, NodeLifecycle
from hadar.providers.local.provider import LocalProvider
from hadar.providers.registry import ProviderKind, register_provider, unregister_provider
from hadar.providers.transport import node_transport
from tests.e2e.runlib import train_one_tiny_job

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
    machines_dir: str | None = None


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


@dataclass(frozen=True)
class LoopMachine:
    node: str
    machine_id: str
    state: str
    machine_type: str = "slot"
    public_ip: str | None = "127.0.0.1"
    private_ip: str | None = None


class LoopMachines(NodeLifecycle):
    """Its machines' lifecycle: one JSON record per machine in ``testloop.machines_dir``."""

    def __init__(self, cluster: Cluster) -> None:
        super().__init__(cluster)
        settings: LoopSettings = load_section(cluster, NAME, LoopSettings)
        assert settings.machines_dir is not None
        self.root = Path(settings.machines_dir)

    def _records(self) -> list[LoopMachine]:
        records = [LoopMachine(**json.loads(f.read_text())) for f in self.root.glob("*.json")]
        order = self.cluster.node_index
        return sorted(records, key=lambda m: (order[m.node], m.machine_id))

    def _write(self, machine: LoopMachine) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        record = {"node": machine.node, "machine_id": machine.machine_id, "state": machine.state}
        (self.root / f"{machine.machine_id}.json").write_text(json.dumps(record))

    def machines(self, everything: bool = False) -> list[LoopMachine]:
        return [m for m in self._records() if everything or m.state == "running"]

    def running_nodes(self) -> dict[str, LoopMachine]:
        return {m.node: m for m in self.machines()}

    def to_launch(self) -> tuple[list[Node], dict[str, LoopMachine]]:
        have = self.running_nodes()
        return [n for n in self.cluster.nodes if n.name not in have], have

    def up(self, *, wait_ssh: bool = True, log: Log = print) -> list[LoopMachine]:
        missing, _ = self.to_launch()
        launched = len(self._records())
        for i, node in enumerate(missing):
            machine = LoopMachine(node.name, f"m-{launched + i}", "running")
            self._write(machine)
            log(f"{node.name}: launched {machine.machine_id}")
        return self.machines()

    def down(self, log: Log = print, wait: bool = True) -> list[str]:
        victims = self.machines()
        for m in victims:
            self._write(replace(m, state="terminated"))
            log(f"{m.node}: terminated {m.machine_id}")
        return [m.machine_id for m in victims]


@pytest.fixture
def testloop() -> Iterator[ProviderKind]:
    kind = register_provider(
        ProviderKind(
            NAME, LoopProvider, LoopNode, LoopSettings, emulates_gpus=True, shares_machine=True
        )
    )
    yield kind
    unregister_provider(NAME)


@pytest.fixture
def launching() -> Iterator[ProviderKind]:
    """``testloop`` declared with a lifecycle: it launches its machines."""
    kind = register_provider(
        ProviderKind(NAME, LoopProvider, LoopNode, LoopSettings, lifecycle=LoopMachines)
    )
    yield kind
    unregister_provider(NAME)


def _cluster_file(tmp_path: Path, settings: dict[str, Any] | None = None, **extra: Any) -> Path:
    f = tmp_path / "loop.yaml"
    node = {"name": "a", "gpus": {"t4": 1}, "slot": 4, **extra}
    section = {"label": "lo"} if settings is None else settings
    nodes = [node, {"name": "b", "gpus": {"t4": 1}, "slot": 5}] if settings is not None else [node]
    f.write_text(json.dumps({"name": "loop", "provider": NAME, "nodes": nodes, NAME: section}))
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


def test_its_settings_section_is_checked_when_the_file_is_loaded(
    testloop: ProviderKind, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = _cluster_file(tmp_path, {"label": ["not", "text"]})
    with pytest.raises(InputError, match=rf"^{f}: {NAME}\.label: Input should be a valid string$"):
        load_cluster(f)
    f = _cluster_file(tmp_path, {"lable": "lo"})
    for argv in (["nodes", "check", "--cluster"], ["cluster", "status", "--config"]):
        assert main([*argv, str(f)]) == 2
        (line,) = capsys.readouterr().err.strip().splitlines()
        assert line.endswith(f"{f}: {NAME}.lable: unknown field"), line


def test_hadar_cluster_does_not_apply_to_a_provider_that_launches_nothing(
    testloop: ProviderKind, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = _cluster_file(tmp_path)
    for argv in (["up", "-y"], ["down", "-y"], ["status"]):
        action = argv[0]
        assert main(["cluster", *argv, "--config", str(f)]) == 2
        (line,) = capsys.readouterr().err.strip().splitlines()
        assert line.endswith(
            f"{f}: provider: hadar cluster {action} does not apply to a provider: {NAME} "
            "cluster, whose machines exist without hadar (providers that launch machines: aws)"
        ), line


def test_hadar_cluster_launches_lists_and_terminates_through_its_lifecycle(
    launching: ProviderKind, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    machines = tmp_path / "machines"
    f = str(_cluster_file(tmp_path, {"machines_dir": str(machines)}))
    life = LoopMachines(load_cluster(f))

    # no terminal and no -y: nothing is launched; --dry-run is a step it does not have
    assert main(["cluster", "up", "--config", f]) == 2
    assert "launch 2 machines of cluster loop: refusing without confirmation" in (
        capsys.readouterr().err
    )
    assert main(["cluster", "up", "--config", f, "--dry-run"]) == 2
    assert f"--dry-run: provider {NAME} cannot check a launch without launching" in (
        capsys.readouterr().err
    )
    assert main(["cluster", "up", "-y", "--config", f, "--out", str(tmp_path / "x.yaml")]) == 2
    assert f"--out: provider {NAME} writes no cluster file" in capsys.readouterr().err
    assert life.machines(everything=True) == []

    assert main(["cluster", "up", "-y", "--config", f]) == 0
    out = capsys.readouterr().out
    assert "a: launched m-0" in out and "b: launched m-1" in out
    assert "loop: 2 machines running" in out and "hadar cluster down --config" in out
    assert [(m.node, m.machine_id) for m in life.machines()] == [("a", "m-0"), ("b", "m-1")]

    # up again launches nothing; status lists them
    assert main(["cluster", "up", "--config", f]) == 0
    assert capsys.readouterr().out.count("already has") == 2
    assert main(["cluster", "up", "--config", f, "--dry-run"]) == 0
    assert "every node of loop already has a machine" in capsys.readouterr().out
    assert main(["cluster", "status", "--config", f]) == 0
    status = capsys.readouterr().out
    assert "loop: 2 machines" in status and "m-0" in status and "m-1" in status

    assert main(["cluster", "down", "-y", "--config", f]) == 0
    assert "terminated 2 machines of cluster loop" in capsys.readouterr().out
    assert life.machines() == [] and len(life.machines(everything=True)) == 2
    assert main(["cluster", "status", "--all", "--config", f]) == 0
    assert capsys.readouterr().out.count("terminated") == 2
    assert main(["cluster", "down", "-y", "--config", f]) == 0
    assert "nothing to do: no live machines of cluster loop" in capsys.readouterr().out

    # hadar run --down-after takes the file and terminates its machines after the run
    check_down_after(f)
    assert main(["cluster", "up", "-y", "--config", f]) == 0
    lines: list[str] = []
    assert teardown(f, 0, lines.append) == ["m-2", "m-3"]
    assert lines[-1] == "--down-after: terminated 2 machines of cluster loop"


def test_nodes_check_reaches_its_nodes(
    testloop: ProviderKind, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["nodes", "check", "--cluster", str(_cluster_file(tmp_path)), "--json"]) == 0
    (row,) = map(json.loads, capsys.readouterr().out.splitlines())
    assert row["node"] == "a" and row["reachable"] and row["address"] == "lo:4"


@pytest.mark.slow
def test_hadar_run_trains_on_its_nodes(testloop: ProviderKind, tmp_path: Path) -> None:
    train_one_tiny_job(_cluster_file(tmp_path), tmp_path)
