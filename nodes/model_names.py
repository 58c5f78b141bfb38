"""The paper's five training workloads and their sizes by name, without torch: what a job's spec
may name, checked before a run imports the models (``nodes/models`` builds them)."""

from __future__ import annotations

from hadar.core.errors import InputError

MODEL_NAMES = ("IC", "LM", "LT", "RS", "MM")
"""ResNet-18, LSTM language model, Transformer translation, recommender, MiMa weather."""
SIZES = ("tiny", "small", "paper")


def canonical_model(name: str, source: str | None = None) -> str:
    """``"ic"`` -> ``"IC"``; unknown names raise ``InputError`` naming ``model``."""
    key = str(name).strip().upper()
    if key not in MODEL_NAMES:
        prefix = f"{source}: model" if source else "model"
        raise InputError(f"{prefix}: unknown model {name!r} (choose {', '.join(MODEL_NAMES)})")
    return key


def check_size(size: str, source: str | None = None) -> str:
    """Validate a size name (``tiny``, ``small`` or ``paper``)."""
    if size not in SIZES:
        prefix = f"{source}: size" if source else "size"
        raise InputError(f"{prefix}: unknown size {size!r} (choose {', '.join(SIZES)})")
    return size
