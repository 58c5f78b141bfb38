"""MovieLens-20M ``ratings.csv`` (header ``userId,movieId,rating,timestamp``), given as the file
or the directory holding it.

Items are the model size's ``n_items`` most-rated movies (ties by movie id); each user with a
rating of one of them is one sample: their rating vector (0 = unrated). About 10% of ratings,
chosen by a fixed hash of (userId, movieId) so the split never depends on the job, are held out:
the metric predicts them from the user's other ratings.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from hadar.core.errors import InputError
from nodes.datasets.base import Batch, IndexedDataset

COLUMNS = ("userId", "movieId", "rating")
HELDOUT_BUCKETS = 10


def heldout_mask(users: np.ndarray, items: np.ndarray) -> np.ndarray:
    """True for the ~1/HELDOUT_BUCKETS of (user, movie) pairs that form the held-out split."""
    h = users.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15) ^ items.astype(
        np.uint64
    ) * np.uint64(0xC2B2AE3D27D4EB4F)
    h ^= h >> np.uint64(29)
    h *= np.uint64(0xBF58476D1CE4E5B9)
    h ^= h >> np.uint64(32)
    mask: np.ndarray = (h % np.uint64(HELDOUT_BUCKETS)) == 0
    return mask


class CSRRows:
    """Per-user sparse rating rows: ``items[indptr[u]:indptr[u+1]]`` and matching ``values``."""

    def __init__(
        self, users: np.ndarray, items: np.ndarray, values: np.ndarray, n_users: int
    ) -> None:
        order = np.argsort(users, kind="stable")
        self.items, self.values = items[order], values[order]
        self.indptr = np.zeros(n_users + 1, dtype=np.int64)
        np.cumsum(np.bincount(users, minlength=n_users), out=self.indptr[1:])

    def dense(self, rows: np.ndarray, n_items: int) -> torch.Tensor:
        out = torch.zeros(len(rows), n_items)
        for i, u in enumerate(rows):
            a, b = self.indptr[u], self.indptr[u + 1]
            out[i, torch.from_numpy(self.items[a:b])] = torch.from_numpy(self.values[a:b])
        return out


def _read(path: Path) -> Any:
    import pandas as pd  # lazily: only real MovieLens runs need it

    file = path / "ratings.csv" if path.is_dir() else path
    if not file.is_file():
        raise InputError(f"data: missing MovieLens file {file}")
    try:
        df = pd.read_csv(
            file,
            usecols=list(COLUMNS),
            dtype={"userId": np.int64, "movieId": np.int64, "rating": np.float32},
        )
    except (ValueError, pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise InputError(f"data: {file}: not a MovieLens ratings.csv ({msg})") from None
    if df.empty:
        raise InputError(f"data: {file}: no ratings")
    return df


class MovieLens(IndexedDataset):
    def __init__(self, path: Path, cfg: Any, **kw: int) -> None:
        super().__init__(**kw)
        df = _read(path)
        self.n_items = cfg.n_items
        counts = df.groupby("movieId").size()
        ranked = counts.reset_index(name="n").sort_values(["n", "movieId"], ascending=[False, True])
        keep = ranked["movieId"].to_numpy()[: cfg.n_items]
        df = df[df["movieId"].isin(keep)]
        users = df["userId"].to_numpy()
        sorter = np.argsort(keep)
        items = sorter[np.searchsorted(keep, df["movieId"].to_numpy(), sorter=sorter)]
        ratings = df["rating"].to_numpy(dtype=np.float32)
        held = heldout_mask(users, df["movieId"].to_numpy())
        uid, user_idx = np.unique(users, return_inverse=True)
        n_users = len(uid)
        self.train_rows = CSRRows(user_idx[~held], items[~held], ratings[~held], n_users)
        self.held_rows = CSRRows(user_idx[held], items[held], ratings[held], n_users)
        has_train = np.diff(self.train_rows.indptr) > 0
        self.train_users = np.flatnonzero(has_train)
        self.eval_users = np.flatnonzero(has_train & (np.diff(self.held_rows.indptr) > 0))
        self.n_train, self.n_heldout = len(self.train_users), len(self.eval_users)
        if self.n_train == 0 or self.n_heldout == 0:
            raise InputError(f"data: {path}: too few ratings for a training and a held-out split")

    def make_batch(self, indices: np.ndarray, train: bool, gen: torch.Generator | None) -> Batch:
        if train:
            return {"ratings": self.train_rows.dense(self.train_users[indices], self.n_items)}
        users = self.eval_users[indices]
        return {
            "ratings": self.train_rows.dense(users, self.n_items),
            "target": self.held_rows.dense(users, self.n_items),
        }
