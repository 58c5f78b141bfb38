"""Algorithm 2: a dynamic programme over the queue choosing which jobs to admit this round.

State = (index of the next job, free GPUs ``[node, type]``). For each job the DP either skips it
or takes FIND_ALLOC's best allocation if its payoff is positive, then recurses on the reduced
free state; prices follow the state (Eq. 5), so a job taken earlier raises later jobs' costs.
It runs forward over the queue, merging paths that reach the same free state (memoisation) and
returns the subset with the highest total payoff (ties: more jobs, then the earlier path).

Polynomial bound: at most ``beam`` states survive each step (the best by total payoff), so the
work is O(|Q| * beam * cost(FIND_ALLOC)) with FIND_ALLOC O(levels * nodes * types). When no
state is ever dropped the result equals brute force over all subsets; ``DPResult.exact`` says
whether that held.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import TypeAlias, TypeVar

import numpy as np

from primal_dual.find_alloc import (
    PRUNE_ABOVE_NODES,
    SMALL_CELLS,
    Candidate,
    JobRequest,
    best_candidate,
    candidate_allocations,
    kept_candidate,
    kept_candidate_on_cells,
)
from primal_dual.prices import PriceBounds, price_matrix
from primal_dual.static_alloc import StaticPriceAllocator


@dataclass(frozen=True)
class QueueEntry:
    """One job of the queue as the DP sees it.

    ``utility(rate)`` is U_j at the completion time a rate implies; ``hold_rounds(rate)``
    multiplies the per-round price cost (the rounds the job will hold its GPUs, or 1).
    Entries with equal ``class_key`` have identical requests, so their candidates are shared.
    """

    key: Hashable
    request: JobRequest
    class_key: Hashable
    utility: Callable[[float], float]
    hold_rounds: Callable[[float], float]
    keep: np.ndarray | None = None
    """A running job's current placement ``[node, type]``: offered as an extra candidate that pays
    no checkpoint-restart (``kept_utility``) whenever its GPUs are free."""
    kept_utility: Callable[[float], float] | None = None
    move_min_rate: float = 0.0
    """While the kept placement is free, another placement is offered only if it is at least this
    fast (a move must be worth its restart); once the kept GPUs are taken, any placement is."""

    def payoff(self, cand: Candidate) -> float:
        u = (
            self.kept_utility(cand.rate)
            if cand.kept and self.kept_utility is not None
            else self.utility(cand.rate)
        )
        if self.hold_rounds is one_round:  # ``x * 1.0`` is ``x``: the same float, one call fewer
            return u - cand.unit_cost
        return u - cand.unit_cost * self.hold_rounds(cand.rate)


def one_round(rate: float) -> float:
    """``hold_rounds`` of a job whose price is charged for one round whatever its rate."""
    return 1.0


@dataclass(frozen=True)
class DPResult:
    chosen: tuple[tuple[int, Candidate, float], ...]
    """(entry index, allocation, payoff) in queue order."""
    total_payoff: float
    exact: bool
    states: int
    peak_frontier: int


MEMO_STATE_BYTES = 256 * 2**20
"""Free states a :class:`CandidateCache` remembers: as many as fit in this many bytes (at least 16);
forgetting one costs time (its candidates are rebuilt if it recurs), never a different result."""

_V = TypeVar("_V")
StateKey = Hashable
"""A free state's memo key: its ``tobytes()``, or a :meth:`CandidateCache.fresh_key`."""


def _remember(memo: dict[StateKey, _V], key: StateKey, value: _V, limit: int) -> _V:
    """``memo[key] = value``, forgetting the oldest entries beyond ``limit``."""
    memo[key] = value
    while len(memo) > limit:
        del memo[next(iter(memo))]
    return value


