"""On a one-job mix HadarE's schedule is the best of every forking schedule with the same rounds
and overheads (``benchmarks/fork_exact_one_job.py`` plays them all)."""

from __future__ import annotations

from hadar.api import simulate
from tests.fixtures.script_modules import load_script


def test_hadare_finishes_lab_m1_as_soon_as_any_node_sets_can() -> None:
    exact = load_script("benchmarks/fork_exact_one_job.py")
    best, plan = exact.exact("lab-5node", "M-1", 1, "goodput")
    hadare = simulate("lab-5node", "M-1", "hadare").summary["ttd_s"]
    assert hadare <= best + 1e-6
    # the search is not trivial: the job alone on its fastest node takes longer, and the best
    # set leaves the slowest GPU (the T400) out under the goodput accounting
    alone = simulate("lab-5node", "M-1", exact.NodeSets([("rtx3090",)])).summary["ttd_s"]
    assert alone > 1.2 * best
    assert len(plan) == 1 and "t400" not in plan[0] and len(plan[0]) == 4
