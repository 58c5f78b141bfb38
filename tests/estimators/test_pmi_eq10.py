"""Eq. 10 (PmiEstimator): hand-computed figures, monotonicity, profiles and knob validation."""

from __future__ import annotations

import math
from itertools import combinations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from estimators.pmi import PmiEstimator, PmiParams
from estimators.throughput import GavelThroughputTable, TableKey
from hadar.core.cluster import Cluster, Node
from hadar.core.errors import InputError
from hadar.core.gpu_catalogue import catalogue
from hadar.core.job_profile import (
    DATASET_CLASSES,
    WEIGHT_CLASSES,
    JobProfile,
    job_profile,
    parse_job_type,
)
from hadar.core.jobs import Job

# Datasheet figures written out by hand (they must agree with hadar/core/data/gpus.yaml).
PMI_V100 = 15.7 * math.sqrt(16)  # 62.8
PMI_P100 = 9.3 * math.sqrt(16)  # 37.2
PMI_K80 = 4.37 * math.sqrt(12)  # 15.138...
PMI_T4 = 8.1 * math.sqrt(16)  # 32.4

R18 = "ResNet-18 (batch size 64)"


def table(entries: dict[tuple[str, str, int, bool], float]) -> GavelThroughputTable:
    return GavelThroughputTable({TableKey(*k): v for k, v in entries.items()}, source="test")


def job(job_type: str, w: int = 1, **kw) -> Job:
    return Job(job_id=1, job_type=job_type, num_gpus=w, total_steps=100.0, **kw)


# -- hand-computed figures -------------------------------------------------------------------
def test_pmi_values_are_fp32_tflops_times_sqrt_vram() -> None:
    est = PmiEstimator()
    assert est.pmi("v100") == pytest.approx(62.8)
    assert est.pmi("k80") == pytest.approx(15.1381, rel=1e-4)
    assert est.pmi("p100") == pytest.approx(37.2)


def test_tensor_weight_uses_tensor_tflops_where_present() -> None:
    est = PmiEstimator(params=PmiParams(tensor_weight=1.0))
    assert est.pmi("v100") == pytest.approx(125 * 4)
    assert est.pmi("p100") == pytest.approx(PMI_P100)  # no tensor cores: FP32
    half = PmiEstimator(params=PmiParams(tensor_weight=0.5))
    assert half.pmi("v100") == pytest.approx(math.sqrt(15.7 * 125) * 4)


def test_single_gpu_estimate_scales_the_reference_by_the_pmi_ratio() -> None:
    est = PmiEstimator(table({(R18, "v100", 1, True): 24.0}))
    e = est.estimate(R18, "k80")
    # 24 x 15.138 / 62.8 = 5.785
    assert e.value == pytest.approx(24.0 * PMI_K80 / PMI_V100)
    assert e.value == pytest.approx(5.785, abs=1e-3)
    assert e.anchor.kind == "own" and e.anchor.gpu_type == "v100"
    assert est.estimate(R18, "v100").value == pytest.approx(24.0)


def test_pmi_exponent_is_applied_to_the_ratio() -> None:
    est = PmiEstimator(table({(R18, "v100", 1, True): 24.0}), PmiParams(pmi_exponent=0.5))
    assert est.estimate(R18, "p100").value == pytest.approx(24.0 * math.sqrt(PMI_P100 / PMI_V100))


def test_pcie_factor_uses_the_older_of_node_and_gpu() -> None:
    est = PmiEstimator(table({(R18, "v100", 1, True): 24.0}))
    on3 = est.estimate(R18, "rtx3090", pcie_gen=3).value
    on4 = est.estimate(R18, "rtx3090", pcie_gen=4).value
    assert on4 / on3 == pytest.approx(1.03)
    # A T4 is a PCIe-3 card: a PCIe-4 motherboard does not speed it up.
    assert est.estimate(R18, "t4", pcie_gen=4).value == pytest.approx(
        est.estimate(R18, "t4", pcie_gen=3).value
    )
    assert est.estimate(R18, "t4", pcie_gen=3).value == pytest.approx(24.0 * PMI_T4 / PMI_V100)
    # Gen 2 board, default factor 0.93.
    assert est.estimate(R18, "t4", pcie_gen=2).value == pytest.approx(
        24.0 * PMI_T4 / PMI_V100 * 0.93
    )


def test_generic_prior_is_the_papers_expression() -> None:
    """No table: X = prior x batch(B) / (weight x size) samples/s, / B steps/s."""
    est = PmiEstimator(None)
    j = job("MyModel", model="high", size_class="L", spec={"batch_size": 128})
    samples = 1900.0 * (128 / 32) ** 0.3 / (3.0 * 1.5)  # 639.96
    assert est.estimate(j, "v100").value == pytest.approx(samples / 128)
    assert est.estimate(j, "v100").value == pytest.approx(5.0, abs=1e-3)
    assert est.estimate(j, "k80").value == pytest.approx(samples / 128 * PMI_K80 / PMI_V100)
    assert est.estimate(j, "v100").anchor.kind == "prior"