class CandidateCache:
    """Memo of FIND_ALLOC candidates by (job class, free state); prices depend only on the state."""

    def __init__(
        self,
        capacity: np.ndarray,
        bounds: PriceBounds | None,
        fixed_prices: np.ndarray | None = None,
    ) -> None:
        """Prices follow Eq. 5 from ``bounds``; or are ``fixed_prices[node, type]`` whatever the
        state (e.g. the round LP's dual prices); or are 0 with neither."""
        self.capacity = capacity
        self.bounds = bounds
        self.fixed = None if fixed_prices is None else np.where(capacity > 0, fixed_prices, np.inf)
        self._memo: dict[
            StateKey, dict[Hashable, list[Candidate]]
        ] = {}  # state -> class -> candidates
        self._prices: dict[StateKey, np.ndarray] = {}
        self.max_states = max(16, MEMO_STATE_BYTES // max(1, capacity.nbytes))
        """States remembered (oldest forgotten first): a round on a large cluster visits thousands
        of free states (every greedy placement makes one), each as large as the cluster."""
        self._last: tuple[np.ndarray, np.ndarray] | None = None
        self.static = self.fixed is not None or bounds is None
        """Prices do not depend on the free state: per-class price orders and kept placements'
        costs are computed once (same candidates as rebuilding them per state)."""
        self._allocators: dict[Hashable, StaticPriceAllocator] = {}
        self._kept: dict[int, tuple[QueueEntry, Candidate | None, list[tuple[int, int]]]] = {}
        self._flat: dict[StateKey, list[int]] = {}  # free GPUs per cell of each state, as a list
        self._fresh = 0
        self._zero: np.ndarray | None = None
        self._flats: dict[StateKey, tuple[tuple[int, ...], int | None]] = {}
        self.cell_max = int(capacity.max(initial=0))
        """The most GPUs any cell holds: a gang at least this wide sees every state as it is
        (:func:`capped_state`)."""

    def fresh_key(self) -> StateKey:
        """A state key never given before, for a caller that tracks its own state changes (cheaper
        than ``free.tobytes()`` and hashing it on a large cluster; never equal to a state's bytes)."""
        self._fresh += 1
        return ("fresh", self._fresh)

    def prices(self, free: np.ndarray, key: StateKey | None = None) -> np.ndarray:
        """Current prices for a free state; all zero (where there is capacity) without bounds.

        ``key`` is ``free.tobytes()`` when the caller already has it."""
        if self.fixed is not None:
            return self.fixed
        key = free.tobytes() if key is None else key
        p = self._prices.get(key)
        if p is None:
            if self.bounds is None:
                p = np.where(self.capacity > 0, 0.0, np.inf)
            elif self._last is not None and self._last[0].shape == free.shape:
                # incremental: only nodes whose free GPUs changed since the last state get new prices
                p = self._last[1].copy()
                rows = np.flatnonzero((free != self._last[0]).any(axis=1))
                if rows.size:
                    p[rows] = price_matrix(
                        self.bounds, self.capacity[rows] - free[rows], self.capacity[rows]
                    )
            else:
                p = price_matrix(self.bounds, self.capacity - free, self.capacity)
            _remember(self._prices, key, p, self.max_states)
            self._last = (free.copy(), p)
        return p

    def candidates(
        self,
        entry: QueueEntry,
        free: np.ndarray,
        key: StateKey | None = None,
        lineage: object | None = None,
    ) -> list[Candidate]:
        """FIND_ALLOC's candidates for ``entry`` on ``free``, plus its kept placement if it fits.

        ``lineage``: a token the caller passes with a ``free`` that has only lost GPUs since its
        last call with that token (a greedy pass), so single-GPU candidates on large clusters
        resume their scans of the cells (:meth:`StaticPriceAllocator.single_gpu_descending`)."""
        if self.takes_flat(free) and (entry.keep is None or entry.keep.shape == free.shape):
            return self.candidates_flat(entry, *self._as_flat(free, key))
        state = key  # ``free.tobytes()`` (costly on a large cluster) only where a memo needs it
        hit = None
        if (
            lineage is not None
            and self.static
            and entry.request.num_gpus == 1
            and (free.shape[0] > PRUNE_ABOVE_NODES or free.size > SMALL_CELLS)
        ):
            hit = self._allocator(entry).single_gpu_descending(free, lineage)
        if hit is None:
            state = free.tobytes() if state is None else state
            hit = self._memo_candidates(entry, free, state)
        if entry.keep is not None:
            state = free.tobytes() if state is None else state
            kept = self._kept_candidate(entry, free, state)
            if kept is not None:
                return [kept, *(c for c in hit if c.rate >= entry.move_min_rate)]
        return hit

    def _memo_candidates(
        self, entry: QueueEntry, free: np.ndarray, state: StateKey
    ) -> list[Candidate]:
        """FIND_ALLOC's candidates for ``entry``'s class on ``free``, remembered by state."""
        by_class = self._memo.get(state)
        if by_class is None:
            by_class = _remember(self._memo, state, {}, self.max_states)
        hit = by_class.get(entry.class_key)
        if hit is None:
            hit = self._static_candidates(entry, free, state) if self.static else None
            if hit is None:
                hit = candidate_allocations(entry.request, free, self.prices(free, state))
            by_class[entry.class_key] = hit
        return hit

    def _static_candidates(
        self, entry: QueueEntry, free: np.ndarray, state: StateKey
    ) -> list[Candidate] | None:
        """Candidates from the class's static-price allocator, None where it has no shortcut
        (multi-GPU gangs on large clusters)."""
        if free.shape[0] <= PRUNE_ABOVE_NODES and free.size <= SMALL_CELLS:
            return self._allocator(entry).candidates(self._flat_free(free, state))
        if entry.request.num_gpus == 1:
            return self._allocator(entry).single_gpu_array(free)
        return None

    def _flat_free(self, free: np.ndarray, state: StateKey) -> list[int]:
        flat = self._flat.get(state)
        if flat is None:
            flat = _remember(self._flat, state, free.ravel().tolist(), self.max_states)
        return flat

    def _allocator(self, entry: QueueEntry) -> StaticPriceAllocator:
        """The static-price FIND_ALLOC of ``entry``'s class, built once per cache."""
        alloc = self._allocators.get(entry.class_key)
        if alloc is None:
            alloc = self._allocators[entry.class_key] = StaticPriceAllocator(
                entry.request, self.static_prices(), self.capacity
            )
        return alloc

    def _kept_candidate(
        self, entry: QueueEntry, free: np.ndarray, state: StateKey
    ) -> Candidate | None:
        """``entry``'s kept placement as a candidate if its GPUs are free; with static prices its
        rate and cost are computed once per entry."""
        keep = entry.keep
        assert keep is not None
        if not self.static:
            return kept_candidate(keep, entry.request, free, self.prices(free, state))
        hit = self._kept.get(id(entry))
        if hit is None or hit[0] is not entry:
            hit = self._kept_on_cells(entry)
        if hit[1] is None:
            return None
        if keep.shape != free.shape:
            return hit[1] if bool((keep <= free).all()) else None
        flat = self._flat_free(free, state) if free.size <= SMALL_CELLS else free.ravel()
        return hit[1] if all(flat[i] >= n for i, n in hit[2]) else None

    def takes_flat(self, free: np.ndarray) -> bool:
        """Whether :meth:`candidates_flat` serves states shaped like ``free``: prices that do not
        depend on the state, on a cluster small enough for the pure-Python construction."""
        return (
            self.static
            and free.shape == self.capacity.shape
            and free.shape[0] <= PRUNE_ABOVE_NODES
            and free.size <= SMALL_CELLS
        )

    def candidates_flat(
        self, entry: QueueEntry, flat: tuple[int, ...], live: int | None = None
    ) -> list[Candidate]:
        """:meth:`candidates` for a state given as its flat tuple ``tuple(free.ravel())`` (which is
        also its memo key), where :meth:`takes_flat`: the same candidates, without an array.

        ``live``: the state's cells with a free GPU as a bit mask (:func:`live_cells`), for a
        state with no GPU beyond capacity. A single-GPU job's candidates depend only on which
        cells have a free GPU (the cheapest at each rate level), so they are remembered by that
        mask: states that differ only in how many GPUs a cell has left share them."""
        need = entry.request.num_gpus
        key = flat if live is None or need >= self.cell_max else capped_state(flat, need)
        hit = self.class_candidates_flat(entry, key, live)
        if entry.keep is not None:
            kept = self.kept_on_cells(entry)
            if kept is not None and all(flat[i] >= n for i, n in kept[1]):
                return [kept[0], *(c for c in hit if c.rate >= entry.move_min_rate)]
        return hit

    def class_candidates_flat(
        self, entry: QueueEntry, flat: tuple[int, ...], live: int | None
    ) -> list[Candidate]:
        """FIND_ALLOC's candidates for ``entry``'s class on ``flat`` (without its kept placement),
        remembered by state (single-GPU classes: by ``live`` mask, where given). ``flat`` may be
        a state within capacity :func:`capped_state` at the class's gang width: the same
        candidates, remembered once for every state it stands for."""
        memo_key: Hashable = flat
        if live is not None and entry.request.num_gpus == 1:
            memo_key = ("live", live)
        by_class = self._memo.get(memo_key)
        if by_class is None:
            by_class = _remember(self._memo, memo_key, {}, self.max_states)
        hit = by_class.get(entry.class_key)
        if hit is None:
            hit = by_class[entry.class_key] = self._allocator(entry).candidates(flat)
        return hit

    def kept_on_cells(self, entry: QueueEntry) -> tuple[Candidate, list[tuple[int, int]]] | None:
        """With static prices: ``entry``'s kept placement as a candidate and its flat cells
        (None if it cannot run there), computed once per entry."""
        hit = self._kept.get(id(entry))
        if hit is None or hit[0] is not entry:
            hit = self._kept_on_cells(entry)
        return None if hit[1] is None else (hit[1], hit[2])

    def _as_flat(
        self, free: np.ndarray, key: StateKey | None
    ) -> tuple[tuple[int, ...], int | None]:
        """``free`` as a flat tuple and its live-cell mask (None beyond capacity), remembered by
        ``key`` when given (a round's standalone pass asks for every job on one state)."""
        hit = None if key is None else self._flats.get(key)
        if hit is None:
            flat = tuple(free.ravel().tolist())
            hit = (flat, live_cells(flat) if bool((free <= self.capacity).all()) else None)
            if key is not None:
                _remember(self._flats, key, hit, self.max_states)
        return hit

    def static_prices(self) -> np.ndarray:
        """The prices of a static cache (``fixed``, else 0 where there is capacity)."""
        assert self.static
        if self.fixed is not None:
            return self.fixed
        if self._zero is None:
            self._zero = np.where(self.capacity > 0, 0.0, np.inf)
        return self._zero

    def _kept_on_cells(
        self, entry: QueueEntry
    ) -> tuple[QueueEntry, Candidate | None, list[tuple[int, int]]]:
        """With static prices: ``entry``'s kept placement as a candidate (None if it cannot run)
        and its cells, computed once per entry."""
        keep = entry.keep
        assert keep is not None and self.static
        idx = np.flatnonzero(keep)
        cells = list(zip(idx.tolist(), keep.ravel()[idx].tolist(), strict=True))
        cand = kept_candidate_on_cells(keep, idx, entry.request, self.static_prices())
        hit = self._kept[id(entry)] = (entry, cand, cells)
        return hit

    def best(
        self,
        entry: QueueEntry,
        free: np.ndarray,
        key: StateKey | None = None,
        lineage: object | None = None,
    ) -> tuple[Candidate, float] | None:
        """FIND_ALLOC's best candidate and its payoff (None if none is positive)."""
        return best_candidate(self.candidates(entry, free, key, lineage), entry.payoff)


_Chain: TypeAlias = "tuple[_Chain | None, tuple[int, Candidate, float]]"
"""The choices of a DP state as a linked list: (previous chain, (index, candidate, payoff))."""


@dataclass
class _State:
    free: np.ndarray
    total: int  # free GPUs in all
    value: float
    count: int
    chain: _Chain | None


def plan_queue(
    entries: Sequence[QueueEntry],
    free: np.ndarray,
    cache: CandidateCache,
    beam: int = 64,
    state_key: Callable[[np.ndarray], bytes] | None = None,
) -> DPResult:
    """Run the DP over ``entries`` (in queue order) starting from ``free`` GPUs.

    ``state_key`` maps a free state to its memo key (default: its exact bytes)."""
    if beam < 1:
        raise ValueError("beam must be >= 1")
    if (
        state_key is None
        and cache.takes_flat(free)
        and all(e.keep is None or e.keep.shape == free.shape for e in entries)
    ):
        return _plan_queue_flat(entries, free, cache, beam)
    skey = state_key or (lambda f: f.tobytes())
    frontier: dict[bytes, _State] = {skey(free): _State(free.copy(), int(free.sum()), 0.0, 0, None)}
    exact_keys = state_key is None  # frontier keys are the memo's state keys
    exact = True
    states = 1
    peak = 1
    for i, entry in enumerate(entries):
        need = entry.request.num_gpus
        nxt: dict[bytes, _State] = {}
        known: dict[int, tuple[Candidate, float]] = {}  # this job's payoffs, by candidate object
        for key, st in frontier.items():
            _merge(nxt, key, st)  # skip job i
            if st.total < need:
                continue
            best = _best_known(
                cache.candidates(entry, st.free, key if exact_keys else None), entry, known
            )
            if best is None:
                continue
            cand, pay = best
            new_free = st.free - cand.alloc
            took = cand.gpus if cand.kept else need  # FIND_ALLOC's take exactly the gang
            _merge(
                nxt,
                skey(new_free),
                _State(
                    new_free,
                    st.total - took,
                    st.value + pay,
                    st.count + 1,
                    (st.chain, (i, cand, pay)),
                ),
            )
        states += len(nxt)
        if len(nxt) > beam:
            exact = False
            ranked = sorted(nxt.items(), key=lambda kv: (-kv[1].value, -kv[1].count))
            nxt = dict(ranked[:beam])
        peak = max(peak, len(nxt))
        frontier = nxt
    best_state = max(frontier.values(), key=lambda s: (s.value, s.count))
    chosen: list[tuple[int, Candidate, float]] = []
    chain = best_state.chain
    while chain is not None:
        chain, step = chain
        chosen.append(step)
    chosen.reverse()
    return DPResult(tuple(chosen), best_state.value, exact, states, peak)


def _plan_queue_flat(
    entries: Sequence[QueueEntry], free: np.ndarray, cache: CandidateCache, beam: int
) -> DPResult:
    """:func:`plan_queue` with each free state as a flat tuple of ints that is also its key (where
    :meth:`CandidateCache.takes_flat`): the same states in the same order, so the same result,
    without an array subtraction, a ``tobytes()`` and a ``tolist()`` per state.

    A state's record is a plain tuple ``(value, count, total, chain, live)``: total payoff, jobs
    taken, free GPUs in all, the chain of choices, and the cells with a free GPU as a bit mask
    (:func:`live_cells`; None when a cell is beyond capacity)."""
    start = tuple(free.ravel().tolist())
    live = live_cells(start) if bool((free <= cache.capacity).all()) else None
    frontier: dict[tuple[int, ...], _FlatRecord] = {start: (0.0, 0, sum(start), None, live)}
    exact = True
    states = 1
    peak = 1
    for i, entry in enumerate(entries):
        need = entry.request.num_gpus
        payoff = entry.payoff
        kept = cache.kept_on_cells(entry) if entry.keep is not None else None
        nxt: dict[tuple[int, ...], _FlatRecord] = {}
        known: dict[int, tuple[Candidate, float]] = {}  # this job's payoffs, by candidate object
        taken: dict[int, list[tuple[int, int]]] = {}  # cells of known candidates, once each
        bests: dict[Hashable, tuple[Candidate | None, float]] = {}  # by the class memo's key
        moves: dict[Hashable, tuple[Candidate | None, float]] = {}  # the same, beside kept
        single = need == 1
        kept_payoff = 0.0 if kept is None else payoff(kept[0])
        kept_cell = kept[1][0] if kept is not None and len(kept[1]) == 1 else None
        capped = not single and need < cache.cell_max  # states it sees the same share a memo
        # this loop is the DP's hot path: _merge and CandidateCache.candidates_flat are inlined,
        # and each job's best per memo key is remembered (same order of candidates, same ties)
        for flat, st in frontier.items():
            old = nxt.get(flat)  # skip job i
            if old is None or st[0] > old[0] or (st[0] == old[0] and st[1] > old[1]):
                nxt[flat] = st
            if st[2] < need:
                continue
            live = st[4]
            # the best of the class's candidates depends only on what they are remembered by
            if kept is None:
                with_kept = False
            elif kept_cell is not None:  # most kept placements are one cell
                with_kept = flat[kept_cell[0]] >= kept_cell[1]
            else:
                with_kept = all(flat[c] >= n for c, n in kept[1])
            by_state = moves if with_kept else bests
            # the state as the job's candidates see it (a gang: cells capped at its width)
            seen = flat
            if capped and live is not None:
                seen = tuple([n if n < need else need for n in flat])  # capped_state
            memo_key: Hashable = live if single and live is not None else seen
            found = by_state.get(memo_key)
            if found is None:
                found = by_state[memo_key] = _first_best(
                    cache.class_candidates_flat(entry, seen, live),
                    entry.move_min_rate if with_kept else None,
                    payoff,
                    known,
                )
            best, top = found
            if with_kept and kept_payoff > 0 and (best is None or top <= kept_payoff):
                # the kept placement comes first among equals
                best, top = kept[0], kept_payoff  # type: ignore[index]
            if best is None:
                continue
            after = list(flat)
            cells = taken.get(id(best))
            if cells is None:
                cells = taken[id(best)] = list(zip(*best.cells, strict=True))
            for cell, n in cells:
                after[cell] -= n
                if live is not None and after[cell] == 0:
                    live &= ~(1 << cell)
            took = best.gpus if best.kept else need  # FIND_ALLOC's take exactly the gang
            value = st[0] + top
            key = tuple(after)
            old = nxt.get(key)
            if old is None or value > old[0] or (value == old[0] and st[1] + 1 > old[1]):
                nxt[key] = (value, st[1] + 1, st[2] - took, (st[3], (i, best, top)), live)
        states += len(nxt)
        if len(nxt) > beam:
            exact = False
            ranked = sorted(nxt.items(), key=lambda kv: (-kv[1][0], -kv[1][1]))
            nxt = dict(ranked[:beam])
        peak = max(peak, len(nxt))
        frontier = nxt
    best_record = max(frontier.values(), key=lambda r: (r[0], r[1]))
    chosen: list[tuple[int, Candidate, float]] = []
    chain = best_record[3]
    while chain is not None:
        chain, step = chain
        chosen.append(step)
    chosen.reverse()
    return DPResult(tuple(chosen), best_record[0], exact, states, peak)


_FlatRecord = tuple[float, int, int, "_Chain | None", "int | None"]
"""A state of :func:`_plan_queue_flat`: (total payoff, jobs taken, free GPUs, chain, live cells)."""


def capped_state(flat: Sequence[int], width: int) -> tuple[int, ...]:
    """A free state within capacity as a gang of ``width`` GPUs sees it: each cell's free GPUs
    capped at ``width``. FIND_ALLOC's candidates (static prices) are the same on both: a
    placement takes at most ``width`` GPUs of a cell, a node fits the gang exactly when its
    capped cells do, and nodes are ranked by their free GPUs only when none fits, where no
    cell reaches ``width`` (``tests/primal_dual/test_dp.py``)."""
    return tuple([n if n < width else width for n in flat])


def live_cells(flat: Sequence[int]) -> int:
    """The cells of a flat free state that have a free GPU, as a bit mask (bit i: cell i)."""
    return sum(1 << i for i, n in enumerate(flat) if n > 0)


def _first_best(
    cands: list[Candidate],
    min_rate: float | None,
    payoff: Callable[[Candidate], float],
    known: dict[int, tuple[Candidate, float]],
) -> tuple[Candidate | None, float]:
    """The first candidate of the highest positive payoff (at least ``min_rate`` fast, if given),
    and that payoff; ``(None, 0.0)`` if none. Payoffs are remembered in ``known``."""
    best: Candidate | None = None
    top = 0.0
    for cand in cands:
        if min_rate is not None and cand.rate < min_rate:
            continue
        hit = known.get(id(cand))
        if hit is None:
            hit = known[id(cand)] = (cand, payoff(cand))
        if hit[1] > 0 and (best is None or hit[1] > top):
            best, top = cand, hit[1]
    return best, top


def _best_known(
    cands: list[Candidate], entry: QueueEntry, known: dict[int, tuple[Candidate, float]]
) -> tuple[Candidate, float] | None:
    """:func:`best_candidate` by ``entry.payoff``, each candidate object's payoff computed once
    (``known`` holds the candidates, so their ids stay theirs): the DP's states share candidate
    objects wherever prices are fixed."""
    best, top = _first_best(cands, None, entry.payoff, known)
    return None if best is None else (best, top)


def _merge(states: dict[bytes, _State], key: bytes, st: _State) -> None:
    old = states.get(key)
    if old is None or (st.value, st.count) > (old.value, old.count):
        states[key] = st
