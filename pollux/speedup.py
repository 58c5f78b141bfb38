"""SPEEDUP tables (Pollux Eq. 15): a job's best goodput by GPU count over its fair-share goodput.

The goodput model (``goodput.GoodputModel.optimize``, the best batch size per placement, or a
throughput-only model for jobs without efficiency data) is passed in as a function of
(nodes, GPUs), so these tables do not depend on how it was fitted.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

BestGoodput = Callable[[np.ndarray, np.ndarray], np.ndarray]
"""(num_nodes, num_gpus) arrays -> the best goodput (samples at M0 per second) of each."""


def fair_goodput(best_goodput: BestGoodput, fair_gpus: int, node_size: int) -> float:
    """Best goodput with ``fair_gpus`` GPUs on as few nodes of ``node_size`` as possible."""
    nodes = -(-fair_gpus // max(node_size, 1))
    return float(best_goodput(np.array([nodes]), np.array([fair_gpus]))[0])


def speedup_row(
    best_goodput: BestGoodput,
    base: float,
    max_k: int,
    width: int,
    node_size: int,
    min_k: int = 1,
) -> tuple[np.ndarray, np.ndarray]:
    """``(local, spread)``, each ``[width]``: goodput with K GPUs on one node / on several nodes
    over ``base`` (the fair-share goodput); NaN where K is outside ``[min_k, max_k]`` or the
    placement impossible (more than a node on one node, one GPU on two nodes); 0 at K = 0."""
    local = np.full(width, np.nan)
    spread = np.full(width, np.nan)
    local[0] = spread[0] = 0.0
    k = np.arange(width)
    ks = k[(k >= max(min_k, 1)) & (k <= max_k)]
    if len(ks) == 0 or base <= 0:
        return local, spread
    on_node = ks[ks <= node_size]
    if len(on_node):
        local[on_node] = best_goodput(np.ones_like(on_node), on_node) / base
    multi = ks[ks >= 2]
    if len(multi):
        spread[multi] = best_goodput(np.full_like(multi, 2), multi) / base
    return local, spread
