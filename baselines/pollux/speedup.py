"""SPEEDUP tables (Pollux Eq. 15): a job's best goodput by GPU count over its fair-share goodput.

The goodput model (``goodput.GoodputModel.optimize``, the best batch size per placement) is
passed in as a function of (nodes, GPUs), so these tables do not depend on how it was fitted.
A job whose throughput has never been measured is assumed to scale perfectly (Pollux's
prior-driven exploration, §4.1): speedup K / fair share.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

BestGoodput = Callable[[np.ndarray, np.ndarray], np.ndarray]
"""(num_nodes, num_gpus) arrays -> the best goodput (samples at M0 per second) of each."""


def speedup_row(
    best_goodput: BestGoodput | None,
    max_k: int,
    width: int,
    node_size: int,
    fair_gpus: int,
    min_k: int = 1,
    scale: float = 1.0,
) -> tuple[np.ndarray, np.ndarray]:
    """``(local, spread)``, each ``[width]``: speedup with K GPUs on one node / on several nodes
    (NaN where K is outside ``[min_k, max_k]`` or the placement impossible; 0 at K = 0).

    ``scale`` multiplies the goodput (e.g. a slower GPU type's relative speed); the fair share
    is ``fair_gpus`` GPUs on as few nodes as possible, at scale 1.
    """
    k = np.arange(width)
    local = np.full(width, np.nan)
    spread = np.full(width, np.nan)
    local[0] = spread[0] = 0.0
    ks = k[(k >= max(min_k, 1)) & (k <= max_k)]
    if len(ks) == 0:
        return local, spread
    if best_goodput is None:
        local_vals = ks / fair_gpus * scale
        spread_vals = local_vals
    else:
        fair_nodes = -(-fair_gpus // max(node_size, 1))
        base = float(best_goodput(np.array([fair_nodes]), np.array([fair_gpus]))[0])
        if base <= 0:
            return local, spread
        local_vals = best_goodput(np.ones_like(ks), ks) / base * scale
        spread_vals = best_goodput(np.full_like(ks, 2), ks) / base * scale
    on_node = ks <= node_size
    local[ks[on_node]] = local_vals[on_node]
    multi = ks >= 2
    spread[ks[multi]] = spread_vals[multi]
    return local, spread
