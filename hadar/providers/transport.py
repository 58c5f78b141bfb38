"""What a provider adds to a cluster file, validated when the file is loaded: its node entries'
keys (the transport keys) and its settings section.

A cluster file's node entries are flat (``{name, gpus, address, port, user, ...}``). The core
loader (:mod:`hadar.core.cluster_config`) keeps the scheduling keys and hands the rest to the
node uninterpreted, as ``Node.transport``; the file's provider says which of those keys it
accepts (``ProviderKind.node_model``, ``extra="forbid"``, so a misspelt key is an error) and
parses them. A ``simulated`` cluster may carry the keys of any provider (the bundled aws and lab
clusters simulate real ones). Each provider's settings section is checked with its
``ProviderKind.settings_model`` at load time too (:func:`check_settings`), so a bad section is
exit 2 before anything starts, whatever command loads the file.

Imports no optional extra: the base install (simulation only) validates cluster files with it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from hadar.core.cluster import Cluster, Node
from hadar.core.cluster_config import ProviderSchema
from hadar.core.validation import from_validation_error
from hadar.providers.registry import provider_kind, provider_kinds


def provider_schema() -> ProviderSchema:
    """What the registered providers add to a cluster file, for the core loader."""
    kinds = provider_kinds()
    return ProviderSchema(
        providers=tuple(k.name for k in kinds),
        sections=tuple(k.section for k in kinds),
        transport_keys=transport_keys,
        emulates_gpus=_emulates_gpus,
    )


def _emulates_gpus(provider: str) -> bool:
    kind = provider_kind(provider)
    return kind is not None and kind.emulates_gpus


M = TypeVar("M", bound=BaseModel)


def transport_keys(provider: str) -> frozenset[str]:
    """The node-entry keys ``provider`` accepts beyond the core's; for ``simulated`` (or a
    provider name the core will reject) the keys of every provider."""
    kind = provider_kind(provider)
    models = [kind.node_model] if kind is not None else [k.node_model for k in provider_kinds()]
    return frozenset(k for m in models for k in m.model_fields)


def node_transport(cluster: Cluster, node: Node, model: type[M]) -> M:
    """``node.transport`` parsed with ``model``; errors are one line naming the cluster file and
    ``nodes[<node>].<field>``."""
    return _parse(cluster, node.name, node.transport, model)


def check_transport(cluster: Cluster) -> None:
    """Validate every node's transport keys with the schema of the cluster's provider (with each
    provider's schema, on its own keys, for a ``simulated`` cluster)."""
    kind = provider_kind(cluster.provider)
    model = None if kind is None else kind.node_model
    for node in cluster.nodes:
        for m in [model] if model is not None else [k.node_model for k in provider_kinds()]:
            own = (
                node.transport
                if model is not None
                else {k: v for k, v in node.transport.items() if k in m.model_fields}
            )
            _parse(cluster, node.name, own, m)


def load_section(cluster: Cluster, section: str, model: type[M]) -> M:
    """The cluster file's ``section`` (``ssh``, ``aws``, ``local``...) parsed with ``model``
    (absent: an empty mapping); errors are one line naming the file and ``section.field``."""
    return _validate(cluster, section, cluster.settings.get(section) or {}, model)


def check_settings(cluster: Cluster) -> None:
    """Validate the settings sections with their providers' schemas: the section of the
    cluster's provider always (a required key it lacks is an error even when the section is
    absent), another provider's when the file fills it in (an ``aws`` cluster's ``ssh:``
    section reaches the SSH side; a ``simulated`` cluster may carry any)."""
    own = provider_kind(cluster.provider)
    for kind in provider_kinds():
        if kind == own or cluster.settings.get(kind.section):
            load_section(cluster, kind.section, kind.settings_model)


def check_cluster(cluster: Cluster) -> None:
    """Everything the providers add to a loaded cluster file: node keys, then sections."""
    check_transport(cluster)
    check_settings(cluster)


def _parse(cluster: Cluster, node: str, data: Mapping[str, object], model: type[M]) -> M:
    return _validate(cluster, f"nodes[{node}]", data, model)


def _validate(cluster: Cluster, at: str, data: Mapping[str, object], model: type[M]) -> M:
    try:
        return model.model_validate(dict(data), strict=True)  # as the core's keys
    except ValidationError as exc:
        source = cluster.source or f"cluster {cluster.name}"
        raise from_validation_error(source, exc, at=at) from None
