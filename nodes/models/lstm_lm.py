"""LM: LSTM word language model for Wikitext-2, in the style of pytorch/examples
``word_language_model`` (embedding -> dropout -> multi-layer LSTM -> dropout -> linear decoder).

One difference: each training item is an independent window of ``bptt + 1`` tokens (the hidden
state starts at zero per window) so batches can be shuffled and resumed at any step without
carrying LSTM state across rounds.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import torch
from torch import Tensor, nn
from torch.nn import functional as F


@dataclass(frozen=True)
class LSTMConfig:
    vocab_size: int
    emb: int
    hidden: int
    layers: int
    bptt: int
    dropout: float


SIZES = {
    "tiny": LSTMConfig(vocab_size=256, emb=32, hidden=32, layers=1, bptt=16, dropout=0.0),
    "small": LSTMConfig(vocab_size=2000, emb=96, hidden=96, layers=2, bptt=35, dropout=0.2),
    # pytorch/examples defaults (emsize = nhid = 200, 2 layers, bptt 35) on Wikitext-2's 33,278 words.
    "paper": LSTMConfig(vocab_size=33278, emb=200, hidden=200, layers=2, bptt=35, dropout=0.2),
}


class LSTMLanguageModel(nn.Module):
    def __init__(self, cfg: LSTMConfig) -> None:
        super().__init__()
        self.drop = nn.Dropout(cfg.dropout)
        self.encoder = nn.Embedding(cfg.vocab_size, cfg.emb)
        self.rnn = nn.LSTM(
            cfg.emb,
            cfg.hidden,
            cfg.layers,
            batch_first=True,
            dropout=cfg.dropout if cfg.layers > 1 else 0.0,
        )
        self.decoder = nn.Linear(cfg.hidden, cfg.vocab_size)
        nn.init.uniform_(self.encoder.weight, -0.1, 0.1)
        nn.init.uniform_(self.decoder.weight, -0.1, 0.1)
        nn.init.zeros_(self.decoder.bias)

    def forward(self, tokens: Tensor) -> Tensor:
        """``tokens`` [B, T] -> logits [B, T, V]."""
        out, _ = self.rnn(self.drop(self.encoder(tokens)))
        logits: Tensor = self.decoder(self.drop(out))
        return logits


def build(cfg: LSTMConfig) -> nn.Module:
    return LSTMLanguageModel(cfg)


def loss(model: nn.Module, batch: dict[str, Tensor]) -> Tensor:
    tokens = batch["tokens"]
    logits = model(tokens[:, :-1])
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))


@torch.no_grad()
def evaluate(model: nn.Module, batches: Iterable[dict[str, Tensor]]) -> float:
    """Perplexity: exp of the mean next-token negative log-likelihood."""
    nll = 0.0
    count = 0
    for b in batches:
        tokens = b["tokens"]
        logits = model(tokens[:, :-1])
        nll += float(
            F.cross_entropy(
                logits.reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1), reduction="sum"
            )
        )
        count += tokens[:, 1:].numel()
    return math.exp(nll / max(count, 1))


def optimizer(params: Iterable[Tensor], lr: float) -> torch.optim.Optimizer:
    """Plain SGD, as in pytorch/examples (whose default lr is 20, with gradient clipping 0.25)."""
    return torch.optim.SGD(params, lr=lr)


GRAD_CLIP = 0.25
