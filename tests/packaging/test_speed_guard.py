"""The speed guard (``benchmarks/speed_guard.py``, run by ``scripts/check``) flags a round whose
CPU time grew more than 2x relative to the reference computation, and its committed baseline
covers every guarded round."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType

from tests.fixtures.script_modules import load_script

ROOT = Path(__file__).resolve().parents[2]


def _guard() -> ModuleType:
    return load_script("benchmarks/speed_guard.py")


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
