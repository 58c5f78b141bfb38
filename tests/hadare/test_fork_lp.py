"""The fluid fork LP (``hadare/fork_lp.py``) offers idle cells by comparative advantage."""

from __future__ import annotations

import numpy as np

from hadare.fork_lp import ForkDemand, fork_preferences


def _rates(t4: float, k80: float) -> np.ndarray:
    """Rates on the idle cells of AWS M-2's round 0: node 0 a T4, nodes 1-2 K80s ([node, type]:
    type 0 = T4, 1 = K80)."""
    return np.array([[t4, 0.0], [0.0, k80], [0.0, k80]])


FREE = np.array([[1, 0], [0, 1], [0, 1]])


def test_each_idle_cell_goes_first_to_the_job_that_gains_most_from_it_relatively():
    # AWS M-2 (Gavel's measured rates): the Transformer runs 2.5x faster on a T4 than on a K80,
    # the MM job 1.6x; the base decision already runs each on one GPU (a V100, a T4)
    transformer = ForkDemand(0, 13_590.0, 8.62, 1, _rates(4.45, 1.75))
    mm = ForkDemand(1, 40_000.0, 19.73, 1, _rates(19.73, 12.63))
    order = fork_preferences([transformer, mm], FREE)
    first = {}
    for job, node, gpu_type in order:
        first.setdefault((node, gpu_type), job)
    assert first == {(0, 0): 0, (1, 1): 1, (2, 1): 1}
    # the greedy rule it complements (the job finishing last, MM, takes its fastest idle GPU,
    # the T4) would do the opposite: the LP is what tells them apart
    assert 40_000.0 / 19.73 > 13_590.0 / 8.62


def test_identical_jobs_and_no_idle_cell_give_no_surprises():
    same = [ForkDemand(j, 1_000.0, 1.0, 1, _rates(1.0, 1.0)) for j in range(2)]
    order = fork_preferences(same, FREE)
    assert {node for _, node, _ in order} <= {0, 1, 2}
    assert fork_preferences(same, np.zeros_like(FREE)) == []
    assert fork_preferences([], FREE) == []
    # a gang wider than any idle cell fits nowhere
    wide = ForkDemand(0, 1_000.0, 1.0, 2, _rates(1.0, 1.0))
    assert fork_preferences([wide], FREE) == []


def test_the_preferences_do_not_depend_on_the_order_of_the_jobs():
    a = ForkDemand(0, 13_590.0, 8.62, 1, _rates(4.45, 1.75))
    b = ForkDemand(1, 40_000.0, 19.73, 1, _rates(19.73, 12.63))
    assert fork_preferences([a, b], FREE) == fork_preferences([b, a], FREE)
