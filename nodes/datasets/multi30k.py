"""Multi30k (task 1) plain-text parallel files: ``train.de``/``train.en`` and ``val.de``/``val.en``
(the held-out split), one sentence per line, line ``i`` of the German file translating to line
``i`` of the English file. Sentences are lower-cased and split into words and punctuation;
vocabularies hold each size's most frequent training words; sentences longer than the model's
``max_len`` are truncated.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import torch

from hadar.core.errors import InputError
from nodes.datasets.base import Batch, IndexedDataset
from nodes.datasets.text import Vocab, read_lines, simple_tokenize
from nodes.models.translation import BOS, EOS, PAD, SPECIALS


def _pairs(path: Path, split: str) -> tuple[list[list[str]], list[list[str]]]:
    de, en = read_lines(path / f"{split}.de"), read_lines(path / f"{split}.en")
    if len(de) != len(en):
        raise InputError(
            f"data: {path}: {split}.de has {len(de)} lines but {split}.en has {len(en)}"
        )
    src, tgt = [], []
    for a, b in zip(de, en, strict=True):
        ta, tb = simple_tokenize(a), simple_tokenize(b)
        if ta and tb:
            src.append(ta)
            tgt.append(tb)
    if not src:
        raise InputError(f"data: {path}: no sentence pairs in {split}.de/{split}.en")
    return src, tgt


def pad_batch(seqs: list[list[int]]) -> torch.Tensor:
    out = torch.full((len(seqs), max(len(s) for s in seqs)), PAD, dtype=torch.long)
    for i, s in enumerate(seqs):
        out[i, : len(s)] = torch.tensor(s, dtype=torch.long)
    return out


def source_ids(ids: list[int], max_len: int) -> list[int]:
    return ids[: max_len - 1] + [EOS]


def target_ids(ids: list[int], max_len: int) -> list[int]:
    return [BOS] + ids[: max_len - 2] + [EOS]


class Multi30k(IndexedDataset):
    def __init__(self, path: Path, cfg: Any, **kw: int) -> None:
        super().__init__(**kw)
        train_src, train_tgt = _pairs(path, "train")
        val_src, val_tgt = _pairs(path, "val")
        self.src_vocab = Vocab(
            Counter(w for s in train_src for w in s), cfg.src_vocab, SPECIALS, "<unk>"
        )
        self.tgt_vocab = Vocab(
            Counter(w for s in train_tgt for w in s), cfg.tgt_vocab, SPECIALS, "<unk>"
        )
        enc = self._encode
        self.train = [enc(s, t, cfg.max_len) for s, t in zip(train_src, train_tgt, strict=True)]
        self.val = [enc(s, t, cfg.max_len) for s, t in zip(val_src, val_tgt, strict=True)]
        self.n_train, self.n_heldout = len(self.train), len(self.val)

    def _encode(self, src: list[str], tgt: list[str], max_len: int) -> tuple[list[int], list[int]]:
        return (
            source_ids(self.src_vocab.encode(src), max_len),
            target_ids(self.tgt_vocab.encode(tgt), max_len),
        )

    def make_batch(self, indices: np.ndarray, train: bool, gen: torch.Generator | None) -> Batch:
        pairs = self.train if train else self.val
        chosen = [pairs[i] for i in indices]
        return {"src": pad_batch([p[0] for p in chosen]), "tgt": pad_batch([p[1] for p in chosen])}
