"""A new policy is one module and one decorator (CONTRIBUTING.md, "Where new things go"): the
policy below lives in this test only. Registered, it simulates a small workload by name through
the public API, its decisions are what the run records, the run is deterministic; taken out
again, its name is unknown. No product module names it."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest

from hadar.api import simulate
from hadar.core.errors import InputError
from hadar.policy import (
    POLICY_REGISTRY,
    Assignment,
    Policy,
    PolicyInfo,
    RoundContext,
    RoundPlan,
    register_policy,
    unregister_policy,
)

ROOT = Path(__file__).resolve().parents[2]
NAME = "toy-one-type"
WORKLOAD = "philly-24"


@dataclass(frozen=True)
class OneTypeConfig:
    gpu_type: str = "k80"
    """The only GPU type the policy places jobs on."""


class OneTypePolicy(Policy):
    """One job per node, the smallest first, only on GPUs of one type (a knob)."""

    name = NAME
    info = PolicyInfo(title="Toy one type", colour="#654321")
    config_class = OneTypeConfig

    def __init__(self, config: OneTypeConfig | None = None, **knobs: str) -> None:
        self.config = config or OneTypeConfig(**knobs)

    def decide(self, ctx: RoundContext) -> RoundPlan:
        gpu = self.config.gpu_type
        waiting = sorted(ctx.jobs, key=lambda s: (s.job.num_gpus, s.job_id))
        plan = []
        for node in (n for n in ctx.cluster.nodes if n.gpus.get(gpu, 0) > 0):
            fits = next((s for s in waiting if s.job.num_gpus <= node.gpus[gpu]), None)
            if fits is not None:  # one job per node: the smallest waiting one that fits
                waiting.remove(fits)
                plan.append(Assignment(fits.job_id, {node.name: {gpu: fits.job.num_gpus}}))
        return RoundPlan(tuple(plan))


@pytest.fixture
def toy() -> Iterator[type[OneTypePolicy]]:
    yield register_policy(OneTypePolicy)
    unregister_policy(NAME)  # teardown runs whether the test passed or not


def test_registered_it_simulates_a_workload_by_name(toy: type[OneTypePolicy]) -> None:
    sim = simulate("sim-60gpu", WORKLOAD, NAME, seed=2)
    assert sim.summary["policy"] == NAME
    assert sim.summary["completed"] == sim.summary["jobs"] == 24
    assert ((sim.jobs.step_sum - sim.jobs.target).abs() <= 1e-6 * sim.jobs.target).all()
    # its decisions are what ran: one GPU type only, one job per node and round
    assert set(sim.placements.gpu_type) == {"k80"}
    assert (sim.placements.groupby(["round", "node"]).job.nunique() == 1).all()
    again = simulate("sim-60gpu", WORKLOAD, NAME, seed=2)
    pd.testing.assert_frame_equal(sim.jobs, again.jobs)


def test_its_knob_reaches_it_by_name(toy: type[OneTypePolicy]) -> None:
    sim = simulate("sim-60gpu", WORKLOAD, NAME, seed=2, policy_options={"gpu_type": "v100"})
    assert set(sim.placements.gpu_type) == {"v100"}
    assert sim.summary["completed"] == 24


def test_unregistered_its_name_is_unknown(toy: type[OneTypePolicy]) -> None:
    assert NAME in POLICY_REGISTRY
    unregister_policy(NAME)
    assert NAME not in POLICY_REGISTRY
    with pytest.raises(InputError, match=f"unknown policy '{NAME}'"):
        simulate("sim-60gpu", WORKLOAD, NAME, seed=2)


def test_no_product_module_names_it() -> None:
    for package in ("hadar", "hadare", "baselines", "pollux", "afs", "bftrainer", "malletrain"):
        for path in (ROOT / package).rglob("*.py"):
            assert NAME not in path.read_text(), path
