"""CIFAR-10 in its "python version" layout: pickled batches ``data_batch_1`` ... ``data_batch_5``
and ``test_batch`` (each a dict with ``b"data"``: uint8 [N, 3072] and ``b"labels"``), in the
given directory or its ``cifar-10-batches-py`` sub-directory.

Pickles are read with a restricted unpickler that only rebuilds numpy arrays, so a crafted file
cannot run code. Training batches get the standard augmentation (random crop with 4-pixel
padding, horizontal flip); all images are normalised with the CIFAR-10 channel statistics.
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import numpy as np
import torch

from hadar.core.errors import InputError
from nodes.datasets.base import Batch, IndexedDataset

TRAIN_FILES = tuple(f"data_batch_{i}" for i in range(1, 6))
TEST_FILE = "test_batch"
MEAN = (0.4914, 0.4822, 0.4465)
STD = (0.2470, 0.2435, 0.2616)

_ALLOWED = {
    ("numpy", "ndarray"),
    ("numpy", "dtype"),
    ("numpy.core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "_reconstruct"),
    ("numpy.core.multiarray", "scalar"),
    ("numpy._core.multiarray", "scalar"),
}


class _ArrayUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _ALLOWED:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(f"refusing to load {module}.{name}")


def _read_batch(path: Path) -> tuple[np.ndarray, np.ndarray]:
    if not path.is_file():
        raise InputError(f"data: missing CIFAR-10 file {path}")
    try:
        with path.open("rb") as f:
            d = _ArrayUnpickler(f, encoding="bytes").load()
        data = np.asarray(d[b"data"], dtype=np.uint8).reshape(-1, 3, 32, 32)
        labels = np.asarray(d[b"labels"], dtype=np.int64)
    except (pickle.UnpicklingError, EOFError, KeyError, TypeError, ValueError) as exc:
        raise InputError(f"data: {path} is not a CIFAR-10 python batch ({exc})") from None
    if len(labels) != len(data) or (labels.size and (labels.min() < 0 or labels.max() > 9)):
        raise InputError(f"data: {path}: labels do not match the images or are outside 0..9")
    return data, labels


def _root(path: Path) -> Path:
    sub = path / "cifar-10-batches-py"
    return sub if sub.is_dir() else path


class Cifar10(IndexedDataset):
    def __init__(self, path: Path, cfg: Any, **kw: int) -> None:
        super().__init__(**kw)
        root = _root(path)
        parts = [_read_batch(root / name) for name in TRAIN_FILES]
        self.train_x = np.concatenate([p[0] for p in parts])
        self.train_y = np.concatenate([p[1] for p in parts])
        self.test_x, self.test_y = _read_batch(root / TEST_FILE)
        self.n_train, self.n_heldout = len(self.train_y), len(self.test_y)
        if self.n_train == 0:
            raise InputError(f"data: {root} holds no CIFAR-10 training images")
        self._mean = torch.tensor(MEAN).view(1, 3, 1, 1) * 255
        self._std = torch.tensor(STD).view(1, 3, 1, 1) * 255

    def make_batch(self, indices: np.ndarray, train: bool, gen: torch.Generator | None) -> Batch:
        xs, ys = (self.train_x, self.train_y) if train else (self.test_x, self.test_y)
        images = torch.from_numpy(xs[indices]).float()
        if train and gen is not None:
            images = augment(images, gen)
        return {"image": (images - self._mean) / self._std, "label": torch.from_numpy(ys[indices])}


def augment(images: torch.Tensor, gen: torch.Generator, pad: int = 4) -> torch.Tensor:
    """Random crop after zero padding by ``pad`` pixels, then a random horizontal flip."""
    n, _, h, w = images.shape
    padded = torch.nn.functional.pad(images, (pad, pad, pad, pad))
    offs = torch.randint(0, 2 * pad + 1, (n, 2), generator=gen)
    flips = torch.rand(n, generator=gen) < 0.5
    out = torch.empty_like(images)
    for i in range(n):
        dy, dx = int(offs[i, 0]), int(offs[i, 1])
        crop = padded[i, :, dy : dy + h, dx : dx + w]
        out[i] = crop.flip(-1) if flips[i] else crop
    return out
