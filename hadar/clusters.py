"""Load a cluster file for use: the core loader plus the providers' checks of each node's
transport keys and of their settings sections (``hadar/providers/transport.py``).

The core (:mod:`hadar.core.cluster_config`) may not import ``nodes``, so it accepts only the
transport keys it is given; this module, one layer above ``nodes``, gives it the keys of the
file's provider (of every provider for ``simulated``) and validates their values, so a misspelt
key (``adress``), a bad port or a bad ``ssh:``/``aws:`` value is exit 2 at load time whatever
the provider and whatever command loads the file; a node's ``emulate``
defaults to its provider's capability (``ProviderKind.emulates_gpus``), and the providers'
names and sections are theirs (``hadar.providers.transport.provider_schema``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hadar.core import cluster_config
from hadar.core.cluster import Cluster
from hadar.providers.transport import check_cluster, provider_schema


def cluster_from_dict(
    data: dict[str, Any], source: str = "<cluster>", base_dir: Path | None = None
) -> Cluster:
    """A parsed cluster mapping, validated with its provider's node and settings schemas; errors
    are one line naming ``source`` and the field."""
    cluster = cluster_config.cluster_from_dict(data, source, base_dir, schema=provider_schema())
    check_cluster(cluster)
    return cluster


def load_cluster(path: str | Path) -> Cluster:
    """Load a cluster YAML file (bundled names like ``sim-60gpu`` resolve to the package's
    ``cluster_configs/``), validated with its provider's node and settings schemas."""
    cluster = cluster_config.load_cluster(path, schema=provider_schema())
    check_cluster(cluster)
    return cluster
