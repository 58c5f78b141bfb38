"""Multi-node estimates on a cluster that declares its network (docs/estimators.md, "The network")."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from estimators.composite import CompositeThroughput
from estimators.online import OnlineThroughput
from estimators.pmi import REFERENCE_NETWORK_GBPS, PmiEstimator
from hadar import api
from hadar.clusters import cluster_from_dict
from hadar.core.cluster import Cluster
from hadar.core.errors import InputError
from hadar.core.jobs import Job

R50 = "ResNet-50 (batch size 64)"
LM = "LM (batch size 20)"


def two_racks(gpu: str, nic: float = 25, uplink: float = 2) -> Cluster:
    """Two racks of two 4-GPU nodes each; racks joined through a core switch."""
    data: dict[str, Any] = {
        "name": "two-racks",
        "nodes": [
            {"name": "a", "count": 2, "gpus": {gpu: 4}},
            {"name": "b", "count": 2, "gpus": {gpu: 4}},
        ],
        "network": {
            "nic_gbps": nic,
            "racks": [
                {"name": "r1", "nodes": ["a"], "uplink_gbps": uplink},
                {"name": "r2", "nodes": ["b"], "uplink_gbps": uplink},
            ],
        },
    }
    return cluster_from_dict(data, source="two-racks.yaml")


IN_RACK = {"a-0": {"t4": 4}, "a-1": {"t4": 4}}
ACROSS = {"a-0": {"t4": 4}, "b-0": {"t4": 4}}


def gang(job_type: str = R50, w: int = 8) -> Job:
    return Job(job_id=1, job_type=job_type, num_gpus=w, total_steps=1e6)


@pytest.fixture(scope="module")
def model() -> CompositeThroughput:
    return CompositeThroughput()


@pytest.mark.parametrize("job_type", [LM, R50])
def test_a_cross_rack_gang_is_estimated_slower_than_an_in_rack_one(
    model: CompositeThroughput, job_type: str
) -> None:
    c = two_racks("t4")  # T4: not in Gavel's table, so every figure is an estimate
    j = gang(job_type)
    in_rack, across = model.rate(j, IN_RACK, c), model.rate(j, ACROSS, c)
    assert 0 < across < in_rack
    est = model.estimator.estimate(j, "t4", consolidated=False)
    compute = model.estimator.estimate(j, "t4").value
    assert est.network is not None and est.network.job_type == job_type  # no weight scaling
    measured_u, measured_c = est.network.value, model.table.measured(job_type, "v100", 8)
    if job_type == LM:  # its V100 x8 figure was network-bound: the network rate is that
        assert measured_u < measured_c
        network_rate = measured_u
    else:  # ResNet-50 at batch 64 was not: its network rate was at least the larger
        assert measured_u > measured_c
        network_rate = max(measured_u, compute)
    # 2 Gbit/s across the racks, 25 Gbit/s within one; the reference network is 10 Gbit/s.
    assert across == pytest.approx(min(compute, network_rate * 2 / REFERENCE_NETWORK_GBPS))
    assert in_rack == pytest.approx(min(compute, network_rate * 25 / REFERENCE_NETWORK_GBPS))


def test_the_policy_view_is_the_in_rack_figure(model: CompositeThroughput) -> None:
    """cell_rates' multi-node figures are at each node's NIC: exact within a rack, an upper
    bound across racks."""
    c = two_racks("t4")
    _, unc = model.cell_rates(gang(), c)
    assert np.all(unc == model.rate(gang(), IN_RACK, c))
    assert np.all(unc > model.rate(gang(), ACROSS, c))


def test_at_the_reference_bandwidth_every_estimate_is_unchanged() -> None:
    est = PmiEstimator.bundled()
    assert est.table is not None
    for job_type in sorted(est.table.job_types):
        for w in (2, 4, 8):
            for gpu in ("t4", "k80", "a100", "rtx-3090"):
                j = gang(job_type, w)
                plain = est.estimate(j, gpu, consolidated=False).value
                at_ref = est.estimate(
                    j, gpu, consolidated=False, bandwidth_gbps=REFERENCE_NETWORK_GBPS
                ).value
                assert at_ref == plain, (job_type, w, gpu)


def test_rate_rises_with_bandwidth_up_to_the_compute_rate() -> None:
    est = PmiEstimator.bundled()
    rates = [
        est.estimate(gang(), "t4", consolidated=False, bandwidth_gbps=g).value
        for g in (0.5, 1, 5, 10, 40, 400, 4000)
    ]
    assert rates == sorted(rates) and rates[0] < rates[3]
    assert rates[-1] == est.estimate(gang(), "t4").value  # compute-bound at last
    with pytest.raises(InputError, match="bandwidth_gbps"):
        est.estimate(gang(), "t4", consolidated=False, bandwidth_gbps=0.0)


def test_measured_multi_node_figures_are_used_as_given(model: CompositeThroughput) -> None:
    c = two_racks("v100", uplink=0.5)
    placed = {"across": {"a-0": {"v100": 4}, "b-0": {"v100": 4}}}
    measured = model.table.measured(R50, "v100", 8, False)
    assert model.rate(gang(), placed["across"], c) == measured
    assert model.rate(gang(), {"a-0": {"v100": 4}, "a-1": {"v100": 4}}, c) == measured


def test_without_a_network_nothing_changes(model: CompositeThroughput) -> None:
    c = two_racks("t4")
    plain = replace(c, network=None)
    fresh = CompositeThroughput()
    assert model.rate(gang(), ACROSS, plain) == fresh.rate(gang(), ACROSS, plain)
    assert fresh.rate(gang(), ACROSS, plain) == fresh.rate(gang(), IN_RACK, plain)
    pmi = PmiEstimator.bundled()
    assert fresh.rate(gang(), ACROSS, plain) == pmi.estimate(gang(), "t4", consolidated=False).value


def test_online_estimates_keep_the_network_ratio(model: CompositeThroughput) -> None:
    c = two_racks("t4")
    online = OnlineThroughput(model)
    online.observe(gang(), "a-0", 8, 30.0)
    in_rack, across = online.rate(gang(), IN_RACK, c), online.rate(gang(), ACROSS, c)
    assert across < in_rack
    assert across / in_rack == pytest.approx(
        model.rate(gang(), ACROSS, c) / model.rate(gang(), IN_RACK, c)
    )


def test_two_rack_sim_cluster_simulates_as_the_plain_one() -> None:
    """sim-60gpu's GPUs are all in Gavel's table: the network leaves the measured figures, and
    so every decision, alone (multi-node placements included)."""
    plain = api.simulate("sim-60gpu", "philly-96", "hadar", seed=3)
    racks = api.simulate("sim-60gpu-2rack", "philly-96", "hadar", seed=3)
    spans = plain.placements.groupby(["round", "job", "copy"]).node.nunique()
    assert (spans > 1).sum() > 0
    assert racks.placements.equals(plain.placements)
    assert racks.jobs.equals(plain.jobs)
    keys = ("ttd_s", "avg_jct_s", "gru", "estimated_cells")
    assert {k: racks.summary[k] for k in keys} == {k: plain.summary[k] for k in keys}
