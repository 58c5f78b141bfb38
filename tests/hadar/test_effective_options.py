"""What a run's identity records of its policy: every knob of the config once ``--policy-opt``
pairs are applied, defaults included (issue 17: a resume must be the same run)."""

from __future__ import annotations

import pytest

from hadar.core.errors import InputError
from hadar.policy_options import effective_options
from hadar.scheduler import DEFAULT_MAX_RHO


def test_defaults_are_recorded_including_knobs_nobody_named() -> None:
    knobs = effective_options("hadare")
    assert knobs["hadar.max_rho"] == f"{DEFAULT_MAX_RHO:g}"
    assert knobs["hadar.max_wait_s"] == "None"
    assert knobs["hadar.replan"] == "preempt"


def test_the_same_value_spelled_differently_is_the_same_run() -> None:
    assert effective_options("hadar", {"max_wait_s": "3600"}) == effective_options(
        "hadar", {"max_wait_s": "3600.0"}
    )
    assert effective_options("hadar", {"max_wait_s": "3600"})["max_wait_s"] == "3600"
    assert effective_options("hadar", {"max_wait_s": "none"})["max_wait_s"] == "None"


def test_fixed_knobs_and_nested_options_are_applied() -> None:
    knobs = effective_options("hadare", {"max_wait_s": "60"}, aggregation_overhead_s=5.0)
    assert knobs["hadar.max_wait_s"] == "60" and knobs["aggregation_overhead_s"] == "5"


def test_an_unknown_option_is_the_usual_one_line_error() -> None:
    with pytest.raises(InputError, match="unknown option 'nope'"):
        effective_options("hadar", {"nope": "1"})
