"""The round loop holds Python's cyclic collector off while any policy decides (decision times
compare the policies' own work) and gives it back between decisions."""

from __future__ import annotations

import gc

from hadar.api import simulate
from hadar.policy import Policy, RoundContext, RoundPlan
from hadar.policy_options import policy_with_options


class _Recording(Policy):
    """Gavel's decisions, recording whether the collector ran while it decided."""

    name = "recording"

    def __init__(self, inner: Policy) -> None:
        self.inner = inner
        self.enabled_while_deciding: list[bool] = []

    def decide(self, ctx: RoundContext) -> RoundPlan:
        self.enabled_while_deciding.append(gc.isenabled())
        return self.inner.decide(ctx)


def test_the_collector_is_off_while_a_policy_decides_and_on_after() -> None:
    assert gc.isenabled()
    policy = _Recording(policy_with_options("gavel", {}))
    sim = simulate("sim-60gpu", "philly-24", policy)
    assert sim.summary["completed"] == 24
    assert policy.enabled_while_deciding and not any(policy.enabled_while_deciding)
    assert gc.isenabled()
