"""Each provider's kind (module, capabilities) and per-node transport keys: the schema of a node
entry's provider-specific keys.

A cluster file's node entries are flat (``{name, gpus, address, port, user, ...}``). The core
loader (:mod:`hadar.core.cluster_config`) keeps the scheduling keys and hands the rest to the
node uninterpreted, as ``Node.transport``; this module says which of those keys each provider
accepts and parses them (``extra="forbid"``, so a misspelt key is an error). A ``simulated``
cluster may carry the keys of any provider (the bundled aws and lab clusters simulate real ones).

Imports no optional extra: the base install (simulation only) validates cluster files with it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from hadar.core.cluster import Cluster, Node
from hadar.core.cluster_config import ProviderSchema
from hadar.core.validation import from_validation_error

_SHELL_METACHARACTERS = frozenset("'`\"$\\;&<>|(){}")
"""What OpenSSH refuses in a host or user name (ssh.c ``valid_hostname``/``valid_ruser``): they
reach a local shell through ProxyCommand's ``%h``/``%r``."""


def ssh_name_problem(value: str, what: str) -> str | None:
    """Why ``value`` is no valid SSH host name (``what="host"``; a comma is refused too) or user
    name (``what="user"``), as OpenSSH judges it; None if it is valid."""
    bad = _SHELL_METACHARACTERS | ({","} if what == "host" else set())
    if not value:
        return f"empty {what} name"
    if value.startswith("-"):
        return f"{what} name {value!r} starts with '-'"
    if any(c in bad or c.isspace() or not c.isprintable() for c in value):
        return f"{what} name {value!r} holds a space, a control character or one of {''.join(sorted(bad))}"
    return None


def check_ssh_name(value: str | None, what: str) -> str | None:
    """``value`` if it is a valid SSH host/user name (or None), else ``ValueError``."""
    if value is not None and (problem := ssh_name_problem(value, what)) is not None:
        raise ValueError(problem)
    return value


SshHost = Annotated[str, AfterValidator(lambda v: check_ssh_name(v, "host"))]
"""A host name, alias or IP as OpenSSH accepts it (no shell metacharacters)."""
SshUser = Annotated[str, AfterValidator(lambda v: check_ssh_name(v, "user"))]
"""A user name as OpenSSH accepts it (no shell metacharacters)."""


class SshNode(BaseModel):
    """The keys of a node entry of a ``provider: ssh`` cluster."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    address: SshHost | None = None
    """Host name, ``~/.ssh/config`` alias or IP (default: the node's name)."""
    port: int | None = Field(default=None, ge=1, le=65535)
    user: SshUser | None = None
    identity_file: str | None = None
    instance_type: str | None = None
    """The EC2 instance type, for information (``hadar cluster up`` writes it)."""


class AwsNode(BaseModel):
    """The keys of a node entry of a ``provider: aws`` cluster."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    instance_type: str | None = None
    """The EC2 instance type launched for the node (required by ``hadar cluster up``)."""


class NoTransport(BaseModel):
    """Providers whose nodes have no transport keys (``local``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)


@dataclass(frozen=True)
class ProviderKind:
    """What the harness knows about a node provider without importing it (its module may need an
    optional extra): where it lives, its node entries' keys and its capabilities, which callers
    ask instead of comparing provider names."""

    name: str
    """The cluster file's ``provider:`` value."""
    module: str
    """The module whose ``PROVIDER`` class runs the cluster's nodes."""
    node_model: type[BaseModel]
    """The schema of its node entries' transport keys."""
    emulates_gpus: bool = False
    """Its nodes emulate their declared GPUs by default (``emulate:`` in the cluster file)."""
    shares_machine: bool = False
    """Every node is this machine: their GPUs are one pool, their work directories go under the
    run directory."""

    @property
    def section(self) -> str:
        """The cluster file's top-level section it reads its settings from (its name)."""
        return self.name


PROVIDER_KINDS: Mapping[str, ProviderKind] = {
    k.name: k
    for k in (
        ProviderKind(
            "local",
            "hadar.providers.local.provider",
            NoTransport,
            emulates_gpus=True,
            shares_machine=True,
        ),
        ProviderKind("ssh", "hadar.providers.ssh.provider", SshNode),
        ProviderKind("aws", "hadar.providers.aws.provider", AwsNode),
    )
}
"""The providers that reach machines, one entry each (``simulated`` has none), in the order
messages list them."""


def provider_kind(provider: str) -> ProviderKind | None:
    """The kind of provider ``provider`` names; None for ``simulated`` (no machines)."""
    return PROVIDER_KINDS.get(provider)


def provider_schema() -> ProviderSchema:
    """What the registered providers add to a cluster file, for the core loader."""
    return ProviderSchema(
        providers=tuple(PROVIDER_KINDS),
        sections=tuple(k.section for k in PROVIDER_KINDS.values()),
        transport_keys=transport_keys,
        emulates_gpus=_emulates_gpus,
    )


def _emulates_gpus(provider: str) -> bool:
    kind = PROVIDER_KINDS.get(provider)
    return kind is not None and kind.emulates_gpus


def provider_names(conjunction: str = "or") -> str:
    """``local, ssh or aws``: the providers that reach machines, for messages."""
    names = list(PROVIDER_KINDS)
    return f"{', '.join(names[:-1])} {conjunction} {names[-1]}" if len(names) > 1 else names[0]


M = TypeVar("M", bound=BaseModel)


def transport_keys(provider: str) -> frozenset[str]:
    """The node-entry keys ``provider`` accepts beyond the core's; for ``simulated`` (or a
    provider name the core will reject) the keys of every provider."""
    kind = PROVIDER_KINDS.get(provider)
    models = (
        [kind.node_model] if kind is not None else [k.node_model for k in PROVIDER_KINDS.values()]
    )
    return frozenset(k for m in models for k in m.model_fields)


def node_transport(cluster: Cluster, node: Node, model: type[M]) -> M:
    """``node.transport`` parsed with ``model``; errors are one line naming the cluster file and
    ``nodes[<node>].<field>``."""
    return _parse(cluster, node.name, node.transport, model)


def check_transport(cluster: Cluster) -> None:
    """Validate every node's transport keys with the schema of the cluster's provider (with each
    provider's schema, on its own keys, for a ``simulated`` cluster)."""
    kind = PROVIDER_KINDS.get(cluster.provider)
    model = None if kind is None else kind.node_model
    for node in cluster.nodes:
        for m in [model] if model is not None else [k.node_model for k in PROVIDER_KINDS.values()]:
            own = (
                node.transport
                if model is not None
                else {k: v for k, v in node.transport.items() if k in m.model_fields}
            )
            _parse(cluster, node.name, own, m)


def _parse(cluster: Cluster, node: str, data: Mapping[str, object], model: type[M]) -> M:
    try:
        return model.model_validate(dict(data))
    except ValidationError as exc:
        source = cluster.source or f"cluster {cluster.name}"
        raise from_validation_error(source, exc, at=f"nodes[{node}]") from None
