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
    """Smallest job first, only on GPUs of one type (a knob), first node with room."""

    name = NAME
    info = PolicyInfo(title="Toy one type", colour="#654321")
    config_class = OneTypeConfig

    def __init__(self, config: OneTypeConfig | None = None, **knobs: str) -> None:
        self.config = config or OneTypeConfig(**knobs)

    def decide(self, ctx: RoundContext) -> RoundPlan:
        gpu = self.config.gpu_type
        free = {n.name: n.gpus.get(gpu, 0) for n in ctx.cluster.nodes}
        out = []
        for s in sorted(ctx.jobs, key=lambda s: (s.job.num_gpus, s.job_id)):
            node = next((n for n, c in free.items() if c >= s.job.num_gpus), None)
            if node is not None:
                free[node] -= s.job.num_gpus
                out.append(Assignment(s.job_id, {node: {gpu: s.job.num_gpus}}))
        return RoundPlan(tuple(out))


@pytest.fixture
def toy() -> Iterator[type[OneTypePolicy]]:
    register_policy(OneTypePolicy)
    try:
        yield OneTypePolicy
    finally:
        unregister_policy(NAME)


def test_registered_it_simulates_a_workload_by_name(toy: type[OneTypePolicy]) -> None:
    sim = simulate("sim-60gpu", WORKLOAD, NAME, seed=2)
    assert sim.summary["policy"] == NAME
    assert sim.summary["completed"] == sim.summary["jobs"] == 24
    assert ((sim.jobs.step_sum - sim.jobs.target).abs() <= 1e-6 * sim.jobs.target).all()
    # its decisions are what ran: one GPU type only, never more GPUs of a node than it has
    assert set(sim.placements.gpu_type) == {"k80"}
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
