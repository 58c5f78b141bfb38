"""MM: MiMa-style (Micro-Macro) encoder-decoder Transformer regression of weather variables.

Two encoders read a window of ``t_in`` time steps: one the near-surface station observations
("micro", ``n_micro`` variables), one the atmospheric numerical-model outputs ("macro",
``n_macro`` variables, covering the window and the ``t_out`` forecast steps, since numerical
forecasts exist for the horizon). A decoder with ``t_out`` learned queries attends to both
memories and predicts the next ``t_out`` values of every micro variable. Inputs and targets are
z-scored; loss and metric are the MSE in those units.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from nodes.models.common import PositionalEncoding

N_MICRO = 6
N_MACRO = 6


@dataclass(frozen=True)
class WeatherConfig:
    d_model: int
    heads: int
    enc_layers: int
    dec_layers: int
    ff: int
    t_in: int
    t_out: int
    dropout: float
    n_micro: int = N_MICRO
    n_macro: int = N_MACRO


SIZES = {
    "tiny": WeatherConfig(
        d_model=16, heads=2, enc_layers=1, dec_layers=1, ff=32, t_in=12, t_out=4, dropout=0.0
    ),
    "small": WeatherConfig(
        d_model=32, heads=2, enc_layers=2, dec_layers=2, ff=64, t_in=24, t_out=6, dropout=0.1
    ),
    "paper": WeatherConfig(
        d_model=128, heads=8, enc_layers=3, dec_layers=3, ff=512, t_in=48, t_out=12, dropout=0.1
    ),
}


def _encoder(cfg: WeatherConfig) -> nn.TransformerEncoder:
    layer = nn.TransformerEncoderLayer(
        cfg.d_model, cfg.heads, cfg.ff, cfg.dropout, batch_first=True
    )
    return nn.TransformerEncoder(layer, cfg.enc_layers, enable_nested_tensor=False)


class MiMaTransformer(nn.Module):
    def __init__(self, cfg: WeatherConfig) -> None:
        super().__init__()
        self.micro_in = nn.Linear(cfg.n_micro, cfg.d_model)
        self.macro_in = nn.Linear(cfg.n_macro, cfg.d_model)
        self.pos = PositionalEncoding(cfg.d_model, cfg.t_in + cfg.t_out)
        self.micro_encoder = _encoder(cfg)
        self.macro_encoder = _encoder(cfg)
        self.queries = nn.Parameter(torch.randn(cfg.t_out, cfg.d_model) * 0.02)
        dec_layer = nn.TransformerDecoderLayer(
            cfg.d_model, cfg.heads, cfg.ff, cfg.dropout, batch_first=True
        )
        self.decoder = nn.TransformerDecoder(dec_layer, cfg.dec_layers)
        self.head = nn.Linear(cfg.d_model, cfg.n_micro)
        self.t_in = cfg.t_in

    def forward(self, micro: Tensor, macro: Tensor) -> Tensor:
        """``micro`` [B, t_in, n_micro], ``macro`` [B, t_in + t_out, n_macro] -> [B, t_out, n_micro]."""
        mem_micro = self.micro_encoder(self.pos(self.micro_in(micro)))
        mem_macro = self.macro_encoder(self.pos(self.macro_in(macro)))
        memory = torch.cat([mem_micro, mem_macro], dim=1)
        q = self.queries.unsqueeze(0).expand(micro.shape[0], -1, -1)
        q = q + self.pos.pe[self.t_in : self.t_in + q.shape[1]].to(q.dtype)
        forecast: Tensor = self.head(self.decoder(q, memory))
        return forecast


def build(cfg: WeatherConfig) -> nn.Module:
    return MiMaTransformer(cfg)


def loss(model: nn.Module, batch: dict[str, Tensor]) -> Tensor:
    return F.mse_loss(model(batch["micro"], batch["macro"]), batch["target"])


@torch.no_grad()
def evaluate(model: nn.Module, batches: Iterable[dict[str, Tensor]]) -> float:
    """MSE of the z-scored forecasts over all held-out windows, steps and micro variables."""
    sq = 0.0
    count = 0
    for b in batches:
        err = model(b["micro"], b["macro"]) - b["target"]
        sq += float((err * err).sum())
        count += err.numel()
    return sq / max(count, 1)


def optimizer(params: Iterable[Tensor], lr: float) -> torch.optim.Optimizer:
    return torch.optim.Adam(params, lr=lr)


GRAD_CLIP = 1.0
