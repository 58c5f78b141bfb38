"""The job spec a worker trains from (``spec.json``)::

    {"model": "IC", "size": "tiny", "data": "synthetic", "batch_size": 32, "lr": 0.05, "seed": 0}

``model`` (IC, LM, LT, RS, MM; any case), ``size`` (tiny, small, paper), ``data`` (a dataset
path or ``"synthetic"``), ``batch_size`` (1-16,384, per rank) and ``lr`` (> 0, finite) are required; ``seed``
(0 to 2^63 - 1) defaults to 0; ``precision`` (``fp32``, ``bf16``, ``fp16``) defaults to ``fp32`` (mixed precision
off). Unknown fields are rejected.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from hadar.core.errors import InputError
from hadar.core.validation import from_validation_error
from nodes.model_names import canonical_model

SYNTHETIC = "synthetic"
"""The ``data`` value that asks for generated data instead of a dataset path."""

MAX_BATCH_SIZE = 16_384
"""Largest per-rank batch accepted: beyond it a batch of the paper's models does not fit a GPU's
memory, and a worker would fail every round instead of the spec being refused up front."""


class JobSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    model: str
    size: Literal["tiny", "small", "paper"]
    data: str = Field(min_length=1)
    batch_size: int = Field(gt=0, le=MAX_BATCH_SIZE)
    lr: float = Field(gt=0, allow_inf_nan=False)  # .inf trained to NaN and "completed"
    seed: int = Field(default=0, ge=0, le=2**63 - 1)  # torch.manual_seed's range, signed
    precision: Literal["fp32", "bf16", "fp16"] = "fp32"
    """Mixed precision: ``bf16`` or ``fp16`` autocast (fp16 with gradient scaling, CUDA only)."""


def parse_spec(raw: Any, source: str = "spec") -> JobSpec:
    """Validate a decoded spec; the model name is canonicalised (``"ic"`` -> ``"IC"``)."""
    if not isinstance(raw, dict):
        raise InputError(f"{source}: expected a JSON object")
    try:
        spec = JobSpec.model_validate(raw)
    except ValidationError as exc:
        raise from_validation_error(source, exc) from None
    return spec.model_copy(update={"model": canonical_model(spec.model, source)})


def load_spec(path: str | Path) -> JobSpec:
    """Read and validate ``spec.json``; problems are one-line ``InputError`` naming the field."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{p}: spec file not found")
    try:
        raw = json.loads(p.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"{p}: malformed JSON ({exc})") from None
    return parse_spec(raw, str(p))
