"""The five workload models: registry, paper-size architectures, and real learning at tiny size."""

from __future__ import annotations

import math

import pytest
import torch

from hadar.core.errors import InputError
from nodes.datasets import open_dataset
from nodes.model_names import MODEL_NAMES
from nodes.models import MODELS, SIZES, build_model, canonical_model, get_entry, parameter_count
from nodes.trainer import train_round
from tests.nodes.helpers import LR

# (batch size, steps) per model: enough for a clear fall at tiny size, about a second each.
TRAIN = {"IC": (16, 20), "LM": (32, 80), "LT": (32, 40), "RS": (32, 20), "MM": (32, 20)}


def test_registry_is_case_insensitive_and_rejects_unknown_names() -> None:
    assert canonical_model("ic") == "IC" and canonical_model(" Mm ") == "MM"
    assert set(MODELS) == {"IC", "LM", "LT", "RS", "MM"}
    # specs are checked by these names before torch is imported (nodes/model_names.py)
    assert tuple(MODELS) == MODEL_NAMES
    assert all(set(e.configs) == set(SIZES) for e in MODELS.values())
    with pytest.raises(
        InputError, match=r"^model: unknown model 'resnet50' \(choose IC, LM, LT, RS, MM\)$"
    ):
        canonical_model("resnet50")
    with pytest.raises(InputError, match="^size: unknown size 'huge'"):
        build_model("IC", "huge")


def test_paper_sizes_are_the_real_architectures() -> None:
    """Parameter counts of the paper-size models, built on the meta device (no memory)."""
    counts = {m: parameter_count(build_model(m, "paper", "meta")) for m in MODELS}
    assert counts["IC"] == 11_173_962  # ResNet-18 for CIFAR-10
    lm = build_model("LM", "paper", "meta")
    assert lm.encoder.weight.shape == (33278, 200) and lm.rnn.num_layers == 2  # pytorch/examples
    lt = build_model("LT", "paper", "meta")
    assert len(lt.transformer.encoder.layers) == 6 and len(lt.transformer.decoder.layers) == 6
    assert lt.transformer.d_model == 512
    rs = build_model("RS", "paper", "meta")
    assert [m.out_features for m in rs.encoder if isinstance(m, torch.nn.Linear)] == [
        512,
        512,
        1024,
    ]
    assert rs.decoder[-1].out_features == 26744
    mm = build_model("MM", "paper", "meta")
    assert hasattr(mm, "micro_encoder") and hasattr(mm, "macro_encoder") and hasattr(mm, "decoder")
    for m in MODELS:
        tiny = parameter_count(build_model(m, "tiny", "meta"))
        small = parameter_count(build_model(m, "small", "meta"))
        assert 1_000 <= tiny <= 100_000 and tiny < small < counts[m], (m, tiny, small, counts[m])


@pytest.mark.parametrize("name", list(MODELS))
def test_tiny_model_learns_on_synthetic_data(name: str) -> None:
    """Loss falls (mean of the last 5 steps below 92% of the first 5) and the held-out metric
    moves the right way, for a fixed seed."""
    batch, steps = TRAIN[name]
    entry = get_entry(name)
    torch.manual_seed(0)
    model = build_model(name, "tiny")
    data = open_dataset(name, "tiny", "synthetic", seed=0, batch_size=batch)
    model.eval()
    before = entry.evaluate(model, data.heldout_batches())
    out = train_round(
        entry=entry,
        model=model,
        optimizer=entry.optimizer(model.parameters(), LR[name]),
        data=data,
        device=torch.device("cpu"),
        start_steps=0,
        max_steps=steps,
        deadline=math.inf,
        speed_factor=1.0,
        stop_requested=lambda: False,
    )
    assert out.steps_done == steps and out.stopped_by == "steps"
    first, last = sum(out.losses[:5]) / 5, sum(out.losses[-5:]) / 5
    assert last < 0.92 * first, (name, first, last)
    model.eval()
    after = entry.evaluate(model, data.heldout_batches())
    assert math.isfinite(after)
    if entry.lower_is_better:
        assert after < before, (entry.metric, before, after)
    else:
        assert after > before, (entry.metric, before, after)


def test_every_size_runs_a_forward_and_backward_step() -> None:
    """tiny and small models accept their dataset's batches (paper sizes only checked on meta)."""
    for name in MODELS:
        entry = get_entry(name)
        for size in ("tiny", "small"):
            torch.manual_seed(0)
            model = build_model(name, size)
            batch = open_dataset(name, size, "synthetic", batch_size=2).train_batch(0)
            loss = entry.loss(model, batch)
            loss.backward()
            assert math.isfinite(loss.item()), (name, size)
    assert SIZES == ("tiny", "small", "paper")
