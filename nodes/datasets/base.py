"""The dataset interface the worker trains from, and the deterministic data-order machinery.

A dataset yields the training batch for a *global step* of the job's lineage, so a round that
resumes at step s continues where the previous round stopped instead of replaying its batches.
The order is a pure function of (seed, data stream, step, rank, world size):

* finite datasets walk epoch-wise permutations drawn from ``(seed, stream, epoch)``; rank ``r``
  of a gang of ``W`` at step ``s`` takes sample positions ``((s*W + r)*B ... (s*W + r + 1)*B)``;
* synthetic streams draw each batch from a generator seeded by ``(seed, stream, step, rank, W)``.

Different data streams (HadarE's copies of one job) therefore see different batches.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator

import numpy as np
import torch
from torch import Tensor

Batch = dict[str, Tensor]

EVAL_SAMPLES = {"tiny": 256, "small": 2048, "paper": 10000}
"""Cap on held-out samples scored by ``--eval`` (the whole split when it is smaller)."""

_PURPOSE_ORDER, _PURPOSE_BATCH, _PURPOSE_HELDOUT, _PURPOSE_STRUCTURE = 1, 2, 3, 4


def derive_seed(*parts: int) -> int:
    """A 63-bit seed mixed from non-negative integers (numpy's SeedSequence hashing)."""
    state = np.random.SeedSequence([int(p) for p in parts]).generate_state(2, dtype=np.uint32)
    return (int(state[0]) << 31) ^ int(state[1])


def torch_generator(*parts: int) -> torch.Generator:
    return torch.Generator().manual_seed(derive_seed(*parts))


def structure_rng(seed: int, tag: int) -> np.random.Generator:
    """RNG for a synthetic dataset's fixed structure (prototypes, chains...): depends on seed only."""
    return np.random.default_rng(np.random.SeedSequence([seed, _PURPOSE_STRUCTURE, tag]))


class Dataset(ABC):
    """Training batches by global step and a fixed held-out split for the metric."""

    def __init__(self, *, seed: int, stream: int, batch_size: int, eval_samples: int) -> None:
        self.seed = seed
        self.stream = stream
        self.batch_size = batch_size
        self.eval_samples = eval_samples

    @abstractmethod
    def train_batch(self, step: int, rank: int = 0, world_size: int = 1) -> Batch:
        """The batch rank ``rank`` of a gang of ``world_size`` trains on at global ``step``."""

    @abstractmethod
    def heldout_batches(self) -> Iterator[Batch]:
        """The held-out split (at most ``eval_samples`` samples), in a fixed order."""


class IndexedDataset(Dataset):
    """A finite training set of ``n_train`` items, walked in seeded epoch permutations."""

    n_train: int
    n_heldout: int

    def __init__(self, **kw: int) -> None:
        super().__init__(**kw)
        self._perm_epoch = -1
        self._perm = np.empty(0, dtype=np.int64)

    @abstractmethod
    def make_batch(self, indices: np.ndarray, train: bool, gen: torch.Generator | None) -> Batch:
        """Assemble the items ``indices`` (training items if ``train`` else held-out items);
        ``gen`` drives any training-time augmentation."""

    def _permutation(self, epoch: int) -> np.ndarray:
        if epoch != self._perm_epoch:
            rng = np.random.default_rng(
                np.random.SeedSequence([self.seed, _PURPOSE_ORDER, self.stream, epoch])
            )
            self._perm = rng.permutation(self.n_train)
            self._perm_epoch = epoch
        return self._perm

    def train_indices(self, step: int, rank: int = 0, world_size: int = 1) -> np.ndarray:
        start = (step * world_size + rank) * self.batch_size
        out = np.empty(self.batch_size, dtype=np.int64)
        for j, pos in enumerate(range(start, start + self.batch_size)):
            epoch, offset = divmod(pos, self.n_train)
            out[j] = self._permutation(epoch)[offset]
        return out

    def train_batch(self, step: int, rank: int = 0, world_size: int = 1) -> Batch:
        gen = torch_generator(self.seed, _PURPOSE_BATCH, self.stream, step, rank, world_size)
        return self.make_batch(self.train_indices(step, rank, world_size), True, gen)

    def heldout_batches(self) -> Iterator[Batch]:
        n = min(self.n_heldout, self.eval_samples)
        for start in range(0, n, self.batch_size):
            yield self.make_batch(np.arange(start, min(start + self.batch_size, n)), False, None)


class StreamDataset(Dataset):
    """An unbounded synthetic stream: each batch is drawn fresh from a seeded generator."""

    @abstractmethod
    def sample(self, n: int, gen: torch.Generator, heldout: bool) -> Batch:
        """``n`` fresh samples drawn with ``gen`` (in held-out form when ``heldout``)."""

    def train_batch(self, step: int, rank: int = 0, world_size: int = 1) -> Batch:
        gen = torch_generator(self.seed, _PURPOSE_BATCH, self.stream, step, rank, world_size)
        return self.sample(self.batch_size, gen, False)

    def heldout_batches(self) -> Iterator[Batch]:
        gen = torch_generator(self.seed, _PURPOSE_HELDOUT)
        for start in range(0, self.eval_samples, self.batch_size):
            yield self.sample(min(self.batch_size, self.eval_samples - start), gen, True)
