"""CPU seconds of each whole decision of a policy over the first rounds of a simulation.

    PYTHONPATH=. .venv/bin/python benchmarks/decision_cpu.py [--policy pollux] [--rounds 12]
        [--cluster pollux-64t4] [--workload pollux-6] [--seed 0]

Each decision is timed as the round loop calls it (``policy.decide``: Pollux's agent fits and
batch search, AFS's curves, hand-out and placement, Hadar's whole round), in CPU seconds of this
process (``time.process_time``: every thread's, so a BLAS pool spinning beside the decision
counts). The simulation stops after ``--rounds`` decisions. Prints the first decision, the median
and the maximum of the others, every decision's time, and a SHA-256 of the decisions (as
``decision_hash.py`` hashes them) to show a speed-up changed none.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from decision_hash import plan_text  # noqa: E402

from hadar import api  # noqa: E402
from hadar.policy import Policy, RoundContext, RoundPlan  # noqa: E402
from hadar.policy_options import policy_with_options  # noqa: E402


class _Enough(Exception):
    """Raised by the timing wrapper once it has timed the rounds asked for."""


def decision_times(
    policy_name: str, cluster: str, workload: str, seed: int, rounds: int
) -> tuple[list[float], str]:
    """CPU seconds of the first ``rounds`` decisions, and the SHA-256 of those decisions."""
    policy: Policy = policy_with_options(policy_name, None)
    decide = policy.decide
    times: list[float] = []
    digest = hashlib.sha256()

    def timed(ctx: RoundContext) -> RoundPlan:
        c0 = time.process_time()
        plan = decide(ctx)
        times.append(time.process_time() - c0)
        digest.update(plan_text(ctx, plan).encode())
        if len(times) >= rounds:
            raise _Enough
        return plan

    policy.decide = timed  # type: ignore[method-assign]
    with contextlib.suppress(_Enough):
        api.simulate(cluster, workload, policy, seed=seed)
    return times, digest.hexdigest()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--policy", default="pollux")
    ap.add_argument("--cluster", default="pollux-64t4")
    ap.add_argument("--workload", default="pollux-6")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rounds", type=int, default=12)
    args = ap.parse_args()
    times, digest = decision_times(args.policy, args.cluster, args.workload, args.seed, args.rounds)
    print_times(f"{args.policy} on {args.workload} / {args.cluster}", times, digest)


def print_times(label: str, times: list[float], digest: str) -> None:
    """The first decision's CPU seconds, the median and maximum of the others, then every one."""
    rest = times[1:] or times
    print(
        f"{label}: {len(times)} decisions, first {times[0]:.3f} CPU s, then median "
        f"{statistics.median(rest):.3f} max {max(rest):.3f}; decisions {digest[:16]}"
    )
    print("  " + " ".join(f"{t:.3f}" for t in times))


if __name__ == "__main__":
    main()
