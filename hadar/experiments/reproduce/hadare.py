"""``hadar reproduce hadare``: HadarE against Hadar and Gavel on the paper's physical mixes
(section VI-C/D), the existing HadarE policy as it stands."""

from __future__ import annotations

from hadar.experiments.paper import PAPER_AVERAGES, PAPER_POLICIES, TARGET_PAIR
from hadar.experiments.reproduce import Reproduction
from hadar.experiments.reproduce.physical import physical_rows

KEYS = tuple(k for k in PAPER_AVERAGES if f"_{TARGET_PAIR[0]}_vs_" in k)


def run(quick: bool, workers: int | None) -> Reproduction:
    return physical_rows(TARGET_PAIR[0], KEYS, PAPER_POLICIES, quick, workers)
