"""``hadar reproduce hadar``: Hadar against Gavel on the paper's physical mixes (section VI-C)."""

from __future__ import annotations

from hadar.experiments.paper import HADAR_PAIR
from hadar.experiments.reproduce import Reproduction
from hadar.experiments.reproduce.physical import physical_rows

KEYS = tuple(f"{m}_{HADAR_PAIR[0]}_vs_{HADAR_PAIR[1]}" for m in ("ttd", "jct", "cru"))


def run(quick: bool, workers: int | None) -> Reproduction:
    return physical_rows(HADAR_PAIR[0], KEYS, HADAR_PAIR, quick, workers)
