"""What a run's identity records of its policy: every knob of the config once ``--policy-opt``
pairs are applied, defaults included (issue 17: a resume must be the same run)."""

from __future__ import annotations

import dataclasses
import re

import pytest

from hadar.core.errors import InputError
from hadar.policy import policy_class, policy_names
from hadar.policy_options import effective_options, policy_with_options
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


def _simple_knob(config_cls: type) -> tuple[str, str] | None:
    """A knob of ``config_cls`` with a plain default, as ``--policy-opt`` would spell it."""
    for f in dataclasses.fields(config_cls):
        value = getattr(config_cls(), f.name)
        if isinstance(value, bool):
            return f.name, str(value).lower()
        if isinstance(value, int | float | str):
            return f.name, str(value)
    return None


@pytest.mark.parametrize("name", sorted(policy_names()))
def test_every_policy_takes_its_own_knob_at_its_default(name: str) -> None:
    config_cls = getattr(policy_class(name), "config_class", None)
    knob = _simple_knob(config_cls) if config_cls is not None else None
    if knob is None:
        pytest.skip(f"{name} has no plain knob")
    policy = policy_with_options(name, {knob[0]: knob[1]})
    assert policy.config == config_cls()  # the same configuration as no option


@pytest.mark.parametrize("name", ["tiresias", "yarn-cs", "afs", "afs-het", "afs-p"])
def test_a_negative_tie_break_seed_is_refused_before_the_run(name: str) -> None:
    with pytest.raises(InputError, match="seed must be >= 0"):
        policy_with_options(name, {"seed": "-1"})


@pytest.mark.parametrize(
    "knob",
    [
        "copies=0",
        "copies=-1",
        "aggregation_overhead_s=-1",
        "max_job_count=0",
        "lookahead_jobs=-1",
        "lookahead_nodes=-1",
        "lookahead_rounds=-1",
        "lookahead_budget=-1",
    ],
)
def test_hadare_refuses_knobs_out_of_range(knob: str) -> None:
    key, _, value = knob.partition("=")
    with pytest.raises(InputError, match=f"{key} must be >= "):
        policy_with_options("hadare", {key: value})


@pytest.mark.parametrize("value", ["1e300", "-1e300", "101"])
def test_pollux_refuses_a_fairness_exponent_that_leaves_double_precision(value: str) -> None:
    with pytest.raises(InputError, match="p must be between -100 and 100"):
        policy_with_options("pollux", {"p": value})


@pytest.mark.parametrize(
    ("policy", "knob", "message"),
    [
        ("sia", "lambda_n=0", "lambda_n must be above 1 and at most 1e+06 (got 0)"),
        ("sia", "lambda_n=-0", "lambda_n must be above 1"),
        ("sia", "lambda_n=1", "lambda_n must be above 1"),
        ("sia", "lambda_n=1e308", "lambda_n must be above 1 and at most 1e+06 (got 1e+308)"),
        ("sia", "lambda_a=1e308", "lambda_a must be between 0 and 1e+06"),
        ("pollux", "p=1e-308", "p must be 0 or at least 1e-06 from it"),
        ("pollux", "p=-1e-9", "p must be 0 or at least 1e-06 from it"),
        ("pollux", "delta_s=1e308", "delta_s must be between 0 and 3.1536e+08"),
        ("bftrainer", "t_fwd=0", "0 < t_fwd <= "),
        ("bftrainer", "t_fwd=-0", "0 < t_fwd <= "),
    ],
)
def test_knobs_under_which_a_policy_schedules_nothing_are_refused_by_name(
    policy: str, knob: str, message: str
) -> None:
    """Each of these ran 2,000 idle rounds and then blamed the workload ("cannot place")."""
    key, _, value = knob.partition("=")
    with pytest.raises(InputError, match=re.escape(message)):
        policy_with_options(policy, {key: value})


@pytest.mark.parametrize(
    "policy, knob",
    [
        ("sia", "lambda_n=1.01"),
        ("pollux", "p=0"),
        ("pollux", "p=-1e-6"),
        ("bftrainer", "t_fwd=1e-3"),
    ],
)
def test_the_knob_bounds_keep_the_values_next_to_them(policy: str, knob: str) -> None:
    key, _, value = knob.partition("=")
    assert getattr(policy_with_options(policy, {key: value}).config, key) == float(value)


@pytest.mark.parametrize(
    ("knob", "message"),
    [
        ("beam=1025", "beam must be between 1 and 1024"),
        ("window_max=1025", "window_max must be at most 1024"),
    ],
)
def test_hadars_search_is_bounded_so_a_knob_cannot_make_a_round_run_for_minutes(
    knob: str, message: str
) -> None:
    key, _, value = knob.partition("=")
    with pytest.raises(InputError, match=message):
        policy_with_options("hadar", {key: value})
    assert policy_with_options("hadar", {key: "1024"}) is not None  # the bound itself is taken