def test_gang_of_w_gpus_scales_a_one_gpu_anchor() -> None:
    est = PmiEstimator(table({(R18, "v100", 1, True): 24.0}))
    assert est.estimate(R18, "v100", num_gpus=4).value == pytest.approx(24.0 * 4 * 0.85**2)
    assert est.estimate(R18, "k80", num_gpus=2).value == pytest.approx(
        24.0 * PMI_K80 / PMI_V100 * 2 * 0.85
    )


def test_gang_anchor_exact_prefers_the_w_gpu_figure() -> None:
    t = table({(R18, "v100", 1, True): 24.0, (R18, "v100", 4, True): 90.0})
    single = PmiEstimator(t).estimate(R18, "k80", num_gpus=4).value
    exact = PmiEstimator(t, PmiParams(gang_anchor="exact")).estimate(R18, "k80", num_gpus=4).value
    assert single == pytest.approx(24.0 * 4 * 0.85**2 * PMI_K80 / PMI_V100)
    assert exact == pytest.approx(90.0 * PMI_K80 / PMI_V100)


def test_family_anchor_applies_batch_weight_and_dataset_ratios() -> None:
    """MM (small, M, batch 32) is anchored on the Transformer family (high, L)."""
    t = table({("Transformer (batch size 32)", "v100", 1, True): 10.0})
    e = PmiEstimator(t).estimate("MM", "v100")
    assert e.anchor.kind == "family" and e.anchor.job_type == "Transformer (batch size 32)"
    assert e.value == pytest.approx(10.0 * (3.0 * 1.5) / (1.0 * 1.25))  # 36.0
    # A family member at another batch size: batch factor on samples/s, then / B.
    t2 = table({("ResNet-18 (batch size 32)", "v100", 1, True): 30.0})
    e2 = PmiEstimator(t2).estimate("ResNet-18 (batch size 128)", "v100")
    assert e2.value == pytest.approx(30.0 * 32 * (128 / 32) ** 0.3 / 128)


def test_family_member_nearest_in_batch_size_is_the_anchor() -> None:
    t = table(
        {
            ("LM (batch size 5)", "v100", 1, True): 100.0,
            ("LM (batch size 40)", "v100", 1, True): 40.0,
        }
    )
    assert (
        PmiEstimator(t).estimate("LM (batch size 30)", "v100").anchor.job_type
        == "LM (batch size 40)"
    )
    assert (
        PmiEstimator(t).estimate("LM (batch size 6)", "v100").anchor.job_type == "LM (batch size 5)"
    )


def test_multi_node_rate_is_bounded_by_the_network() -> None:
    t = table(
        {
            (R18, "v100", 1, True): 60.0,
            (R18, "v100", 2, True): 100.0,
            (R18, "v100", 2, False): 40.0,
        }
    )
    est = PmiEstimator(t)
    k80 = est.estimate(R18, "k80", num_gpus=2, consolidated=False)
    p100 = est.estimate(R18, "p100", num_gpus=2, consolidated=False)
    k80_cons = 60.0 * PMI_K80 / PMI_V100 * 2 * 0.85  # 24.6: compute-bound, under the bound
    p100_cons = 60.0 * PMI_P100 / PMI_V100 * 2 * 0.85  # 60.4: capped at the network rate 40
    assert k80.value == pytest.approx(k80_cons)
    assert p100.value == pytest.approx(40.0)
    assert p100.network is not None and p100.network.gpu_type == "v100"
    # Without an unconsolidated anchor: the penalty knob.
    no_net = PmiEstimator(table({(R18, "v100", 1, True): 60.0}))
    assert no_net.estimate(R18, "p100", num_gpus=2, consolidated=False).value == pytest.approx(
        p100_cons * 0.75
    )
    off = PmiEstimator(t, PmiParams(network_bound=False))
    assert off.estimate(R18, "p100", num_gpus=2, consolidated=False).value == pytest.approx(
        p100_cons * 0.75
    )


def test_one_gpu_multi_node_equals_consolidated() -> None:
    est = PmiEstimator.bundled()
    assert est.estimate(R18, "t4", consolidated=False).value == est.estimate(R18, "t4").value


def test_zero_measurements_are_not_anchors() -> None:
    t = table({(R18, "v100", 1, True): 0.0, (R18, "p100", 1, True): 20.0})
    e = PmiEstimator(t).estimate(R18, "k80")
    assert e.anchor.gpu_type == "p100"
    assert e.value == pytest.approx(20.0 * PMI_K80 / PMI_P100)


