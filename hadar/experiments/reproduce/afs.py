"""``hadar reproduce afs``: AFS-L against Tiresias on the closest public equivalent of the AFS
paper's set-up: Pollux's workloads (160 jobs each drawn from the Microsoft cluster trace the AFS
paper's traces also come from, on 64 GPUs) with CoDDL's rescaling cost (4 ms per share change,
AFS paper section 4) for every job and both policies. The AFS paper's own traces are not public.

Also measured, to say why ours differs where it does: the same with Pollux's measured 30 s
re-allocation delay (what ``hadar simulate`` charges by default), and against Tiresias at its
own simulator's queue threshold instead of the Pollux paper's tuned one."""

from __future__ import annotations

from statistics import median

from baselines.tiresias import DEFAULT_THRESHOLD_GPU_S
from hadar.experiments.paper import AFS_CODDL_RESCALE_S, AFS_OVER_TIRESIAS, AFS_PAIR
from hadar.experiments.reproduce import AT_LEAST, Reproduction, Row
from hadar.experiments.reproduce.cells import SimCell, run_sims

CLUSTER = "pollux-64t4"
TOLERANCE = 0.10
"""Ours is within when the speed-up is at least 90 % of the paper's low end (1.9x)."""
WORKLOADS = tuple(f"pollux-{i}" for i in range(1, 9))
QUICK_WORKLOADS = ("pollux-1", "pollux-6")
OWN_THRESHOLD = (("threshold", f"{DEFAULT_THRESHOLD_GPU_S:g}"),)


def run(quick: bool, workers: int | None) -> Reproduction:
    afs, tiresias = AFS_PAIR
    workloads = QUICK_WORKLOADS if quick else WORKLOADS
    coddl = [SimCell(CLUSTER, w, p, AFS_CODDL_RESCALE_S) for w in workloads for p in AFS_PAIR]
    costly = [] if quick else [SimCell(CLUSTER, w, p) for w in workloads for p in AFS_PAIR]
    own = [SimCell(CLUSTER, w, tiresias, AFS_CODDL_RESCALE_S, OWN_THRESHOLD) for w in workloads]
    done = run_sims([*coddl, *costly, *own], workers)

    def ratio(w: str, restart: float | None, ref: tuple[tuple[str, str], ...] = ()) -> float:
        a = done[SimCell(CLUSTER, w, afs, restart)]["avg_jct_s"]
        return float(done[SimCell(CLUSTER, w, tiresias, restart, ref)]["avg_jct_s"] / a)

    low = AFS_OVER_TIRESIAS[0]
    rows = [
        Row(
            f"{tiresias} / {afs} average JCT, {w}, CoDDL rescaling",
            low,
            ratio(w, AFS_CODDL_RESCALE_S),
            TOLERANCE,
            unit="x",
            rule=AT_LEAST,
        )
        for w in workloads
    ]
    rows.append(
        Row(
            f"{tiresias} (own threshold {DEFAULT_THRESHOLD_GPU_S:,.0f} GPU-s) / {afs}, median of "
            f"{len(workloads)} workloads, CoDDL rescaling",
            low,
            median(ratio(w, AFS_CODDL_RESCALE_S, OWN_THRESHOLD) for w in workloads),
            TOLERANCE,
            unit="x",
            rule=AT_LEAST,
        )
    )
    if costly:
        rows.append(
            Row(
                f"{tiresias} / {afs}, median of {len(workloads)} workloads, Pollux's 30 s "
                "re-allocation delay",
                low,
                median(ratio(w, None) for w in workloads),
                TOLERANCE,
                unit="x",
                rule=AT_LEAST,
            )
        )
    notes = [
        f"{c.policy} on {c.workload} ({'CoDDL' if c.restart_s is not None else '30 s'} "
        f"rescaling): average JCT {done[c]['avg_jct_s']:,.0f} s, "
        f"{done[c]['restarts_per_job']:.2f} re-allocations per job"
        for c in (*coddl, *costly)
    ]
    setup = (
        f"{CLUSTER} (64 T4); Pollux's workloads {', '.join(workloads)} at load 1.0 (drawn from "
        "the Microsoft trace; the AFS paper's own traces are not public); every share change "
        f"costs {AFS_CODDL_RESCALE_S * 1000:g} ms (CoDDL); {done[coddl[0]]['round_s']:g} s "
        "rounds; Tiresias with the Pollux paper's queue threshold unless a row says otherwise; "
        f"paper: AFS {AFS_OVER_TIRESIAS[0]}-{AFS_OVER_TIRESIAS[1]}x better than Tiresias-L"
    )
    return Reproduction(afs, quick, setup, tuple(rows), tuple(notes))
