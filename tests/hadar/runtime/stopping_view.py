"""A coordinator view that stops the run (as Ctrl-C does) once a closed round satisfies a test's
condition: how a test ends a run whose jobs outlast it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hadar.runtime.coordinator import Coordinator


class StopAfterRound:
    """Sets the coordinator's stop flag at the end of the first round ``r`` with ``stop(r)``."""

    def __init__(self, coordinator: Coordinator, stop: Callable[[int], bool]) -> None:
        self.coordinator = coordinator
        self.stop = stop

    def note(self, *_: Any) -> None:
        pass

    def start_round(self, *_: Any) -> None:
        pass

    def copy_done(self, *_: Any) -> None:
        pass

    def end_round(self, r: int, *_: Any) -> None:
        if self.stop(r):
            self.coordinator._stop.set()
