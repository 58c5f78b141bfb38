"""LT: Transformer encoder-decoder translation for Multi30k (German -> English), the
"Attention is all you need" base model (d_model 512, 6 + 6 layers, 8 heads, FFN 2048) at paper size.

Token ids: 0 ``<pad>``, 1 ``<unk>``, 2 ``<bos>``, 3 ``<eos>``; source = tokens + ``<eos>``,
target = ``<bos>`` + tokens + ``<eos>``, both padded with 0. Training is teacher-forced
cross-entropy over non-pad target tokens; the metric is teacher-forced token accuracy.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from nodes.models.common import PositionalEncoding

PAD, UNK, BOS, EOS = 0, 1, 2, 3
SPECIALS = ("<pad>", "<unk>", "<bos>", "<eos>")


@dataclass(frozen=True)
class TranslationConfig:
    src_vocab: int
    tgt_vocab: int
    d_model: int
    heads: int
    enc_layers: int
    dec_layers: int
    ff: int
    max_len: int
    dropout: float


SIZES = {
    "tiny": TranslationConfig(
        src_vocab=128,
        tgt_vocab=128,
        d_model=32,
        heads=2,
        enc_layers=1,
        dec_layers=1,
        ff=64,
        max_len=16,
        dropout=0.0,
    ),
    "small": TranslationConfig(
        src_vocab=1000,
        tgt_vocab=1000,
        d_model=64,
        heads=4,
        enc_layers=2,
        dec_layers=2,
        ff=128,
        max_len=16,
        dropout=0.1,
    ),
    "paper": TranslationConfig(
        src_vocab=8000,
        tgt_vocab=8000,
        d_model=512,
        heads=8,
        enc_layers=6,
        dec_layers=6,
        ff=2048,
        max_len=64,
        dropout=0.1,
    ),
}


class TranslationTransformer(nn.Module):
    def __init__(self, cfg: TranslationConfig) -> None:
        super().__init__()
        self.scale = math.sqrt(cfg.d_model)
        self.src_embed = nn.Embedding(cfg.src_vocab, cfg.d_model, padding_idx=PAD)
        self.tgt_embed = nn.Embedding(cfg.tgt_vocab, cfg.d_model, padding_idx=PAD)
        self.pos = PositionalEncoding(cfg.d_model, cfg.max_len)
        self.drop = nn.Dropout(cfg.dropout)
        enc_layer = nn.TransformerEncoderLayer(
            cfg.d_model, cfg.heads, cfg.ff, cfg.dropout, batch_first=True
        )
        encoder = nn.TransformerEncoder(
            enc_layer, cfg.enc_layers, nn.LayerNorm(cfg.d_model), enable_nested_tensor=False
        )
        self.transformer = nn.Transformer(
            d_model=cfg.d_model,
            nhead=cfg.heads,
            num_decoder_layers=cfg.dec_layers,
            dim_feedforward=cfg.ff,
            dropout=cfg.dropout,
            batch_first=True,
            custom_encoder=encoder,
        )
        self.generator = nn.Linear(cfg.d_model, cfg.tgt_vocab)

    def forward(self, src: Tensor, tgt_in: Tensor) -> Tensor:
        """``src`` [B, S], ``tgt_in`` [B, T] -> logits [B, T, tgt_vocab]."""
        t = tgt_in.shape[1]
        causal = torch.ones((t, t), dtype=torch.bool, device=src.device).triu(diagonal=1)
        src_pad = src == PAD
        out = self.transformer(
            self.drop(self.pos(self.src_embed(src) * self.scale)),
            self.drop(self.pos(self.tgt_embed(tgt_in) * self.scale)),
            tgt_mask=causal,
            src_key_padding_mask=src_pad,
            tgt_key_padding_mask=tgt_in == PAD,
            memory_key_padding_mask=src_pad,
        )
        logits: Tensor = self.generator(out)
        return logits


def build(cfg: TranslationConfig) -> nn.Module:
    return TranslationTransformer(cfg)


def _logits_and_labels(model: nn.Module, batch: dict[str, Tensor]) -> tuple[Tensor, Tensor]:
    tgt = batch["tgt"]
    logits = model(batch["src"], tgt[:, :-1])
    return logits.reshape(-1, logits.shape[-1]), tgt[:, 1:].reshape(-1)


def loss(model: nn.Module, batch: dict[str, Tensor]) -> Tensor:
    logits, labels = _logits_and_labels(model, batch)
    return F.cross_entropy(logits, labels, ignore_index=PAD)


@torch.no_grad()
def evaluate(model: nn.Module, batches: Iterable[dict[str, Tensor]]) -> float:
    """Teacher-forced token accuracy over non-pad target tokens, in [0, 1]."""
    correct = total = 0
    for b in batches:
        logits, labels = _logits_and_labels(model, b)
        keep = labels != PAD
        correct += int((logits.argmax(-1)[keep] == labels[keep]).sum())
        total += int(keep.sum())
    return correct / max(total, 1)


def optimizer(params: Iterable[Tensor], lr: float) -> torch.optim.Optimizer:
    """Adam with the Transformer paper's betas (0.9, 0.98) and eps 1e-9 (constant lr, no warm-up)."""
    return torch.optim.Adam(params, lr=lr, betas=(0.9, 0.98), eps=1e-9)


GRAD_CLIP = 1.0
