"""Providers by capability: one ``ProviderKind`` per provider (module, node schema,
capabilities) in ``nodes.transport.PROVIDER_KINDS``; the core loader names no provider's
default, and callers ask a capability (``emulates_gpus``, ``shares_machine``) instead of
comparing the provider's name."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

import nodes.transport as transport
from hadar.clusters import load_cluster
from hadar.core import cluster_config
from hadar.core.errors import InputError
from hadar.runtime.coordinator import _shares_machine
from nodes.provider import make_provider


def _write(tmp_path: Path, provider: str) -> Path:
    f = tmp_path / f"{provider}.yaml"
    f.write_text(f"name: c\nprovider: {provider}\nnodes:\n  - {{name: a, gpus: {{t4: 1}}}}\n")
    return f


def test_each_provider_is_one_kind_with_its_capabilities():
    kinds = transport.PROVIDER_KINDS
    assert list(kinds) == ["local", "ssh", "aws"]
    assert [k.module for k in kinds.values()] == ["nodes.local", "nodes.ssh", "nodes.aws"]
    assert [n for n, k in kinds.items() if k.emulates_gpus] == ["local"]
    assert [n for n, k in kinds.items() if k.shares_machine] == ["local"]
    assert transport.provider_kind("simulated") is None
    assert transport.provider_names() == "local, ssh or aws"
    assert transport.transport_keys("ssh") == frozenset(transport.SshNode.model_fields)


def test_the_emulate_default_is_the_providers_capability(tmp_path, monkeypatch):
    local = _write(tmp_path, "local")
    assert load_cluster(local).node("a").emulate is True
    assert load_cluster(_write(tmp_path, "ssh")).node("a").emulate is False
    # the core alone knows no provider: nothing is emulated unless the caller says so
    assert cluster_config.load_cluster(local).node("a").emulate is False
    assert _shares_machine(load_cluster(local))
    assert not _shares_machine(load_cluster("sim-60gpu"))

    kind = replace(transport.PROVIDER_KINDS["local"], emulates_gpus=False, shares_machine=False)
    monkeypatch.setattr(transport, "PROVIDER_KINDS", {**transport.PROVIDER_KINDS, "local": kind})
    assert load_cluster(local).node("a").emulate is False
    assert not _shares_machine(load_cluster(local))


def test_a_cluster_without_machines_names_the_providers_that_have_them():
    with pytest.raises(InputError, match=r"no nodes to run on \(use one of local, ssh, aws\)"):
        make_provider(load_cluster("sim-60gpu"), "r1")


def test_a_new_provider_kind_is_accepted_by_the_core_loader_without_core_edits(
    tmp_path, monkeypatch
):
    f = tmp_path / "fake-provider.yaml"
    f.write_text(
        "name: c\nprovider: fake\nnodes:\n  - {name: a, gpus: {t4: 1}, slot: 3}\nfake: {zone: z1}\n"
    )
    with pytest.raises(InputError, match=r"provider: Input should be 'simulated', 'local', 'ssh'"):
        load_cluster(_write(tmp_path, "fake"))

    class FakeNode(transport.NoTransport):
        slot: int

    kind = transport.ProviderKind("fake", "tests.nowhere", FakeNode, emulates_gpus=True)
    monkeypatch.setattr(transport, "PROVIDER_KINDS", {**transport.PROVIDER_KINDS, "fake": kind})
    cluster = load_cluster(f)
    assert cluster.settings["fake"] == {"zone": "z1"}
    assert cluster.node("a").transport == {"slot": 3} and cluster.node("a").emulate is True
    # the core alone accepts any provider name but no section it was not told of
    with pytest.raises(InputError, match=r"fake: unknown field"):
        cluster_config.load_cluster(f, lambda provider: {"slot"})