def test_target_gpu_measured_at_another_gang_size_is_preferred() -> None:
    t = table({(R18, "v100", 1, True): 24.0, (R18, "k80", 1, True): 7.0})
    e = PmiEstimator(t).estimate(R18, "k80", num_gpus=2)
    assert e.anchor.gpu_type == "k80"
    assert e.value == pytest.approx(7.0 * 2 * 0.85)


# -- cell_rates ------------------------------------------------------------------------------
def test_cell_rates_differ_per_node_pcie_generation() -> None:
    cluster = Cluster(
        "c",
        (
            Node("old", {"rtx3090": 1}, pcie_gen=3),
            Node("new", {"rtx3090": 1}, pcie_gen=4),
            Node("t4", {"t4": 1}, pcie_gen=4),
        ),
    )
    est = PmiEstimator.bundled()
    cons, unc = est.cell_rates(job(R18), cluster)
    k = cluster.type_index["rtx3090"]
    assert cons.shape == (3, 2)
    assert cons[1, k] / cons[0, k] == pytest.approx(1.03)
    assert np.array_equal(cons, unc)  # W = 1
    assert not cons.flags.writeable
    kt4 = cluster.type_index["t4"]
    assert cons[2, kt4] == pytest.approx(est.estimate(R18, "t4", pcie_gen=4).value)
    assert "estimated" in est.describe(job(R18), cluster)


# -- monotonicity ----------------------------------------------------------------------------
GPUS = sorted(catalogue())


def test_more_pmi_is_never_slower() -> None:
    est = PmiEstimator(table({(R18, "v100", 1, True): 24.0}))
    for a, b in combinations(GPUS, 2):
        lo, hi = sorted((a, b), key=est.pmi)
        for w in (1, 4):
            assert (
                est.estimate(R18, lo, num_gpus=w).value
                <= est.estimate(R18, hi, num_gpus=w).value + 1e-12
            )


@settings(max_examples=60, deadline=None)
@given(gpu=st.sampled_from(GPUS), g1=st.integers(1, 6), g2=st.integers(1, 6))
def test_newer_pcie_is_never_slower(gpu: str, g1: int, g2: int) -> None:
    est = PmiEstimator.bundled()
    lo, hi = sorted((g1, g2))
    assert est.estimate(R18, gpu, pcie_gen=lo).value <= est.estimate(R18, gpu, pcie_gen=hi).value


@settings(max_examples=60, deadline=None)
@given(b1=st.integers(1, 8192), b2=st.integers(1, 8192), gpu=st.sampled_from(GPUS))
def test_larger_batch_is_never_slower_in_samples(b1: int, b2: int, gpu: str) -> None:
    """batch() raises per-sample throughput; steps/s x B must not fall as B grows."""
    est = PmiEstimator(None)
    lo, hi = sorted((b1, b2))
    rate = {b: est.estimate(job("Custom", spec={"batch_size": b}), gpu).value * b for b in (lo, hi)}
    assert rate[lo] <= rate[hi] * (1 + 1e-12)


def test_heavier_model_and_larger_dataset_are_never_faster() -> None:
    est = PmiEstimator(None)
    for gpu in ("v100", "t4"):
        for d in DATASET_CLASSES:
            rates = [
                est.estimate(job("Custom", model=w, size_class=d), gpu).value
                for w in WEIGHT_CLASSES
            ]
            assert all(a >= b for a, b in zip(rates, rates[1:], strict=False)), rates
            assert rates[0] > rates[-1]
        for w in WEIGHT_CLASSES:
            rates = [
                est.estimate(job("Custom", model=w, size_class=d), gpu).value
                for d in DATASET_CLASSES
            ]
            assert all(a >= b for a, b in zip(rates, rates[1:], strict=False)), rates
            assert rates[0] > rates[-1]


def test_family_path_is_monotone_in_weight_and_dataset() -> None:
    t = table({("Transformer (batch size 32)", "v100", 1, True): 10.0})
    est = PmiEstimator(t)
    jobs = [job("Custom", model="Transformer", spec={"weight_class": w}) for w in WEIGHT_CLASSES]
    assert all(est.estimate(j, "v100").anchor.kind == "family" for j in jobs)
    rates = [est.estimate(j, "v100").value for j in jobs]
    assert rates == sorted(rates, reverse=True) and rates[0] > rates[-1]
    # The high-weight member itself: the family figure unchanged (L dataset, batch 64 default).
    assert rates[2] == pytest.approx(10.0 * 32 * (64 / 32) ** 0.3 / 64)
    sizes = [
        est.estimate(job("Custom", model="Transformer", size_class=d), "v100").value
        for d in DATASET_CLASSES
    ]
    assert sizes == sorted(sizes, reverse=True) and sizes[0] > sizes[-1]


