"""Datasets for the five workloads: real on-disk formats read from the job spec's ``data`` path,
or ``"synthetic"`` streams with the same shapes. Nothing is ever downloaded."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from hadar.core.errors import InputError
from nodes.datasets.base import EVAL_SAMPLES, Batch, Dataset
from nodes.datasets.cifar10 import Cifar10
from nodes.datasets.mima import load_mima
from nodes.datasets.movielens import MovieLens
from nodes.datasets.multi30k import Multi30k
from nodes.datasets.synthetic import (
    SyntheticImages,
    SyntheticRatings,
    SyntheticText,
    SyntheticTranslation,
    synthetic_mima,
)
from nodes.datasets.wikitext2 import Wikitext2
from nodes.models import canonical_model, check_size, model_config
from nodes.spec import SYNTHETIC

__all__ = ["Batch", "Dataset", "open_dataset", "SYNTHETIC"]


_REAL = {"IC": Cifar10, "LM": Wikitext2, "LT": Multi30k, "RS": MovieLens, "MM": load_mima}
_FAKE: dict[str, Callable[..., Dataset]] = {
    "IC": SyntheticImages,
    "LM": SyntheticText,
    "LT": SyntheticTranslation,
    "RS": SyntheticRatings,
}


def open_dataset(
    model: str, size: str, data: str, *, seed: int = 0, stream: int = 0, batch_size: int = 32
) -> Dataset:
    """The dataset of workload ``model`` at ``size`` from ``data`` (a path or ``"synthetic"``).

    A missing path or a malformed file raises a one-line ``InputError`` naming ``data``.
    """
    short = canonical_model(model)
    cfg = model_config(short, check_size(size))
    kw = {
        "seed": seed,
        "stream": stream,
        "batch_size": batch_size,
        "eval_samples": EVAL_SAMPLES[size],
    }
    if data == SYNTHETIC:
        if short == "MM":
            return synthetic_mima(cfg, size, **kw)
        return _FAKE[short](cfg, **kw)
    path = Path(data).expanduser()
    if not path.exists():
        raise InputError(f"data: path does not exist: {data}")
    return _REAL[short](path, cfg, **kw)
