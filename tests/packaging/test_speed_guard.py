"""The speed guard (``benchmarks/speed_guard.py``, run by ``scripts/check``) flags a round whose
CPU time grew more than 2x relative to the reference computation, and its committed baseline
covers every guarded round."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def _guard() -> ModuleType:
    path = ROOT / "benchmarks" / "speed_guard.py"
    spec = importlib.util.spec_from_file_location("speed_guard", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("speed_guard", module)
    spec.loader.exec_module(module)
    return module


def test_a_ratio_more_than_twice_its_baseline_is_a_regression():
    guard = _guard()
    baseline = {"a": 1.5, "b": 10.0}
    assert guard.regressions({"a": 2.9, "b": 19.9}, baseline, 2.0) == []
    bad = guard.regressions({"a": 3.1, "b": 12.0}, baseline, 2.0)
    assert len(bad) == 1 and bad[0].startswith("a: 3.10 x the reference")


def test_a_round_without_baseline_fails():
    guard = _guard()
    bad = guard.regressions({"new round": 1.0}, {}, 2.0)
    assert len(bad) == 1 and "no baseline" in bad[0]


def test_the_committed_baseline_covers_every_guarded_round():
    guard = _guard()
    baseline = json.loads((ROOT / "benchmarks" / "speed_guard.json").read_text())
    assert set(baseline) == set(guard.ROUNDS)
    assert all(ratio > 0 for ratio in baseline.values())
