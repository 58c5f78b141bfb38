"""Registry of the paper's five training workloads (IC, LM, LT, RS, MM) at sizes tiny/small/paper.

Each entry bundles the model builder, its size configurations, the training loss, the held-out
metric and the optimizer recipe. Names are case-insensitive; unknown names or sizes raise
one-line ``InputError`` naming the field ``model`` or ``size``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import torch
from torch import Tensor, nn

from nodes.model_names import SIZES as SIZES  # names without torch, re-exported here
from nodes.model_names import canonical_model as canonical_model
from nodes.model_names import check_size as check_size
from nodes.models import lstm_lm, recommender, resnet, translation, weather

Batch = dict[str, Tensor]


@dataclass(frozen=True)
class ModelEntry:
    """One workload: ``build(config)``, ``loss(model, batch)``, ``evaluate(model, batches)``."""

    short: str
    description: str
    metric: str
    configs: Mapping[str, Any]
    build: Callable[[Any], nn.Module]
    loss: Callable[[nn.Module, Batch], Tensor]
    evaluate: Callable[[nn.Module, Iterable[Batch]], float]
    optimizer: Callable[[Iterable[Tensor], float], torch.optim.Optimizer]
    grad_clip: float | None
    lower_is_better: bool


def _entry(short: str, description: str, metric: str, module: ModuleType) -> ModelEntry:
    return ModelEntry(
        short=short,
        description=description,
        metric=metric,
        configs=module.SIZES,
        build=module.build,
        loss=module.loss,
        evaluate=module.evaluate,
        optimizer=module.optimizer,
        grad_clip=getattr(module, "GRAD_CLIP", None),
        lower_is_better=metric in ("perplexity", "mse", "rmse"),
    )


MODELS: dict[str, ModelEntry] = {
    e.short: e
    for e in [
        _entry("IC", "ResNet-18 image classification (CIFAR-10)", "accuracy", resnet),
        _entry("LM", "LSTM word language model (Wikitext-2)", "perplexity", lstm_lm),
        _entry("LT", "Transformer translation (Multi30k de->en)", "token_accuracy", translation),
        _entry("RS", "Autoencoder recommender (MovieLens-20M)", "rmse", recommender),
        _entry("MM", "MiMa encoder-decoder Transformer weather regression", "mse", weather),
    ]
}


def get_entry(name: str) -> ModelEntry:
    return MODELS[canonical_model(name)]


def model_config(name: str, size: str) -> Any:
    """The size configuration (a frozen dataclass) of workload ``name``."""
    return get_entry(name).configs[check_size(size)]


def build_model(name: str, size: str, device: str | torch.device | None = None) -> nn.Module:
    """A freshly initialised model (parameters drawn from torch's global RNG).

    ``device="meta"`` builds shapes only, without allocating or initialising memory.
    """
    entry = get_entry(name)
    cfg = model_config(name, size)
    if device is None:
        return entry.build(cfg)
    with torch.device(device):
        return entry.build(cfg)


def parameter_count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
