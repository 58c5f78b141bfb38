"""Providers by capability: each provider registers one ``ProviderKind`` (node schema, settings
section, capabilities, where its classes live) from its own package; the core loader names no
provider, and callers ask a capability (``emulates_gpus``, ``shares_machine``,
``launches_nodes``) instead of comparing the provider's name."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from hadar.clusters import load_cluster
from hadar.commands.run import check_down_after
from hadar.core import cluster_config
from hadar.core.errors import InputError
from hadar.providers import registry
from hadar.providers.base import make_provider
from hadar.providers.lifecycle import make_lifecycle
from hadar.providers.registry import NoTransport, ProviderKind, provider_kind, provider_kinds
from hadar.providers.ssh import SshNode
from hadar.providers.transport import transport_keys
from hadar.runtime.coordinator import _shares_machine


def _write(tmp_path: Path, provider: str) -> Path:
    f = tmp_path / f"{provider}.yaml"
    f.write_text(f"name: c\nprovider: {provider}\nnodes:\n  - {{name: a, gpus: {{t4: 1}}}}\n")
    return f


@pytest.fixture
def swap() -> Iterator[None]:
    """Tests that replace a registered kind put the original back."""
    saved = dict(registry._REGISTERED)
    yield
    registry._REGISTERED.clear()
    registry._REGISTERED.update(saved)


def test_each_provider_registers_one_kind_with_its_capabilities() -> None:
    kinds = {k.name: k for k in provider_kinds()}
    assert list(kinds) == ["local", "ssh", "aws", "slurm"]
    assert [k.provider for k in kinds.values()] == [
        f"hadar.providers.{n}.provider:{c}Provider"
        for n, c in zip(kinds, ("Local", "Ssh", "Aws", "Slurm"), strict=True)
    ]
    assert [k.settings_model.__name__ for k in kinds.values()] == [
        "LocalSettings",
        "SshSettings",
        "AwsSettings",
        "SlurmSettings",
    ]
    assert [n for n, k in kinds.items() if k.emulates_gpus] == ["local"]
    assert [n for n, k in kinds.items() if k.shares_machine] == ["local"]
    assert [n for n, k in kinds.items() if k.launches_nodes] == ["aws"]
    assert [n for n, k in kinds.items() if k.shared_filesystem] == ["slurm"]
    assert [n for n, k in kinds.items() if not k.warm_workers] == ["slurm"]
    assert provider_kind("simulated") is None
    assert registry.provider_names() == "local, ssh, aws or slurm"
    assert transport_keys("ssh") == frozenset(SshNode.model_fields)


def test_the_emulate_default_is_the_providers_capability(tmp_path: Path, swap: None) -> None:
    local = _write(tmp_path, "local")
    assert load_cluster(local).node("a").emulate is True
    assert load_cluster(_write(tmp_path, "ssh")).node("a").emulate is False
    # the core alone knows no provider: nothing is emulated unless the caller says so
    assert cluster_config.load_cluster(local).node("a").emulate is False
    assert _shares_machine(load_cluster(local))
    assert not _shares_machine(load_cluster("sim-60gpu"))

    kind = provider_kind("local")
    assert kind is not None
    registry.unregister_provider("local")
    registry.register_provider(replace(kind, emulates_gpus=False, shares_machine=False))
    assert load_cluster(local).node("a").emulate is False
    assert not _shares_machine(load_cluster(local))


def test_a_cluster_without_machines_names_the_providers_that_have_them() -> None:
    with pytest.raises(
        InputError, match=r"no nodes to run on \(use one of local, ssh, aws, slurm\)"
    ):
        make_provider(load_cluster("sim-60gpu"), "r1")


def test_launching_machines_is_a_capability(tmp_path: Path, swap: None) -> None:
    local = load_cluster(_write(tmp_path, "local"))
    with pytest.raises(
        InputError,
        match=r"local.yaml: provider: hadar cluster up does not apply to a provider: local "
        r"cluster, whose machines exist without hadar \(providers that launch machines: aws\)$",
    ):
        make_lifecycle(local, "hadar cluster up")
    with pytest.raises(InputError, match=r"simulated cluster, which has no machines \(providers"):
        make_lifecycle(load_cluster("sim-60gpu"), "hadar cluster status")
    with pytest.raises(InputError, match=r"terminates the instances of a provider: aws cluster"):
        check_down_after(str(_write(tmp_path, "local")))

    class Launcher:
        def __init__(self, cluster: object) -> None:
            self.cluster = cluster

    kind = provider_kind("local")
    assert kind is not None
    registry.unregister_provider("local")
    registry.register_provider(replace(kind, lifecycle=Launcher))
    assert make_lifecycle(local, "hadar cluster").cluster is local
    check_down_after(str(_write(tmp_path, "local")))  # accepted now


def test_a_name_is_registered_once() -> None:
    with pytest.raises(ValueError, match="provider name 'ssh' is taken"):
        registry.register_provider(ProviderKind("ssh", "elsewhere:Provider", NoTransport))
    with pytest.raises(ValueError, match="'simulated' is the core's"):
        registry.register_provider(ProviderKind("simulated", "elsewhere:Provider"))


def test_the_core_loader_accepts_only_the_sections_it_is_told_of(tmp_path: Path) -> None:
    f = tmp_path / "fake-provider.yaml"
    f.write_text(
        "name: c\nprovider: fake\nnodes:\n  - {name: a, gpus: {t4: 1}, slot: 3}\nfake: {zone: z1}\n"
    )
    # the core alone accepts any provider name but no section it was not told of
    with pytest.raises(InputError, match=r"fake: unknown field"):
        cluster_config.load_cluster(f, lambda provider: {"slot"})
    schema = cluster_config.ProviderSchema(
        providers=("fake",), sections=("fake",), transport_keys=lambda p: {"slot"}
    )
    cluster = cluster_config.load_cluster(f, schema=schema)
    assert cluster.settings["fake"] == {"zone": "z1"} and cluster.node("a").transport == {"slot": 3}
