"""``events.jsonl``: every line strict JSON, whatever the numbers in an event."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from hadar.runtime.journal import EventLog


def _strict(text: str) -> object:
    def refuse(token: str) -> float:
        raise ValueError(f"not strict JSON: {token}")

    return json.loads(text, parse_constant=refuse)


def test_a_diverged_loss_is_written_as_null_not_nan(tmp_path: Path) -> None:
    log = EventLog(tmp_path / "events.jsonl")
    log.emit(
        "result", round=3, loss=math.nan, steps=[1.0, math.inf], rates={"a": np.float64("-inf")}
    )
    log.emit("result", round=4, loss=0.25)
    log.close()
    lines = [_strict(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    assert lines[0]["loss"] is None and lines[0]["steps"] == [1.0, None]
    assert lines[0]["rates"] == {"a": None}
    assert lines[1]["loss"] == 0.25 and lines[1]["round"] == 4
