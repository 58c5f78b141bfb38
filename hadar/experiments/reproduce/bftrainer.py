"""``hadar reproduce bftrainer``: BFTrainer's MILP on HPO Trainers (ShuffleNet, 100 ImageNet
epochs each) over six-hour windows of Summit's idle nodes, its resource utilisation efficiency
U = A_e / A_s against Fig. 10's 80 % average (T_fwd 120 s, at most 10 Trainers at once, R_up
20 s, R_dw 5 s). Summit's own log is not public: the streams are the generator's Summit preset
(Table 1's rates thinned to the node count, Fig. 1's fragment lengths), one seed per window."""

from __future__ import annotations

from statistics import fmean

from hadar.experiments.paper import BFTRAINER_HPO_UTILISATION, MALLEABLE_SYSTEMS
from hadar.experiments.reproduce import Reproduction, Row
from hadar.experiments.reproduce.replays import TRAINERS, ReplayCell, run_replays

TOLERANCE = 0.10
WINDOW_H = 6.0
FULL = (512, 4)
"""Nodes and six-hour windows of the full run (a day of a 512-node share of Summit)."""
QUICK = (128, 1)


def run(quick: bool, workers: int | None) -> Reproduction:
    system = MALLEABLE_SYSTEMS[0]
    nodes, windows = QUICK if quick else FULL
    cells = [ReplayCell(system, "hpo", nodes, WINDOW_H, seed) for seed in range(windows)]
    done = run_replays(cells, workers)
    u = [done[c]["utilisation"] for c in cells]
    rows = [
        Row(
            f"U of the MILP on HPO, mean of {windows} six-hour window(s), {nodes} nodes",
            BFTRAINER_HPO_UTILISATION,
            fmean(u),
            TOLERANCE,
            unit="%",
        )
    ]
    notes = [
        f"window {c.seed}: U {100 * done[c]['utilisation']:.1f} %, "
        f"{done[c]['mean_idle_nodes']:.1f} idle nodes on average, "
        f"{done[c]['rescale_node_h_per_h']:.2f} node-h/h lost to rescaling, "
        f"{done[c]['completed']} Trainers completed"
        for c in cells
    ]
    setup = (
        f"{nodes} nodes whose idle share follows the Summit preset, {windows} window(s) of "
        f"{WINDOW_H:g} h (seeds 0-{windows - 1}); {TRAINERS} ShuffleNet Trainers of 1.28e8 "
        "samples queued, at most 10 at once; T_fwd 120 s, R_up 20 s, R_dw 5 s; U = samples "
        "processed over those of the same Trainers on the window's mean idle node count held static"
    )
    return Reproduction(system, quick, setup, tuple(rows), tuple(notes))
