"""AFS decision time per churn event: the AFS-L hand-out (``afs/share.py``) against
Algorithm 1 as written, and the whole ``afs`` decision on Pollux's workload.

1. Hand-out only, synthetic jobs: each job has a random maximum of 1-64 GPUs, a sublinear curve
   ``p(g) = b g / (1 + a (g - 1))`` (a in [0.02, 0.5]) and log-normal remaining work; every job
   has arrived and none holds GPUs (the worst case: the whole cluster is handed out). Sizes: 64
   GPUs / 160 jobs (Pollux's testbed and workloads) and 8,192 GPUs / 10,000 jobs. Median of
   ``--repeat`` instances; Algorithm 1 as written (O(GPUs x jobs)) timed at the small size, and
   checked to give the same shares.
2. The ``afs`` policy's first decision on ``pollux-6`` (160 jobs, all arrived, 64 T4s): throughput
   curves from the traces plus the hand-out plus placement (skipped when the workload is not
   available in this installation).

Times are CPU seconds of this process (``time.process_time``).

    .venv/bin/python benchmarks/bench_afs.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from afs.share import ShareJob, afs_shares, afs_shares_literal


def synthetic(n: int, seed: int) -> list[ShareJob]:
    rng = np.random.default_rng(seed)
    jobs = []
    for _ in range(n):
        cap = int(rng.choice([1, 2, 4, 8, 16, 32, 64]))
        a, base = rng.uniform(0.02, 0.5), rng.uniform(0.5, 5.0)
        g = np.arange(cap + 1)
        curve = base * g / (1 + a * np.clip(g - 1, 0, None))
        jobs.append(ShareJob(float(rng.lognormal(8, 2)) + 1.0, (tuple(map(float, curve)),)))
    return jobs


T = TypeVar("T")


def timed(fn: Callable[..., T], *args: Any) -> tuple[float, T]:
    t0 = time.process_time()  # CPU seconds: the machine is shared, wall time depends on load
    out = fn(*args)
    return time.process_time() - t0, out


def hand_out(repeat: int) -> None:
    print("| GPUs | jobs | AFS-L hand-out (median) | Algorithm 1 as written | same shares |")
    print("|---:|---:|---:|---:|:---:|")
    for gpus, n in ((64, 160), (8192, 10000)):
        fast, literal, same = [], [], True
        for seed in range(repeat):
            jobs = synthetic(n, seed)
            dt, shares = timed(afs_shares, jobs, [gpus])
            fast.append(dt)
            if gpus <= 64:
                dl, ref = timed(afs_shares_literal, jobs, [gpus])
                literal.append(dl)
                same &= ref == shares
        lit = f"{statistics.median(literal) * 1e3:.1f} ms" if literal else "not run"
        ok = ("yes" if same else "NO") if literal else "-"
        print(f"| {gpus:,} | {n:,} | {statistics.median(fast) * 1e3:.1f} ms | {lit} | {ok} |")


def policy_decision(repeat: int) -> None:
    from hadar.core.errors import InputError
    from hadar.core.jobs import JobStatus
    from hadar.policy import RoundContext, make_policy
    from hadar.scenario import load_scenario

    try:
        cluster, jobs, throughput = load_scenario("pollux-64t4", "pollux-6")
    except InputError as exc:
        print(f"\n(afs on pollux-6 skipped: {exc})")
        return
    statuses = tuple(JobStatus(j, j.total_steps) for j in jobs)
    cold, warm = [], []
    for _ in range(repeat):
        policy = make_policy("afs")
        ctx = RoundContext(0.0, 0, 60.0, cluster, statuses, {}, throughput)
        dt, plan = timed(policy.decide, ctx)
        cold.append(dt)
        # The next churn event: one job completed, the others 10 % further, plan running.
        later = tuple(JobStatus(s.job, 0.9 * s.remaining_steps) for s in statuses[1:])
        nxt = RoundContext(60.0, 1, 60.0, cluster, later, plan.allocation(), throughput)
        dt, _ = timed(policy.decide, nxt)
        warm.append(dt)
    print(
        f"\nafs on pollux-6 (160 jobs, 64 T4s), whole decision (curves, hand-out, placement): "
        f"first {statistics.median(cold) * 1e3:.0f} ms (curves computed), next churn event "
        f"{statistics.median(warm) * 1e3:.0f} ms (curve shapes cached); median of {repeat}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    hand_out(args.repeat)
    policy_decision(args.repeat)


if __name__ == "__main__":
    main()
