"""``hadar reproduce NAME``: each seed system's headline experiment with its paper's set-up, our
figure beside the paper's, each row with the tolerance stated before the run.

One module per system (``hadar/experiments/reproduce/<NAME>.py``, NAME in
:data:`hadar.experiments.paper.REPRODUCED`), each exposing ``run(quick, workers: int | None) ->
Reproduction``. A row outside its tolerance is reported, never dropped.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, Protocol

from hadar.core.errors import InputError
from hadar.experiments.paper import REPRODUCED

AT_LEAST = "at least"
"""A row whose paper figure is a bound ("up to", "1.9x to 3.1x"): ours is within when it is at
least ``paper x (1 - tolerance)``."""
AROUND = "around"
"""A row whose paper figure is a value: ours is within ``paper x (1 +- tolerance)``."""


@dataclass(frozen=True)
class Row:
    """One figure: the paper's, ours, and the relative tolerance fixed before the run."""

    figure: str
    paper: float
    ours: float | None
    """None: not measured (the row says why in ``note``)."""
    tolerance: float
    unit: str = "s"
    """``s`` (seconds), ``x`` (a ratio) or ``%`` (a share, 0-1)."""
    rule: str = AROUND
    note: str = ""

    @property
    def within(self) -> bool:
        if self.ours is None:
            return False
        if self.rule == AT_LEAST:
            return self.ours >= self.paper * (1 - self.tolerance)
        return abs(self.ours - self.paper) <= self.tolerance * abs(self.paper)

    def as_dict(self) -> dict[str, Any]:
        """The row as ``reproduce.json`` holds it."""
        return {
            "figure": self.figure,
            "paper": self.paper,
            "ours": self.ours,
            "tolerance": self.tolerance,
            "within": self.within,
            "unit": self.unit,
            "rule": self.rule,
            "note": self.note,
        }


@dataclass(frozen=True)
class Reproduction:
    """One system's reproduction: its set-up in words and its rows."""

    system: str
    quick: bool
    setup: str
    rows: tuple[Row, ...]
    notes: tuple[str, ...] = field(default=())

    def as_dict(self) -> dict[str, Any]:
        return {
            "system": self.system,
            "quick": self.quick,
            "setup": self.setup,
            "rows": [r.as_dict() for r in self.rows],
            "notes": list(self.notes),
        }


class _Experiment(Protocol):
    def run(self, quick: bool, workers: int | None) -> Reproduction: ...


def reproduce(name: str, quick: bool = False, workers: int | None = None) -> Reproduction:
    """Run system ``name``'s headline experiment (``quick``: the smaller version) in ``workers``
    processes (None: one per CPU, at most one per simulation)."""
    if name not in REPRODUCED:
        raise InputError(f"reproduce: unknown system {name!r} (known: {', '.join(REPRODUCED)})")
    module: _Experiment = importlib.import_module(f"{__name__}.{name}")
    return module.run(quick, workers)
