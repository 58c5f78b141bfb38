"""Wikitext-2 word-level files ``wiki.train.tokens`` and ``wiki.valid.tokens`` (the held-out
split), tokenised as in pytorch/examples: whitespace-split words plus ``<eos>`` per line.

The vocabulary is the model size's ``vocab_size`` most frequent training words (``<unk>``
first); other words map to ``<unk>``. Items are windows of ``bptt + 1`` tokens starting at
multiples of ``bptt``.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import torch

from hadar.core.errors import InputError
from nodes.datasets.base import Batch, IndexedDataset
from nodes.datasets.text import Vocab, read_lines

TRAIN_FILE = "wiki.train.tokens"
VALID_FILE = "wiki.valid.tokens"


def _words(lines: list[str]) -> list[str]:
    out: list[str] = []
    for line in lines:
        out.extend(line.split())
        out.append("<eos>")
    return out


class Wikitext2(IndexedDataset):
    def __init__(self, path: Path, cfg: Any, **kw: int) -> None:
        super().__init__(**kw)
        train_words = _words(read_lines(path / TRAIN_FILE))
        valid_words = _words(read_lines(path / VALID_FILE))
        self.vocab = Vocab(Counter(train_words), cfg.vocab_size, ("<unk>", "<eos>"), "<unk>")
        self.bptt = cfg.bptt
        self.train_ids = np.asarray(self.vocab.encode(train_words), dtype=np.int64)
        self.valid_ids = np.asarray(self.vocab.encode(valid_words), dtype=np.int64)
        self.n_train = (len(self.train_ids) - 1) // self.bptt
        self.n_heldout = (len(self.valid_ids) - 1) // self.bptt
        if self.n_train == 0 or self.n_heldout == 0:
            raise InputError(
                f"data: {path}: need more than {self.bptt} tokens in {TRAIN_FILE} and {VALID_FILE}"
            )

    def make_batch(self, indices: np.ndarray, train: bool, gen: torch.Generator | None) -> Batch:
        ids = self.train_ids if train else self.valid_ids
        starts = indices * self.bptt
        windows = ids[starts[:, None] + np.arange(self.bptt + 1)[None, :]]
        return {"tokens": torch.from_numpy(windows)}
