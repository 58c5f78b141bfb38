"""The HadarE Job Tracker: registers forked copies, sums their steps per job and consolidates
their parameters by (step-weighted) averaging, with crash-safe state in SQLite.

See docs/tracker.md. The names below load ``tracker.tracker`` (and torch) on first use, so light
modules such as ``tracker.ids`` import without torch.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "CheckpointRef",
    "JobRoundResult",
    "JobState",
    "JobTracker",
    "Quarantine",
    "Report",
    "Rollback",
    "RoundSummary",
]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module("tracker.tracker"), name)
    raise AttributeError(f"module 'tracker' has no attribute {name!r}")
