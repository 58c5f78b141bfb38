"""Helpers shared by the tracker tests and the crash-test child process (no mocks: real files,
real SQLite, real torch checkpoints written the way a node worker writes them)."""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

FORMAT = "hadar-ckpt-1"


def write_ckpt(
    path: Path,
    state_dict: Mapping[str, torch.Tensor],
    optimizer: Mapping[str, Any] | None = None,
    steps: int = 0,
    model: str | None = "IC",
    size: str | None = "tiny",
) -> str:
    """Save a hadar-ckpt-1 file like the node worker does; return its sha256."""
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(
        {
            "format": FORMAT,
            "model": model,
            "size": size,
            "state_dict": dict(state_dict),
            "optimizer": optimizer,
            "steps": steps,
        },
        path,
    )
    return hashlib.sha256(path.read_bytes()).hexdigest()


def file_sha(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def dump_db(db_path: Path) -> dict[str, list[tuple]]:
    """Every row of every table, read through a separate read-only connection."""
    conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"
            )
        ]
        return {t: conn.execute(f"SELECT * FROM {t} ORDER BY 1, 2").fetchall() for t in tables}
    finally:
        conn.close()


def snapshot_files(root: Path, skip_suffixes: tuple[str, ...] = ("-wal", "-shm")) -> dict[str, str]:
    """``{relative path: sha256}`` of every file under ``root`` (SQLite WAL/shm excluded)."""
    return {
        str(p.relative_to(root)): file_sha(p)
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.name.endswith(skip_suffixes)
    }


def tiny_net(seed: int = 0, width: int = 8) -> torch.nn.Module:
    """A small model with a BatchNorm layer (float params, float buffers, an int counter)."""
    torch.manual_seed(seed)
    return torch.nn.Sequential(
        torch.nn.Linear(4, width),
        torch.nn.BatchNorm1d(width),
        torch.nn.ReLU(),
        torch.nn.Linear(width, 3),
    )


def perturbed(
    state_dict: Mapping[str, torch.Tensor], seed: int, batches: int
) -> dict[str, torch.Tensor]:
    """A deterministic stand-in for a trained copy: floats jittered, BN counter advanced."""
    g = torch.Generator().manual_seed(seed)
    out = {}
    for k, v in state_dict.items():
        if v.is_floating_point():
            out[k] = v + 0.01 * torch.randn(v.shape, generator=g, dtype=v.dtype)
        elif k.endswith("num_batches_tracked"):
            out[k] = v + batches
        else:
            out[k] = v.clone()
    return out
