"""RS: autoencoder recommender for MovieLens-20M, after NVIDIA DeepRecommender (Kuchaiev &
Ginsburg 2017), the model behind Gavel's recommendation job.

Each item is one user's rating vector over ``n_items`` movies (0 = not rated). The encoder and
decoder are mirrored stacks of SELU layers with dropout on the code; the output layer is
linear. Training minimises the masked MSE over the rated entries (DeepRecommender's MMSE);
the metric is RMSE on held-out ratings predicted from the user's training ratings.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import torch
from torch import Tensor, nn


@dataclass(frozen=True)
class RecommenderConfig:
    n_items: int
    hidden: tuple[int, ...]
    dropout: float


SIZES = {
    "tiny": RecommenderConfig(n_items=128, hidden=(32, 32, 64), dropout=0.0),
    "small": RecommenderConfig(n_items=2000, hidden=(128, 128, 256), dropout=0.8),
    # DeepRecommender's layer sizes 512,512,1024 with dropout 0.8 on the 26,744 rated ML-20M movies.
    "paper": RecommenderConfig(n_items=26744, hidden=(512, 512, 1024), dropout=0.8),
}


class AutoEncoder(nn.Module):
    def __init__(self, cfg: RecommenderConfig) -> None:
        super().__init__()
        dims = (cfg.n_items, *cfg.hidden)
        enc: list[nn.Module] = []
        for a, b in zip(dims[:-1], dims[1:], strict=True):
            enc += [nn.Linear(a, b), nn.SELU()]
        self.encoder = nn.Sequential(*enc)
        self.drop = nn.Dropout(cfg.dropout)
        rev = dims[::-1]
        dec: list[nn.Module] = []
        for i, (a, b) in enumerate(zip(rev[:-1], rev[1:], strict=True)):
            dec.append(nn.Linear(a, b))
            if i < len(rev) - 2:
                dec.append(nn.SELU())
        self.decoder = nn.Sequential(*dec)

    def forward(self, ratings: Tensor) -> Tensor:
        predicted: Tensor = self.decoder(self.drop(self.encoder(ratings)))
        return predicted


def build(cfg: RecommenderConfig) -> nn.Module:
    return AutoEncoder(cfg)


def loss(model: nn.Module, batch: dict[str, Tensor]) -> Tensor:
    """Masked MSE: mean squared error over the rated entries of the input vectors."""
    x = batch["ratings"]
    mask = x != 0
    predicted: Tensor = model(x)
    err = (predicted - x)[mask]
    return (err * err).sum() / mask.sum().clamp(min=1)


@torch.no_grad()
def evaluate(model: nn.Module, batches: Iterable[dict[str, Tensor]]) -> float:
    """RMSE over the held-out ratings (``target`` != 0), predicted from ``ratings``."""
    sq = 0.0
    count = 0
    for b in batches:
        target = b["target"]
        mask = target != 0
        err = (model(b["ratings"]) - target)[mask]
        sq += float((err * err).sum())
        count += int(mask.sum())
    return math.sqrt(sq / max(count, 1))


def optimizer(params: Iterable[Tensor], lr: float) -> torch.optim.Optimizer:
    """SGD with momentum 0.9 (DeepRecommender's ``momentum`` optimizer)."""
    return torch.optim.SGD(params, lr=lr, momentum=0.9)
