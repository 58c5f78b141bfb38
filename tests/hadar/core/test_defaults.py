"""Each default is defined once (``hadar/core/defaults.py``) and every place that shows or uses
it agrees: the CLI's flags, the simulator's and the real run's configs, the Python API, the
experiments, HadarE's knob and the policies' round context."""

from __future__ import annotations

import argparse
import dataclasses
import inspect

from hadar import api
from hadar.cli import build_parser, sub_parsers
from hadar.core.defaults import REAL_RUN, SIMULATED
from hadar.experiments.grid import Cell, GridSpec
from hadar.experiments.load_sweep import SweepCell
from hadar.policy import POLICY_REGISTRY, RoundContext
from hadar.runtime.config import RunConfig, RuntimeKnobs
from hadar.simulator.engine import SimConfig
from hadare.policy import HadarEConfig


def _defaults(command: str) -> dict[str, object]:
    """``{dest: default}`` of the command's flags (a hidden alias after its flag is skipped)."""
    parser = next(p for p in sub_parsers(build_parser()) if p.prog == f"hadar {command}")
    out: dict[str, object] = {}
    for a in parser._actions:
        if not isinstance(a, argparse._HelpAction):
            out.setdefault(a.dest, a.default)
    return out


def _field(cls: type, name: str) -> object:
    return next(f.default for f in dataclasses.fields(cls) if f.name == name)


def test_simulated_defaults_agree_everywhere():
    for command in ("simulate", "compare"):
        flags = _defaults(command)
        assert flags["round_s"] == SIMULATED.round_s, command
        assert flags["restart_penalty_s"] == SIMULATED.restart_penalty_s, command
    assert _defaults("simulate")["size"] == SIMULATED.size
    assert _defaults("simulate")["policy"] == SIMULATED.policy
    assert _defaults("compare")["occupancy_policy"] == SIMULATED.policy
    assert inspect.signature(api.simulate).parameters["policy"].default == SIMULATED.policy
    assert inspect.signature(api.simulate).parameters["size"].default == SIMULATED.size
    assert SimConfig().round_s == SIMULATED.round_s
    assert SimConfig().restart_penalty_s == SIMULATED.restart_penalty_s
    assert _field(RoundContext, "restart_penalty_s") == SIMULATED.restart_penalty_s
    sim = inspect.signature(api.simulate).parameters
    # None: the policy's declared round, else SIMULATED.round_s (tests/hadar/test_declared_round.py)
    assert sim["round_s"].default is None
    assert sim["restart_penalty_s"].default == SIMULATED.restart_penalty_s
    assert GridSpec().restart_penalty_s == _field(Cell, "restart_penalty_s")
    assert GridSpec().restart_penalty_s == SIMULATED.restart_penalty_s
    assert _field(SweepCell, "round_s") == SIMULATED.round_s
    assert _field(SweepCell, "restart_penalty_s") == SIMULATED.restart_penalty_s
    assert HadarEConfig().aggregation_overhead_s == SIMULATED.aggregation_overhead_s


def test_real_run_defaults_agree_everywhere():
    flags = _defaults("run")
    assert flags["round_s"] == REAL_RUN.round_s
    assert flags["grace_s"] == REAL_RUN.grace_s
    assert flags["size"] == REAL_RUN.size
    assert flags["policy"] == REAL_RUN.policy
    fields = RunConfig.model_fields
    assert fields["policy"].default == REAL_RUN.policy
    assert fields["round_s"].default == REAL_RUN.round_s
    assert fields["grace_s"].default == REAL_RUN.grace_s
    assert fields["size"].default == REAL_RUN.size
    assert fields["restart_penalty_s"].default == REAL_RUN.restart_penalty_s
    assert fields["aggregation_overhead_s"].default == REAL_RUN.aggregation_overhead_s
    assert RuntimeKnobs() == RuntimeKnobs(
        REAL_RUN.restart_penalty_s, REAL_RUN.aggregation_overhead_s
    )


def test_the_default_policies_are_registered():
    assert {SIMULATED.policy, REAL_RUN.policy} <= set(POLICY_REGISTRY)


def test_the_two_drivers_differ_where_the_concepts_do():
    # a real run's round, restart and averaging are wall-clock seconds on CPU nodes
    assert REAL_RUN.round_s < SIMULATED.round_s
    assert REAL_RUN.restart_penalty_s < SIMULATED.restart_penalty_s
    assert SIMULATED.aggregation_overhead_s == SIMULATED.restart_penalty_s  # a save and a load
