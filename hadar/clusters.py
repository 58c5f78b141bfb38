"""Load a cluster file for use: the core loader plus the provider's check of each node's
transport keys (``hadar/providers/transport.py``).

The core (:mod:`hadar.core.cluster_config`) may not import ``nodes``, so it accepts only the
transport keys it is given; this module, one layer above ``nodes``, gives it the keys of the
file's provider (of every provider for ``simulated``) and validates their values, so a misspelt
key (``adress``) or a bad port is exit 2 at load time whatever the provider; a node's ``emulate``
defaults to its provider's capability (``ProviderKind.emulates_gpus``), and the providers'
names and sections are theirs (``hadar.providers.transport.provider_schema``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hadar.core import cluster_config
from hadar.core.cluster import Cluster
from hadar.providers.transport import check_transport, provider_schema


def cluster_from_dict(
    data: dict[str, Any], source: str = "<cluster>", base_dir: Path | None = None
) -> Cluster:
    """A parsed cluster mapping, validated with its provider's node schema; errors are one line
    naming ``source`` and the field."""
    cluster = cluster_config.cluster_from_dict(data, source, base_dir, schema=provider_schema())
    check_transport(cluster)
    return cluster


def load_cluster(path: str | Path) -> Cluster:
    """Load a cluster YAML file (bundled names like ``sim-60gpu`` resolve to the package's
    ``cluster_configs/``), validated with its provider's node schema."""
    cluster = cluster_config.load_cluster(path, schema=provider_schema())
    check_transport(cluster)
    return cluster
