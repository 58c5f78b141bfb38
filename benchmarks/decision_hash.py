"""Hash every round's decisions of a policy, to show that a speed-up changed no decision.

    PYTHONPATH=. .venv/bin/python benchmarks/decision_hash.py [--policy hadar gavel]
        [--write benchmarks/decision_hashes.json | --check benchmarks/decision_hashes.json]

Scenarios: ``philly-480`` seeds 0-4 on ``sim-60gpu``, and the physical mixes ``M-1`` ...
``M-12`` on ``aws-5node`` and ``lab-5node`` (seed 0); for Pollux and AFS (policies of elastic
jobs), ``pollux-6`` on ``pollux-64t4`` (seed 0) instead; for Hadar and HadarE also ``pollux-1``
on ``pollux-hetero-64`` (their elastic jobs), and for Sia that scenario alone. Each run is ``hadar.api.simulate`` with the
policy's defaults (what ``hadar simulate --policy NAME`` runs); every round's assignments (job,
copy, placement, step budget, batch size, restart flag, the job a refill follows) go into one
SHA-256 per scenario, the round index with them. ``--check`` prints the scenarios whose hash differs and exits 1 if any
does; ``--write`` records the hashes.

Pollux's decisions go through its agents' fits (SciPy's L-BFGS-B), whose last bits depend on the
NumPy and SciPy builds installed: its hash recorded on 2026-11-28 no longer matched on 2026-11-30
even at the commit that recorded it, and was recorded again (NumPy 2.4.6, SciPy 1.17.1). A Pollux
hash that differs after a library upgrade is checked against the same code's hash first.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

from hadar import api
from hadar.policy import Policy, RoundContext, RoundPlan
from hadar.policy_options import policy_with_options

MIXES = tuple(f"M-{i}" for i in range(1, 13))
SCENARIOS: tuple[tuple[str, str, int], ...] = tuple(
    ("sim-60gpu", "philly-480", seed) for seed in range(5)
) + tuple((cluster, mix, 0) for cluster in ("aws-5node", "lab-5node") for mix in MIXES)
ELASTIC_SCENARIOS: tuple[tuple[str, str, int], ...] = (("pollux-64t4", "pollux-6", 0),)
HETEROGENEOUS_ELASTIC: tuple[tuple[str, str, int], ...] = (("pollux-hetero-64", "pollux-1", 0),)
"""Hadar and HadarE choose elastic jobs' GPU types, counts and batches (``adapt_elastic``): one
Pollux workload on the mixed cluster covers that path too."""
SCENARIOS_OF: dict[str, tuple[tuple[str, str, int], ...]] = {
    "pollux": ELASTIC_SCENARIOS,
    "afs": ELASTIC_SCENARIOS,
    "hadar": SCENARIOS + HETEROGENEOUS_ELASTIC,
    "hadare": SCENARIOS + HETEROGENEOUS_ELASTIC,
    "sia": HETEROGENEOUS_ELASTIC,
}
"""Policies hashed on other scenarios than :data:`SCENARIOS`."""


def plan_text(ctx: RoundContext, plan: RoundPlan) -> str:
    """One round's decisions as canonical text."""
    rows = sorted(
        (
            a.job_id,
            a.copy,
            tuple(sorted((n, tuple(sorted(g.items()))) for n, g in a.placement.items())),
            a.step_budget,
            a.batch_size,
            a.restart,
            *(() if a.after is None else (("after", a.after),)),  # refills; older hashes stand
        )
        for a in plan.assignments
    )
    return f"{ctx.round_index}:{rows!r}\n"


def scenario_hash(policy: str, cluster: str, workload: str, seed: int) -> tuple[str, int]:
    """SHA-256 of every round's decisions of ``policy`` on one scenario, and the round count."""
    chosen: Policy = policy_with_options(policy, None)
    digest = hashlib.sha256()
    decide: Callable[[RoundContext], RoundPlan] = chosen.decide
    rounds = 0

    def recording(ctx: RoundContext) -> RoundPlan:
        nonlocal rounds
        plan = decide(ctx)
        digest.update(plan_text(ctx, plan).encode())
        rounds += 1
        return plan

    chosen.decide = recording  # type: ignore[method-assign]
    api.simulate(cluster, workload, chosen, seed=seed)
    return digest.hexdigest(), rounds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--policy", nargs="+", default=["hadar", "gavel"])
    group = ap.add_mutually_exclusive_group()
    group.add_argument("--write", type=Path)
    group.add_argument("--check", type=Path)
    args = ap.parse_args()
    expected: dict[str, str] = json.loads(args.check.read_text()) if args.check else {}
    found: dict[str, str] = {}
    differ = []
    for policy in args.policy:
        for cluster, workload, seed in SCENARIOS_OF.get(policy, SCENARIOS):
            key = f"{policy} {cluster} {workload} seed {seed}"
            c0 = time.process_time()
            found[key], rounds = scenario_hash(policy, cluster, workload, seed)
            same = (
                ""
                if key not in expected
                else (" same" if expected[key] == found[key] else " DIFFERS")
            )
            print(
                f"{key:<42} {rounds:4d} rounds  {time.process_time() - c0:6.2f} CPU s  "
                f"{found[key][:16]}{same}",
                flush=True,
            )
            if same == " DIFFERS":
                differ.append(key)
    if args.write:
        old: dict[str, str] = json.loads(args.write.read_text()) if args.write.exists() else {}
        args.write.write_text(json.dumps({**old, **found}, indent=1, sort_keys=True) + "\n")
    if differ:
        print(f"decisions differ: {', '.join(differ)}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
