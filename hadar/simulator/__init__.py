"""Trace-driven, round-based simulator: replays a workload on a cluster under a policy.

The names below are imported on first use (PEP 562), so that importing a light module of this
package (``hadar.simulator.records``) does not import the engine and what it needs (SciPy,
pandas): the CLI's parsers stay fast."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hadar.simulator.engine import SimConfig, simulate
    from hadar.simulator.records import JobRecord, RoundRecord, SimulationResult

__all__ = ["JobRecord", "RoundRecord", "SimConfig", "SimulationResult", "simulate"]

_HOME = {
    "SimConfig": "hadar.simulator.engine",
    "simulate": "hadar.simulator.engine",
    "JobRecord": "hadar.simulator.records",
    "RoundRecord": "hadar.simulator.records",
    "SimulationResult": "hadar.simulator.records",
}


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)
