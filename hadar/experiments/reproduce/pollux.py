"""``hadar reproduce pollux``: Pollux and Tiresias+TunedJobs on Pollux's workloads with the
Pollux paper's set-up (16 nodes x 4 T4, 60 s rounds, Tiresias' 16 GPU-hour queue threshold,
30 s re-allocation delay: the ``pollux-N`` family's defaults, no knobs), against the official
simulator's published averages."""

from __future__ import annotations

from hadar.experiments.paper import (
    OPTIMUS_ORACLE,
    POLLUX_ARTIFACT_AVG_JCT_S,
    POLLUX_OPTIMUS_ORACLE_W6_S,
    POLLUX_POLICIES,
)
from hadar.experiments.reproduce import Reproduction, Row
from hadar.experiments.reproduce.cells import SimCell, run_sims

CLUSTER = "pollux-64t4"
TOLERANCE = 0.10
"""Relative tolerance of a simulated average JCT against the official simulator's."""
HEADLINE = "pollux-6"
QUICK = {POLLUX_POLICIES[0]: ("pollux-6-load-0.5",), POLLUX_POLICIES[1]: (HEADLINE,)}
"""The quick version: Pollux at half load (80 jobs) and Tiresias on workload 6."""


def _figure(policy: str, workload: str) -> str:
    return f"{policy} average JCT, {workload}"


def run(quick: bool, workers: int | None) -> Reproduction:
    todo = QUICK if quick else {p: tuple(POLLUX_ARTIFACT_AVG_JCT_S[p]) for p in POLLUX_POLICIES}
    cells = [SimCell(CLUSTER, w, p) for p, ws in todo.items() for w in ws]
    extra = [] if quick else [SimCell(CLUSTER, HEADLINE, OPTIMUS_ORACLE)]
    done = run_sims([*cells, *extra], workers)
    rows = [
        Row(
            _figure(c.policy, c.workload),
            POLLUX_ARTIFACT_AVG_JCT_S[c.policy][c.workload],
            done[c]["avg_jct_s"],
            TOLERANCE,
        )
        for c in cells
    ]
    notes = []
    pollux, tiresias = POLLUX_POLICIES
    if not quick:
        p6, t6 = (done[SimCell(CLUSTER, HEADLINE, p)]["avg_jct_s"] for p in POLLUX_POLICIES)
        paper = POLLUX_ARTIFACT_AVG_JCT_S
        rows.append(
            Row(
                f"{tiresias} / {pollux} average JCT, {HEADLINE}",
                paper[tiresias][HEADLINE] / paper[pollux][HEADLINE],
                t6 / p6,
                TOLERANCE,
                unit="x",
            )
        )
        optimus = done[SimCell(CLUSTER, HEADLINE, OPTIMUS_ORACLE)]["avg_jct_s"]
        rows.append(
            Row(
                f"{OPTIMUS_ORACLE} (Optimus+Oracle+TunedJobs) average JCT, {HEADLINE}",
                POLLUX_OPTIMUS_ORACLE_W6_S,
                optimus,
                TOLERANCE,
            )
        )
    for c in (*cells, *extra):
        apps = ", ".join(f"{a} {v:,.0f} s" for a, v in done[c]["app_jct_s"].items())
        notes.append(f"{c.policy} on {c.workload}, average JCT by application: {apps}")
    setup = (
        f"{CLUSTER} (16 nodes x 4 T4); Pollux's workloads (160 jobs at load 1.0, 80 at 0.5) with "
        f"the pollux-N family's set-up: {done[cells[0]]['round_s']:g} s rounds for every policy, "
        "Tiresias+TunedJobs with the artifact's 16 GPU-hour queue threshold, 30 s re-allocation "
        "delay per job; paper figures: the official simulator's published averages"
    )
    return Reproduction(pollux, quick, setup, tuple(rows), tuple(notes))