# -- profiles and knobs ----------------------------------------------------------------------
def test_parse_job_type() -> None:
    assert parse_job_type("ResNet-18 (batch size 64)") == ("ResNet-18", 64)
    assert parse_job_type("A3C") == ("A3C", None)
    assert parse_job_type("Something (batch size 8)") == (None, 8)


def test_job_profile_sources() -> None:
    assert job_profile(R18) == JobProfile("ResNet-18", 64, "modest", "S")
    assert job_profile("MM") == JobProfile("Transformer", 32, "small", "M")
    assert job_profile("LM (batch size 20)") == JobProfile("LM", 20, "high", "L")
    # The job type wins over a Job's fields; the fields fill gaps only.
    assert job_profile(job(R18, spec={"batch_size": 16}, size_class="XL")).batch_size == 64
    assert job_profile(job(R18, spec={"batch_size": 16}, size_class="XL")).dataset_class == "S"
    assert job_profile(
        job("Custom", model="extra-high", size_class="L", spec={"batch_size": 8})
    ) == JobProfile(None, 8, "extra-high", "L")
    assert job_profile(job("Custom", model="resnet50")) == JobProfile(
        "ResNet-50", 64, "extra-high", "XL"
    )
    assert job_profile("Unknown") == JobProfile(None, None, "modest", "M")
    # a Job carries its profile, derived once
    j = job("Custom", model="resnet50")
    assert j.profile == job_profile(j) and j.profile is j.profile


def test_bad_profiles_raise_one_line_input_errors() -> None:
    with pytest.raises(InputError, match="job 1: weight class"):
        job_profile(job("Custom", spec={"weight_class": "huge"}))
    with pytest.raises(InputError, match="job 1: dataset class"):
        job_profile(job("Custom", size_class="XXL"))
    with pytest.raises(InputError, match="batch size"):
        job_profile(job("Custom", spec={"batch_size": 0}))
    with pytest.raises(InputError, match="num_gpus"):
        PmiEstimator.bundled().estimate(R18, "v100", num_gpus=0)


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"reference_gpu": "v200"}, "reference_gpu"),
        ({"tensor_weight": 1.5}, "tensor_weight"),
        ({"pmi_exponent": 0}, "pmi_exponent"),
        ({"scaling_efficiency": 1.2}, "scaling_efficiency"),
        ({"unconsolidated_penalty": 0}, "unconsolidated_penalty"),
        ({"pcie_factors": {3: -1.0}}, "pcie_factors"),
        ({"weight_factors": {"small": 1.0}}, "weight_factors"),
        ({"dataset_factors": {"S": 1, "M": 1, "L": 1, "XL": float("nan")}}, "dataset_factors"),
        ({"prior_samples_per_s": -5}, "prior_samples_per_s"),
        ({"gang_anchor": "sometimes"}, "gang_anchor"),
        ({"batch_exponent": 2}, "batch_exponent"),
        ({"pcie_factors": {3: 1.0, 4: 0.9}}, "pcie_factors: must not decrease"),
        ({"pcie_factors": {"three": 1.0}}, "pcie_factors: generations must be integers"),
        (
            {"weight_factors": {"small": 2, "modest": 1, "high": 3, "extra-high": 4}},
            "weight_factors: must not decrease",
        ),
        ({"reference_pcie_gen": 0}, "reference_pcie_gen"),
    ],
)
def test_bad_knobs_name_the_field(changes: dict, field: str) -> None:
    with pytest.raises(InputError, match=field):
        PmiParams(**changes)


def test_params_are_frozen_and_serialisable() -> None:
    p = PmiParams(reference_gpu="Tesla V100")
    assert p.reference_gpu == "v100"
    with pytest.raises(AttributeError):
        p.pmi_exponent = 2.0  # type: ignore[misc]
    with pytest.raises(TypeError):
        p.pcie_factors[3] = 2.0  # type: ignore[index]
    assert PmiParams(pcie_factors={"3": 1.0, "4": 1.1}).pcie(4) == 1.1  # JSON-style keys
    assert PmiParams(pcie_factors={3: 1.0, 5: 1.2}).pcie(4) == 1.0  # between listed: next lower
    assert PmiParams().pcie(9) == 1.05 and PmiParams().pcie(0) == 0.85
    d = p.as_dict()
    assert d["pcie_factors"] == {"1": 0.85, "2": 0.93, "3": 1.0, "4": 1.03, "5": 1.05}
    assert d["reference_gpu"] == "v100"
