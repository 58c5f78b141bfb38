"""The checkpoint format shared by the worker, the providers and the tracker (``hadar-ckpt-1``).

A checkpoint is ``torch.save`` of::

    {"format": "hadar-ckpt-1", "model": "IC", "size": "tiny",
     "state_dict": model.state_dict(), "optimizer": optimizer.state_dict() or None,
     "steps": <total training steps of this lineage>}

with every tensor on the CPU, written atomically (temporary file + ``os.replace``).
"""

from __future__ import annotations

import pickle
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from hadar.core.errors import InputError
from hadar.core.integrity import CHECKPOINT_FORMAT as FORMAT
from hadar.core.integrity import sha256_file
from hadar.core.io import atomic_file
from nodes.models import build_model, canonical_model, check_size


def _to_cpu(obj: Any) -> Any:
    if isinstance(obj, torch.Tensor):
        return obj.detach().cpu()
    if isinstance(obj, Mapping):
        return {k: _to_cpu(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return type(obj)(_to_cpu(v) for v in obj)
    return obj


def save_checkpoint(
    path: str | Path,
    *,
    model: str,
    size: str,
    state_dict: Mapping[str, torch.Tensor],
    optimizer: Mapping[str, Any] | None,
    steps: int,
) -> str:
    """Write a ``hadar-ckpt-1`` checkpoint atomically and return its sha256 (hex)."""
    if int(steps) < 0:
        raise ValueError(f"steps must be >= 0, got {steps}")
    path = Path(path)
    obj = {
        "format": FORMAT,
        "model": canonical_model(model),
        "size": check_size(size),
        "state_dict": _to_cpu(dict(state_dict)),
        "optimizer": _to_cpu(optimizer) if optimizer is not None else None,
        "steps": int(steps),
    }
    with atomic_file(path, "wb", durable=True) as f:
        torch.save(obj, f)
    return sha256_file(path)


def _shape(t: Any) -> str:
    return (
        "(" + ", ".join(str(d) for d in t.shape) + ")"
        if isinstance(t, torch.Tensor)
        else type(t).__name__
    )


def check_state_dict(state: Mapping[str, Any], model: str, size: str, source: str) -> None:
    """Raise ``InputError`` naming the first key whose presence or shape differs from the model's."""
    expected = build_model(model, size, device="meta").state_dict()
    for key, ref in expected.items():
        if key not in state:
            raise InputError(f"{source}: state_dict is missing key {key!r} of {model}/{size}")
        got = state[key]
        if not isinstance(got, torch.Tensor) or got.shape != ref.shape:
            raise InputError(
                f"{source}: state_dict key {key!r} has shape {_shape(got)}, "
                f"{model}/{size} expects {_shape(ref)}"
            )
    for key in state:
        if key not in expected:
            raise InputError(f"{source}: state_dict has unexpected key {key!r} for {model}/{size}")


def load_checkpoint(path: str | Path, expected_model: str, expected_size: str) -> dict[str, Any]:
    """Load and validate a checkpoint for ``expected_model`` at ``expected_size``.

    Validates the format tag, model, size, step count and every state_dict key and shape against
    a freshly built model; any mismatch is a one-line ``InputError`` naming the first bad item.
    Tensors are loaded onto the CPU.
    """
    path = Path(path)
    model, size = canonical_model(expected_model), check_size(expected_size)
    if not path.is_file():
        raise InputError(f"{path}: checkpoint file not found")
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except (
        pickle.UnpicklingError,
        zipfile.BadZipFile,
        RuntimeError,
        EOFError,
        OSError,
        ValueError,
        AttributeError,
    ) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputError(f"{path}: not a readable checkpoint ({first})") from None
    if not isinstance(obj, dict) or obj.get("format") != FORMAT:
        fmt = obj.get("format") if isinstance(obj, dict) else type(obj).__name__
        raise InputError(f"{path}: format is {fmt!r}, expected {FORMAT!r}")
    if str(obj.get("model", "")).upper() != model:
        raise InputError(
            f"{path}: checkpoint is for model {obj.get('model')!r}, expected {model!r}"
        )
    if obj.get("size") != size:
        raise InputError(f"{path}: checkpoint is for size {obj.get('size')!r}, expected {size!r}")
    steps = obj.get("steps")
    if not isinstance(steps, int) or isinstance(steps, bool) or steps < 0:
        raise InputError(f"{path}: 'steps' must be a non-negative integer, got {steps!r}")
    state = obj.get("state_dict")
    if not isinstance(state, Mapping):
        raise InputError(f"{path}: 'state_dict' is missing or not a mapping")
    check_state_dict(state, model, size, str(path))
    if obj.get("optimizer") is not None and not isinstance(obj["optimizer"], Mapping):
        raise InputError(f"{path}: 'optimizer' must be an optimizer state_dict or None")
    return obj
