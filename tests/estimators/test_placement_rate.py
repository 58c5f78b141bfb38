"""``ThroughputModel.rate``: a placement's bottleneck rate, read from the placement's cells.

The reference is the definition on the dense ``[node, type]`` matrix: the minimum of the
consolidated rates over the used cells when the placement is on one node, else of the
unconsolidated (or, on a cluster with a ``network:``, the bandwidth-scaled multi-node) rates."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hadar.clusters import load_cluster
from hadar.core.jobs import Job
from tests.hadar.helpers import TABLE


def dense_rate(model, job: Job, placement, cluster) -> float:
    y = cluster.placement_matrix(placement)
    used = y > 0
    if not used.any():
        return 0.0
    cons, unc = model.cell_rates(job, cluster)
    on_nodes = used.any(axis=1)
    if int(on_nodes.sum()) == 1:
        return float(cons[used].min())
    if cluster.network is None:
        return float(unc[used].min())
    names = [cluster.node_names[h] for h in np.flatnonzero(on_nodes)]
    gbps = cluster.network.bottleneck_gbps(names)
    return float(model.multi_node_rates(job, cluster, gbps)[used].min())


@pytest.mark.parametrize("cluster_name", ["sim-60gpu", "sim-60gpu-2rack"])
@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_rate_from_cells_equals_the_dense_definition(cluster_name, data):
    cluster = load_cluster(cluster_name)
    job_type, w = data.draw(st.sampled_from(sorted(TABLE.reference_job_types())))
    job = Job(0, job_type, w, 1000, 0.0)
    cells = [(h, k) for h in range(len(cluster.nodes)) for k in range(len(cluster.gpu_types))]
    cells = [c for c in cells if cluster.capacity[c] > 0]
    chosen = data.draw(st.lists(st.sampled_from(cells), max_size=4, unique=True))
    placement: dict[str, dict[str, int]] = {}
    for h, k in chosen:
        count = data.draw(st.integers(0, int(cluster.capacity[h, k])))  # 0: a listed, unused cell
        placement.setdefault(cluster.node_names[h], {})[cluster.gpu_types[k]] = count
    assert TABLE.rate(job, placement, cluster) == dense_rate(TABLE, job, placement, cluster)


def test_a_placement_on_an_unknown_node_is_an_error():
    cluster = load_cluster("sim-60gpu")
    job = Job(0, TABLE.reference_job_types()[0][0], 1, 1000, 0.0)
    with pytest.raises(KeyError):
        TABLE.rate(job, {"no-such-node": {"v100": 1}}, cluster)
