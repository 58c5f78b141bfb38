"""Averaging maths of tracker/averaging.py: weights, precision, integer buffers, zero-step copies,
mismatch errors, optimizer state; property-based where it fits."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tracker.averaging import (
    CHUNK,
    average_optimizer_states,
    average_state_dicts,
    copy_weights,
    signature,
    signature_difference,
    weighted_average,
)
from tracker.errors import AveragingError, StateDictMismatchError


def _sd(seed: int, dtype: torch.dtype = torch.float32) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {
        "w": torch.randn(5, 7, generator=g).to(dtype),
        "b": torch.randn(7, generator=g).to(dtype),
        "bn.num_batches_tracked": torch.tensor(10 + seed, dtype=torch.int64),
        "mask": torch.tensor([seed % 2 == 0, True]),
        "idx": torch.tensor([seed, seed + 1], dtype=torch.int32),
    }


def _reference(tensors: list[torch.Tensor], weights: list[float]) -> torch.Tensor:
    acc = torch.zeros(tensors[0].shape, dtype=torch.float64)
    for t, w in zip(tensors, weights, strict=True):
        acc += t.double() * w
    return acc


def test_copy_weights_step_weighted_and_uniform() -> None:
    assert copy_weights([1, 3, 0], "steps") == [0.25, 0.75, 0.0]
    assert copy_weights([1, 3, 0], "uniform") == [0.5, 0.5, 0.0]
    assert sum(copy_weights([7, 11, 13], "steps")) == pytest.approx(1.0, abs=1e-15)


@pytest.mark.parametrize(
    ("steps", "mode", "message"),
    [([1, -1], "steps", "negative"), ([0, 0], "steps", "no copy"), ([1], "mean", "not one of")],
)
def test_copy_weights_rejects_bad_input(steps: list[int], mode: str, message: str) -> None:
    with pytest.raises(AveragingError, match=message):
        copy_weights(steps, mode)


def test_step_weighted_average_matches_float64_reference() -> None:
    copies = [(_sd(s), steps) for s, steps in ((1, 5), (2, 1), (3, 2))]
    out = average_state_dicts(copies, "steps", base=_sd(0))
    for key in ("w", "b"):
        ref = _reference([sd[key] for sd, _ in copies], [5 / 8, 1 / 8, 2 / 8])
        assert out[key].dtype == torch.float32
        # one rounding of the exact float64 sum: within half a float32 ulp (plus float64 noise)
        assert torch.all((out[key].double() - ref).abs() <= ref.abs() * 2.0**-24 * 1.0001)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_low_precision_is_accumulated_in_float64_and_rounded_once(dtype: torch.dtype) -> None:
    copies = [(_sd(s, dtype), steps) for s, steps in ((1, 3), (2, 3), (3, 1))]
    out = average_state_dicts(copies, "steps")
    ref = _reference([sd["w"] for sd, _ in copies], [3 / 7, 3 / 7, 1 / 7]).to(dtype)
    assert out["w"].dtype == dtype
    assert torch.equal(out["w"], ref)
    naive = sum((sd["w"] * (s / 7) for sd, s in copies), torch.zeros_like(ref))
    assert not torch.equal(naive, ref)  # accumulating in the low precision would differ


def test_uniform_mode_is_the_plain_mean_of_copies_that_stepped() -> None:
    copies = [(_sd(1), 9), (_sd(2), 1), (_sd(3), 0)]
    out = average_state_dicts(copies, "uniform", base=_sd(0))
    ref = _reference([_sd(1)["w"], _sd(2)["w"]], [0.5, 0.5])
    assert torch.allclose(out["w"].double(), ref, rtol=1e-7, atol=0)


def test_batchnorm_counter_adds_each_copys_increment_to_the_base() -> None:
    base = _sd(0)  # num_batches_tracked = 10
    copies = [(_sd(1), 4), (_sd(2), 2), (_sd(5), 0)]  # 11, 12, 15 (the 0-step copy is ignored)
    out = average_state_dicts(copies, "steps", base=base)
    assert out["bn.num_batches_tracked"].dtype == torch.int64
    assert int(out["bn.num_batches_tracked"]) == 10 + 1 + 2
    fresh = average_state_dicts(copies, "uniform")  # no base: a fresh model starts at 0
    assert int(fresh["bn.num_batches_tracked"]) == 11 + 12


def test_other_integer_and_bool_buffers_come_from_the_copy_with_most_steps() -> None:
    out = average_state_dicts([(_sd(1), 2), (_sd(2), 7), (_sd(3), 7)], "steps")
    assert torch.equal(out["idx"], _sd(2)["idx"])  # first of the tied most-steps copies
    assert torch.equal(out["mask"], _sd(2)["mask"])
    assert out["idx"].data_ptr() != _sd(2)["idx"].data_ptr()


def test_non_tensor_entries_come_from_the_copy_with_most_steps() -> None:
    a, b = {"w": torch.ones(2), "extra": "a"}, {"w": torch.zeros(2), "extra": "b"}
    assert average_state_dicts([(a, 1), (b, 3)])["extra"] == "b"


def test_zero_step_copies_contribute_nothing() -> None:
    wild = {k: v * 1000 if v.is_floating_point() else v for k, v in _sd(9).items()}
    with_zero = average_state_dicts([(_sd(1), 3), (wild, 0), (_sd(2), 1)], "steps", base=_sd(0))
    without = average_state_dicts([(_sd(1), 3), (_sd(2), 1)], "steps", base=_sd(0))
    for key in without:
        assert torch.equal(with_zero[key], without[key]), key


def test_all_zero_steps_keep_the_previous_parameters() -> None:
    base = _sd(0)
    out = average_state_dicts([(_sd(1), 0), (_sd(2), 0)], "steps", base=base)
    assert all(torch.equal(out[k], base[k]) for k in base)
    with pytest.raises(AveragingError, match="no previous parameters"):
        average_state_dicts([(_sd(1), 0)], "steps")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda sd: sd.pop("b"), "missing key 'b'"),
        (lambda sd: sd.update(extra=torch.zeros(1)), "unexpected key 'extra'"),
        (lambda sd: sd.update(w=torch.zeros(7, 5)), r"'w' has shape \[7, 5\], expected \[5, 7\]"),
        (lambda sd: sd.update(w=torch.zeros(5, 7, dtype=torch.float64)), "'w' has dtype float64"),
    ],
)
def test_mismatched_copies_raise_a_one_line_error(change, message: str) -> None:
    odd = _sd(2)
    change(odd)
    with pytest.raises(StateDictMismatchError, match=message) as err:
        average_state_dicts([(_sd(1), 1), (odd, 1)])
    assert "\n" not in str(err.value)
    with pytest.raises(StateDictMismatchError, match="previous parameters"):
        average_state_dicts([(odd, 1)], base=_sd(0))


def test_empty_input_and_unknown_mode_are_rejected() -> None:
    with pytest.raises(AveragingError):
        average_state_dicts([])
    with pytest.raises(AveragingError, match="not one of"):
        average_state_dicts([(_sd(1), 1)], "median")


def test_signature_difference_reports_none_for_equal_models() -> None:
    assert signature_difference(signature(_sd(1)), signature(_sd(2))) is None


@pytest.mark.parametrize("numel", [0, 1, CHUNK - 1, CHUNK, 2 * CHUNK + 5])
def test_weighted_average_over_chunk_boundaries(numel: int) -> None:
    g = torch.Generator().manual_seed(numel)
    ts = [torch.randn(numel, generator=g) for _ in range(3)]
    out = weighted_average(ts, [0.2, 0.3, 0.5])
    assert torch.allclose(out.double(), _reference(ts, [0.2, 0.3, 0.5]), rtol=1e-7, atol=1e-12)


def test_weighted_average_of_non_contiguous_and_scalar_tensors() -> None:
    a, b = torch.arange(12.0).reshape(3, 4).t(), torch.ones(4, 3)
    assert torch.allclose(weighted_average([a, b], [0.5, 0.5]), (a + b) / 2)
    assert weighted_average([torch.tensor(2.0), torch.tensor(4.0)], [0.25, 0.75]).item() == 3.5


# -- property-based ---------------------------------------------------------------------------
_shapes = st.lists(st.integers(1, 5), min_size=0, max_size=3).map(tuple)
_steps = st.lists(st.integers(0, 50), min_size=1, max_size=5).filter(lambda s: sum(s) > 0)


@settings(max_examples=60, deadline=None)
@given(
    shape=_shapes,
    steps=_steps,
    seed=st.integers(0, 10_000),
    mode=st.sampled_from(["steps", "uniform"]),
)
def test_result_is_a_convex_combination_of_the_active_copies(shape, steps, seed, mode) -> None:
    g = torch.Generator().manual_seed(seed)
    sds = [{"p": torch.randn(shape, generator=g) * 10} for _ in steps]
    out = average_state_dicts(list(zip(sds, steps, strict=True)), mode)["p"]
    active = torch.stack([sd["p"] for sd, s in zip(sds, steps, strict=True) if s > 0])
    assert torch.all(out >= active.min(0).values) and torch.all(out <= active.max(0).values)
    w = copy_weights(steps, mode)
    ref = _reference([sd["p"] for sd in sds], w)
    assert torch.allclose(out.double(), ref, rtol=1e-6, atol=1e-6)


@settings(max_examples=40, deadline=None)
@given(shape=_shapes, steps=_steps, seed=st.integers(0, 10_000))
def test_identical_copies_average_to_themselves_exactly(shape, steps, seed) -> None:
    p = torch.randn(shape, generator=torch.Generator().manual_seed(seed))
    for mode in ("steps", "uniform"):
        out = average_state_dicts([({"p": p.clone()}, s) for s in steps], mode)["p"]
        assert torch.equal(out, p)


@settings(max_examples=40, deadline=None)
@given(
    steps=_steps, k=st.integers(2, 9), seed=st.integers(0, 10_000), perm_seed=st.integers(0, 100)
)
def test_steps_mode_depends_only_on_step_ratios_and_not_on_order(steps, k, seed, perm_seed) -> None:
    g = torch.Generator().manual_seed(seed)
    sds = [{"p": torch.randn(6, generator=g)} for _ in steps]
    out = average_state_dicts(list(zip(sds, steps, strict=True)))["p"]
    scaled = average_state_dicts([(sd, s * k) for sd, s in zip(sds, steps, strict=True)])["p"]
    order = torch.randperm(len(steps), generator=torch.Generator().manual_seed(perm_seed)).tolist()
    permuted = average_state_dicts([(sds[i], steps[i]) for i in order])["p"]
    assert torch.allclose(out, scaled, rtol=1e-6, atol=1e-7)
    assert torch.allclose(out, permuted, rtol=1e-6, atol=1e-7)


# -- optimizer state -------------------------------------------------------------------------
def _optimizer_state(kind: str, seed: int, lr: float) -> dict:
    torch.manual_seed(seed)
    net = torch.nn.Linear(3, 2)
    opt = (
        torch.optim.SGD(net.parameters(), lr=lr, momentum=0.9)
        if kind == "sgd"
        else torch.optim.Adam(net.parameters(), lr=lr)
    )
    for _ in range(seed + 1):
        opt.zero_grad()
        net(torch.randn(4, 3)).pow(2).sum().backward()
        opt.step()
    return opt.state_dict()


def test_optimizer_momentum_is_step_weighted_and_hyperparameters_come_from_lead() -> None:
    a, b = _optimizer_state("sgd", 1, lr=0.1), _optimizer_state("sgd", 2, lr=0.2)
    out = average_optimizer_states([(a, 1), (b, 3)], "steps")
    for idx in a["state"]:
        ref = _reference(
            [a["state"][idx]["momentum_buffer"], b["state"][idx]["momentum_buffer"]], [0.25, 0.75]
        )
        assert torch.allclose(
            out["state"][idx]["momentum_buffer"].double(), ref, rtol=1e-6, atol=1e-9
        )
    assert out["param_groups"][0]["lr"] == 0.2


def test_adam_moments_and_float_step_are_averaged() -> None:
    a, b = _optimizer_state("adam", 1, lr=0.1), _optimizer_state("adam", 3, lr=0.1)
    out = average_optimizer_states([(a, 1), (b, 1)], "uniform")
    assert float(out["state"][0]["step"]) == pytest.approx((2 + 4) / 2)
    ref = _reference([a["state"][0]["exp_avg"], b["state"][0]["exp_avg"]], [0.5, 0.5])
    assert torch.allclose(out["state"][0]["exp_avg"].double(), ref, rtol=1e-6)


def test_optimizer_structure_mismatch_or_missing_state_falls_back_to_lead_copy() -> None:
    sgd, adam = _optimizer_state("sgd", 1, lr=0.1), _optimizer_state("adam", 1, lr=0.3)
    assert average_optimizer_states([(sgd, 1), (adam, 2)])["param_groups"][0]["lr"] == 0.3
    assert average_optimizer_states([(sgd, 5), (None, 2)]) == dict(sgd)
    assert average_optimizer_states([(sgd, 1), (None, 2)]) is None
    # a zero-step copy's odd optimizer state is ignored
    out = average_optimizer_states([(sgd, 1), (adam, 0)])
    assert torch.equal(out["state"][0]["momentum_buffer"], sgd["state"][0]["momentum_buffer"])
