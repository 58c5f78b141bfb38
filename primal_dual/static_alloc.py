"""FIND_ALLOC for one job class at prices that do not depend on the free state.

The round LP's prices (and the zero prices of backfill and upgrades) are fixed for a whole round,
so everything FIND_ALLOC sorts by price can be sorted once per (job class, round) instead of once
per DP state: the runnable cells in price order, and each node's cells in price order. What is
left per state is filtering those lists by the GPUs still free. The placements, rates, costs and
their order are exactly those of :func:`primal_dual.find_alloc._candidates_small` (property-tested
in ``tests/primal_dual/test_static_alloc.py``), including the float summation order of the costs.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import itemgetter

import numpy as np

from primal_dual.find_alloc import (
    PRUNE_ABOVE_NODES,
    SMALL_CELLS,
    Candidate,
    JobRequest,
    SparseCandidate,
    _candidates_small,
)


class OneGpuCandidate(SparseCandidate):
    """One GPU on flat cell ``index``."""

    def __init__(self, shape: tuple[int, int], index: int, rate: float, unit_cost: float) -> None:
        super().__init__(shape, ([index], [1]), rate, unit_cost, 1)


class StaticPriceAllocator:
    """FIND_ALLOC's candidates of one request at fixed ``price[node, type]``, for any free state."""

    def __init__(self, req: JobRequest, price: np.ndarray, capacity: np.ndarray) -> None:
        n_nodes, n_types = req.rates_cons.shape
        self.shape = (n_nodes, n_types)
        self.w = req.num_gpus
        self._req, self._price = req, price
        self._single: dict[int, Candidate] = {}  # W = 1: the candidate on each cell
        flat_rc = req.rates_cons.ravel()
        runnable = flat_rc > 0
        cells = np.flatnonzero(runnable & (capacity.ravel() > 0))
        # the runnable cells cheapest first, ties by position
        ranked = cells[np.lexsort((cells, price.ravel()[cells]))]
        self._ranked = ranked
        self._ranked_rates = flat_rc[ranked]
        self._no_capacity_cells = np.flatnonzero(runnable & (capacity.ravel() <= 0))
        self._cursors: dict[object, list[int]] = {}  # lineage -> per rate level, a scan position
        self._last_found: dict[object, list[Candidate]] = {}
        """Per lineage, the candidates of its last call (they change only when a cursor moves)."""
        self._levels: list[tuple[float, list[int], list[int]]] | None = None
        if n_nodes * n_types > SMALL_CELLS or n_nodes > PRUNE_ABOVE_NODES:
            return  # large clusters: only single-GPU requests, vectorised (single_gpu_array)
        self._rc = req.rates_cons.tolist()
        self._ru = req.rates_unc.tolist()
        self._p = price.tolist()
        # (node, type, flat index, rate) per runnable cell, cheapest first
        self._order = [
            (int(i) // n_types, int(i) % n_types, int(i), r)
            for i, r in zip(ranked.tolist(), self._ranked_rates.tolist(), strict=True)
        ]
        no_capacity = self._no_capacity_cells.tolist()
        self._no_capacity = itemgetter(*no_capacity, no_capacity[0]) if no_capacity else None
        """Runnable cells with no capacity (never free on a valid state), as one tuple lookup."""

    def candidates(self, flat_free: Sequence[int]) -> list[Candidate]:
        """All distinct candidates on the free GPUs ``flat_free`` (``free.ravel()`` as a list or tuple)."""
        if self._no_capacity is not None and any(
            self._no_capacity(flat_free)
        ):  # beyond capacity: no shortcut
            return _candidates_small(
                self._req, np.array(flat_free).reshape(self.shape), self._price
            )
        if self.w == 1:
            return self._single_gpu(flat_free)
        w = self.w
        live = [c for c in self._order if flat_free[c[2]] > 0]
        if sum(flat_free[c[2]] for c in live) < w:
            return []
        out: list[Candidate] = []
        seen: set[tuple[tuple[int, int, int], ...]] = set()
        for level in sorted({c[3] for c in live}, reverse=True):
            order = [c for c in live if c[3] >= level]
            per_node: dict[int, int] = {}
            on_node: dict[
                int, list[tuple[int, int, int, float]]
            ] = {}  # each node's cells, in price order
            for c in order:
                h = c[0]
                per_node[h] = per_node.get(h, 0) + flat_free[c[2]]
                on_node.setdefault(h, []).append(c)
            if sum(per_node.values()) < w:
                continue
            fits = sorted(h for h, n in per_node.items() if n >= w)
            if fits:  # (a) consolidated on the cheapest node (first node on ties)
                best_h, best_cost = -1, 0.0
                for h in fits:
                    need, cost = w, 0.0
                    for _, k, i, _ in on_node[h]:
                        t = min(flat_free[i], need)
                        cost += self._p[h][k] * t
                        need -= t
                        if need == 0:
                            break
                    if best_h < 0 or cost < best_cost:
                        best_h, best_cost = h, cost
                self._add(on_node[best_h], flat_free, seen, out)
            else:  # (b) fewest nodes: the nodes with the most eligible GPUs first
                chosen, total = set(), 0
                for h in sorted(per_node, key=lambda h: (-per_node[h], h)):
                    chosen.add(h)
                    total += per_node[h]
                    if total >= w:
                        break
                self._add([c for c in order if c[0] in chosen], flat_free, seen, out)
            self._add(order, flat_free, seen, out)  # (c) the W cheapest eligible GPUs anywhere
        return out

    def _single_gpu(self, flat_free: Sequence[int]) -> list[Candidate]:
        """W = 1: each level's candidates are the cheapest eligible cell (the consolidated and the
        cheapest-anywhere placements coincide), i.e. the cells whose rate exceeds that of every
        cheaper live cell, fastest level first."""
        records, top = [], 0.0
        for c in self._order:
            if c[3] > top and flat_free[c[2]] > 0:
                records.append(c)
                top = c[3]
        return [self._on_cell(i, rate) for _, _, i, rate in reversed(records)]

    def single_gpu_array(self, free: np.ndarray) -> list[Candidate] | None:
        """:meth:`_single_gpu` vectorised, for large clusters (same candidates as
        :func:`~primal_dual.find_alloc.candidate_allocations`); None where ``free`` has GPUs
        beyond capacity (no shortcut there)."""
        assert self.w == 1
        flat = free.ravel()
        if flat[self._no_capacity_cells].any():
            return None
        rates = np.where(flat[self._ranked] > 0, self._ranked_rates, 0.0)
        best_before = np.maximum.accumulate(rates)
        records = (
            np.flatnonzero(rates[1:] > best_before[:-1]) + 1 if rates.size else rates.astype(int)
        )
        if rates.size and rates[0] > 0:
            records = np.concatenate([[0], records])
        return [
            self._on_cell(int(self._ranked[r]), float(self._ranked_rates[r])) for r in records[::-1]
        ]

    def single_gpu_descending(self, free: np.ndarray, lineage: object) -> list[Candidate] | None:
        """:meth:`single_gpu_array` for a free state that only loses GPUs between calls with the
        same ``lineage`` (a greedy pass committing placements one after another): per rate level a
        cursor skips the cells found full before, so a call costs the levels, not the cells.
        Same candidates; None where ``free`` has GPUs beyond capacity."""
        assert self.w == 1
        flat = free.ravel()
        cursor = self._cursors.get(lineage)
        if cursor is None:  # GPUs beyond capacity stay so (or vanish) as the state loses GPUs
            if flat[self._no_capacity_cells].any():
                return None
            cursor = self._cursors[lineage] = [0] * len(self._rate_levels())
        moved = False
        for lv, (_, _, cells) in enumerate(self._rate_levels()):
            at, end = cursor[lv], len(cells)
            while at < end and flat[cells[at]] <= 0:
                at += 1
                moved = True
            cursor[lv] = at
        last = self._last_found.get(lineage)
        if last is not None and not moved:  # the same first live cells: the same candidates
            return last
        firsts = []  # (rank, rate, cell) of each rate level's first live cell
        for (rate, positions, cells), at in zip(self._rate_levels(), cursor, strict=True):
            if at < len(cells):
                firsts.append((positions[at], rate, cells[at]))
        records, top = [], 0.0  # a level's first live cell is a record if faster than all before
        for _, rate, cell in sorted(firsts):
            if rate > top:
                records.append((cell, rate))
                top = rate
        found = [self._on_cell(cell, rate) for cell, rate in reversed(records)]
        self._last_found[lineage] = found
        return found

    def _rate_levels(self) -> list[tuple[float, list[int], list[int]]]:
        """Per distinct rate, in order of first appearance: its cells' ranks and flat indices."""
        if self._levels is None:  # per rate: its cells' ranks and flat indices, in rank order
            by_rate: dict[float, tuple[list[int], list[int]]] = {}
            ranked = self._ranked.tolist()
            for pos, rate in enumerate(self._ranked_rates.tolist()):
                level = by_rate.setdefault(rate, ([], []))
                level[0].append(pos)
                level[1].append(ranked[pos])
            self._levels = [(rate, pos, cells) for rate, (pos, cells) in by_rate.items()]
        return self._levels

    def _on_cell(self, i: int, rate: float) -> Candidate:
        """The single-GPU placement on flat cell ``i`` (shared by every state: read-only)."""
        cand = self._single.get(i)
        if cand is None:
            cost = float(sum([float(self._price.flat[i]) * 1]))
            cand = self._single[i] = OneGpuCandidate(self.shape, i, float(rate), cost)
        return cand

    def _add(
        self,
        cells: list[tuple[int, int, int, float]],
        flat_free: Sequence[int],
        seen: set[tuple[tuple[int, int, int], ...]],
        out: list[Candidate],
    ) -> None:
        """Take W GPUs from ``cells`` in order; append the placement unless seen or of rate 0."""
        need, taken = self.w, []
        for h, k, i, _ in cells:
            t = min(flat_free[i], need)
            taken.append((h, k, t))
            need -= t
            if need == 0:
                break
        key = tuple(sorted(taken))
        if key in seen:
            return
        seen.add(key)
        nodes = len({h for h, _, _ in key})
        rates = self._rc if nodes == 1 else self._ru
        rate = min(rates[h][k] for h, k, _ in key)
        if rate <= 0:
            return
        p = self._p
        cost = float(sum(p[h][k] * c for h, k, c in key))
        # ``key`` is sorted by node, then type: its flat indices ascend
        n_types = self.shape[1]
        used = [(h * n_types + k, c) for h, k, c in key if c > 0]
        placed = ([i for i, _ in used], [c for _, c in used])
        out.append(SparseCandidate(self.shape, placed, float(rate), cost, nodes))
