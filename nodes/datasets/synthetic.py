"""Synthetic data with each workload's shapes and a learnable structure fixed by the job seed.

The structure (class prototypes, a Markov chain, a token mapping, low-rank rating factors, a
latent weather process) depends only on the seed, so every round, rank and copy of a job learns
the same task; samples are drawn per batch from ``(seed, stream, step, rank)`` (see
``nodes.datasets.base``), so the loss of a model that learns really falls.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from torch.nn import functional as F

from nodes.datasets.base import Batch, StreamDataset, structure_rng
from nodes.datasets.mima import MiMaWindows
from nodes.datasets.multi30k import pad_batch, source_ids, target_ids


class SyntheticImages(StreamDataset):
    """IC: 10 smooth random class prototypes (3x32x32) plus unit Gaussian pixel noise."""

    NOISE = 1.0

    def __init__(self, cfg: Any, **kw: int) -> None:
        super().__init__(**kw)
        low = torch.from_numpy(
            structure_rng(self.seed, 1).standard_normal((cfg.num_classes, 3, 4, 4))
        )
        protos = F.interpolate(
            low.float(), size=cfg.image_shape[1:], mode="bilinear", align_corners=False
        )
        self.protos = protos / protos.std()
        self.num_classes = cfg.num_classes

    def sample(self, n: int, gen: torch.Generator, heldout: bool) -> Batch:
        labels = torch.randint(0, self.num_classes, (n,), generator=gen)
        noise = torch.randn((n, *self.protos.shape[1:]), generator=gen)
        return {"image": self.protos[labels] + self.NOISE * noise, "label": labels}


class SyntheticText(StreamDataset):
    """LM: token windows from a sparse Markov chain (each word has 4 possible successors)."""

    SUCCESSORS = 4

    def __init__(self, cfg: Any, **kw: int) -> None:
        super().__init__(**kw)
        rng = structure_rng(self.seed, 2)
        v = cfg.vocab_size
        self.succ = torch.from_numpy(rng.integers(0, v, (v, self.SUCCESSORS)))
        self.probs = torch.from_numpy(rng.dirichlet(np.ones(self.SUCCESSORS), v)).float()
        self.vocab_size, self.length = v, cfg.bptt + 1

    def sample(self, n: int, gen: torch.Generator, heldout: bool) -> Batch:
        tokens = torch.empty((n, self.length), dtype=torch.long)
        cur = torch.randint(0, self.vocab_size, (n,), generator=gen)
        tokens[:, 0] = cur
        for t in range(1, self.length):
            choice = torch.multinomial(self.probs[cur], 1, generator=gen).squeeze(1)
            cur = self.succ[cur, choice]
            tokens[:, t] = cur
        return {"tokens": tokens}


class SyntheticTranslation(StreamDataset):
    """LT: random source sentences; the target is each word mapped through a fixed dictionary."""

    FIRST_WORD = 4  # ids below are <pad>, <unk>, <bos>, <eos>

    def __init__(self, cfg: Any, **kw: int) -> None:
        super().__init__(**kw)
        rng = structure_rng(self.seed, 3)
        self.mapping = rng.integers(self.FIRST_WORD, cfg.tgt_vocab, cfg.src_vocab).tolist()
        self.src_vocab, self.max_len = cfg.src_vocab, cfg.max_len

    def sample(self, n: int, gen: torch.Generator, heldout: bool) -> Batch:
        longest = self.max_len - 2
        lengths = torch.randint(3, longest + 1, (n,), generator=gen).tolist()
        words = torch.randint(self.FIRST_WORD, self.src_vocab, (n, longest), generator=gen).tolist()
        src = [source_ids(w[:k], self.max_len) for w, k in zip(words, lengths, strict=True)]
        tgt = [
            target_ids([self.mapping[x] for x in w[:k]], self.max_len)
            for w, k in zip(words, lengths, strict=True)
        ]
        return {"src": pad_batch(src), "tgt": pad_batch(tgt)}


class SyntheticRatings(StreamDataset):
    """RS: ratings from a rank-4 user x item model with biases, 15% of items rated per user.

    Held-out samples hide 20% of each user's ratings from the input and score them as target.
    """

    RANK, DENSITY, HIDDEN = 4, 0.15, 0.2

    def __init__(self, cfg: Any, **kw: int) -> None:
        super().__init__(**kw)
        rng = structure_rng(self.seed, 4)
        self.item_f = torch.from_numpy(
            rng.standard_normal((cfg.n_items, self.RANK)) / math.sqrt(self.RANK)
        ).float()
        self.item_b = torch.from_numpy(rng.normal(0.0, 0.5, cfg.n_items)).float()
        self.n_items = cfg.n_items

    def sample(self, n: int, gen: torch.Generator, heldout: bool) -> Batch:
        user_f = torch.randn((n, self.RANK), generator=gen)
        user_b = 0.3 * torch.randn((n, 1), generator=gen)
        score = 3.5 + self.item_b + user_b + user_f @ self.item_f.T
        ratings = (score * 2).round().clamp(1, 10) / 2
        observed = torch.rand((n, self.n_items), generator=gen) < self.DENSITY
        if not heldout:
            return {"ratings": ratings * observed}
        hide = torch.rand((n, self.n_items), generator=gen) < self.HIDDEN
        return {"ratings": ratings * (observed & ~hide), "target": ratings * (observed & hide)}


SERIES_ROWS = {"tiny": 4096, "small": 16384, "paper": 65536}


def synthetic_weather(cfg: Any, seed: int, rows: int) -> tuple[np.ndarray, np.ndarray]:
    """MM: a latent 3-d AR(1) weather state; macro variables are smooth mixes of it (known over
    the forecast horizon), micro variables mix it with per-variable daily cycles and noise."""
    rng = structure_rng(seed, 5)
    k, phi, day = 3, 0.98, 288
    eps = math.sqrt(1 - phi**2) * rng.standard_normal((rows, k))
    z = np.empty_like(eps)
    z[0] = eps[0]
    for i in range(1, rows):
        z[i] = phi * z[i - 1] + eps[i]
    t = np.arange(rows)[:, None]
    phase = rng.uniform(0, 2 * math.pi, cfg.n_micro)[None, :]
    macro = z @ rng.standard_normal((k, cfg.n_macro)) + 0.1 * rng.standard_normal(
        (rows, cfg.n_macro)
    )
    micro = (
        z @ rng.standard_normal((k, cfg.n_micro))
        + 0.7 * np.sin(2 * math.pi * t / day + phase)
        + 0.1 * rng.standard_normal((rows, cfg.n_micro))
    )
    return micro.astype(np.float32), macro.astype(np.float32)


def synthetic_mima(cfg: Any, size: str, **kw: int) -> MiMaWindows:
    micro, macro = synthetic_weather(cfg, kw["seed"], SERIES_ROWS[size])
    return MiMaWindows(micro, macro, cfg, "synthetic", **kw)
