"""MiMa weather data: one CSV of timestamped numeric variables on a regular time grid
(e.g. 5-minute steps), given as the file or a directory holding ``mima.csv``.

Columns: ``timestamp`` (anything pandas parses as a date-time), exactly ``N_MICRO`` columns
whose names start with ``micro_`` (near-surface station observations, the forecast targets, e.g.
``micro_temp_2m, micro_rh, micro_wind_speed, micro_wind_dir, micro_pressure, micro_solar_rad``)
and exactly ``N_MACRO`` columns starting with ``macro_`` (atmospheric numerical-model outputs
interpolated to the same grid, e.g. ``macro_t850, macro_rh700, macro_u850, macro_v850,
macro_z500, macro_pwat``). Other columns are ignored. Rows are sorted by time; gaps
inside a column are forward/back filled. The first 80% of the time line trains, the last
20% is held out; every variable is z-scored with the training part's mean and std.

A sample is the micro window ``[t - t_in, t)``, the macro window ``[t - t_in, t + t_out)`` and
the target micro values ``[t, t + t_out)``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from hadar.core.errors import InputError
from nodes.datasets.base import Batch, IndexedDataset
from nodes.models.weather import N_MACRO, N_MICRO

TRAIN_FRACTION = 0.8
FILE_NAME = "mima.csv"


def read_mima_csv(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """``(micro [T, N_MICRO], macro [T, N_MACRO])`` float32 arrays in time order."""
    import pandas as pd  # lazily: only real MiMa runs need it

    file = path / FILE_NAME if path.is_dir() else path
    if not file.is_file():
        raise InputError(f"data: missing MiMa file {file}")
    try:
        df = pd.read_csv(file)
    except (ValueError, pd.errors.ParserError, pd.errors.EmptyDataError) as exc:
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise InputError(f"data: {file}: unreadable CSV ({msg})") from None
    if "timestamp" not in df.columns:
        raise InputError(f"data: {file}: missing column 'timestamp'")
    micro = [c for c in df.columns if str(c).startswith("micro_")]
    macro = [c for c in df.columns if str(c).startswith("macro_")]
    if len(micro) != N_MICRO or len(macro) != N_MACRO:
        raise InputError(
            f"data: {file}: expected {N_MICRO} micro_* and {N_MACRO} macro_* columns, "
            f"found {len(micro)} and {len(macro)}"
        )
    try:
        df["timestamp"] = pd.to_datetime(df["timestamp"])
        values = df.sort_values("timestamp", kind="stable")[micro + macro].apply(pd.to_numeric)
    except (ValueError, TypeError) as exc:
        raise InputError(f"data: {file}: non-numeric or bad timestamp value ({exc})") from None
    values = values.ffill().bfill()
    if values.isna().any().any():
        bad = values.columns[values.isna().any()][0]
        raise InputError(f"data: {file}: column {bad!r} has no values")
    arr = values.to_numpy(dtype=np.float32)
    return arr[:, :N_MICRO], arr[:, N_MICRO:]


class MiMaWindows(IndexedDataset):
    """Sliding windows over a micro/macro series, split chronologically into train/held-out."""

    def __init__(
        self, micro: np.ndarray, macro: np.ndarray, cfg: Any, source: str, **kw: int
    ) -> None:
        super().__init__(**kw)
        self.t_in, self.t_out = cfg.t_in, cfg.t_out
        span = self.t_in + self.t_out
        n_rows = len(micro)
        cut = int(n_rows * TRAIN_FRACTION)
        if cut < span + 1 or n_rows - cut < span:
            raise InputError(
                f"data: {source}: {n_rows} rows is too short for windows of "
                f"{span} steps (need at least {int(np.ceil(span / (1 - TRAIN_FRACTION)))})"
            )
        mean_mi, std_mi = micro[:cut].mean(0), micro[:cut].std(0) + 1e-6
        mean_ma, std_ma = macro[:cut].mean(0), macro[:cut].std(0) + 1e-6
        self.micro = torch.from_numpy(((micro - mean_mi) / std_mi).astype(np.float32))
        self.macro = torch.from_numpy(((macro - mean_ma) / std_ma).astype(np.float32))
        self.train_starts = np.arange(0, cut - span + 1)
        self.held_starts = np.arange(cut, n_rows - span + 1)
        self.n_train, self.n_heldout = len(self.train_starts), len(self.held_starts)

    def make_batch(self, indices: np.ndarray, train: bool, gen: torch.Generator | None) -> Batch:
        starts = torch.from_numpy((self.train_starts if train else self.held_starts)[indices])
        t_in, span = self.t_in, self.t_in + self.t_out
        rows_in = starts[:, None] + torch.arange(t_in)[None, :]
        rows_all = starts[:, None] + torch.arange(span)[None, :]
        rows_out = rows_all[:, t_in:]
        return {
            "micro": self.micro[rows_in],
            "macro": self.macro[rows_all],
            "target": self.micro[rows_out],
        }


def load_mima(path: Path, cfg: Any, **kw: int) -> MiMaWindows:
    micro, macro = read_mima_csv(path)
    return MiMaWindows(micro, macro, cfg, str(path), **kw)
