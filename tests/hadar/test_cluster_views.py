"""The policy view's canonical cluster (hadar/loop.py, ClusterViews): kept between rounds only
while the cluster and a throughput model that does not learn are the same."""

from __future__ import annotations

import numpy as np

from estimators.throughput import ThroughputModel
from hadar.core.cluster import Cluster, Node
from hadar.core.jobs import Job
from hadar.loop import ClusterViews, measured_type_figures


class _Measured(ThroughputModel):
    """One reference job type; ``fast`` is the GPU type it measured twice as fast."""

    def __init__(self, fast: str, learns: bool) -> None:
        self.fast, self.learns = fast, learns

    def reference_job_types(self) -> list[tuple[str, int]]:
        return [("probe", 1)]

    def cell_rates(self, job: Job, cluster: Cluster) -> tuple[np.ndarray, np.ndarray]:
        rates = np.where(cluster.capacity > 0, 1.0, 0.0)
        rates[:, cluster.gpu_types.index(self.fast)] *= 2.0
        return rates, rates.copy()


CLUSTER = Cluster("two", (Node("a", {"x": 1}), Node("b", {"y": 1})))


def _first_node(views: ClusterViews, cluster: Cluster, model: ThroughputModel) -> str:
    return views.canonical(cluster, model).nodes[0].name


def test_a_model_that_does_not_learn_gives_the_same_view_without_recomputing_it():
    views, model = ClusterViews(), _Measured("y", learns=False)
    first = views.canonical(CLUSTER, model)
    assert first.type_figures == measured_type_figures(model, CLUSTER)
    assert views.canonical(CLUSTER, model) is first


def test_a_model_that_learns_is_asked_again_every_round():
    views, model = ClusterViews(), _Measured("y", learns=True)
    ranked_y = _first_node(views, CLUSTER, model)
    model.fast = "x"  # measurements now rank the other type first
    ranked_x = _first_node(views, CLUSTER, model)
    assert {ranked_y, ranked_x} == {"a", "b"}


def test_another_cluster_or_model_is_ranked_afresh():
    views = ClusterViews()
    slow_x, slow_y = _Measured("y", learns=False), _Measured("x", learns=False)
    assert _first_node(views, CLUSTER, slow_x) != _first_node(views, CLUSTER, slow_y)
    fewer = CLUSTER.subset(["b"])  # a node stream's round: the nodes up now
    assert [n.name for n in views.canonical(fewer, slow_y).nodes] == ["b"]
