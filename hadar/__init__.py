"""Hadar: a task-level heterogeneity-aware primal-dual scheduler for deep-learning clusters.

``from hadar import simulate, compare`` gives the Python API (:mod:`hadar.api`); it is loaded on
first use, so ``import hadar`` stays cheap for the CLI and the workers.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

__all__ = ["Comparison", "Simulation", "compare", "simulate"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from hadar import api

        return getattr(api, name)
    raise AttributeError(f"module 'hadar' has no attribute {name!r}")
