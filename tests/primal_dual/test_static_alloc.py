"""FIND_ALLOC at fixed prices (``StaticPriceAllocator``) builds exactly the candidates of the
per-state construction (``_candidates_small``): same placements, rates, costs (bit for bit) and
order, for any free state of the cluster, and the DP's cache uses it without changing a plan."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from primal_dual import find_alloc
from primal_dual.dp import CandidateCache, QueueEntry, capped_state, plan_queue
from primal_dual.find_alloc import JobRequest
from primal_dual.static_alloc import StaticPriceAllocator


def exact(cands: list[find_alloc.Candidate]) -> list[tuple]:
    """Everything a candidate is, its sparse cells and size included (some are filled in when it
    is built: they must equal what the dense ``alloc`` gives)."""
    out = []
    for c in cands:
        idx = np.flatnonzero(c.alloc)
        assert c.cells == (idx.tolist(), c.alloc.ravel()[idx].tolist())
        assert c.gpus == int(c.alloc.sum())
        out.append((c.alloc.tolist(), c.rate, c.unit_cost, c.nodes, c.kept))
    return out


def random_instance(nodes: int, types: int, w: int, seed: int, ties: bool):
    rng = np.random.default_rng(seed)
    cap = rng.integers(0, 5, size=(nodes, types))
    raw = rng.integers(0, 4, size=cap.shape) / 10 if ties else rng.random(cap.shape)
    price = np.where(cap > 0, raw, np.inf)
    cons = rng.choice([0.0, 1.0, 2.0, 3.5], size=cap.shape) if ties else rng.random(cap.shape) * 3
    unc = (
        cons * rng.uniform(0.3, 1.0) * (rng.random(cap.shape) > 0.2)
    )  # some cross-node rates are 0
    return rng, cap, price, JobRequest(w, cons, unc)


@settings(max_examples=400, deadline=None)
@given(
    st.integers(1, 8),
    st.integers(1, 4),
    st.integers(1, 9),
    st.integers(0, 2**31 - 1),
    st.booleans(),
)
def test_static_price_candidates_equal_the_per_state_construction(nodes, types, w, seed, ties):
    rng, cap, price, req = random_instance(nodes, types, w, seed, ties)
    allocator = StaticPriceAllocator(req, price, cap)
    for _ in range(6):  # one allocator serves every free state of the round
        free = np.minimum(cap, rng.integers(0, 5, size=cap.shape))
        got = allocator.candidates(free.ravel().tolist())
        assert exact(got) == exact(find_alloc._candidates_small(req, free, price))


@settings(max_examples=400, deadline=None)
@given(
    st.integers(1, 6),
    st.integers(1, 3),
    st.integers(2, 6),
    st.integers(0, 2**31 - 1),
    st.booleans(),
)
def test_a_gang_sees_a_state_as_its_cells_capped_at_its_width(nodes, types, w, seed, ties):
    """The DP remembers a gang's candidates by the state capped at its width: on every state
    within capacity they are the per-state construction's on the state itself."""
    rng, _, price, req = random_instance(nodes, types, w, seed, ties)
    cap = rng.integers(0, 9, size=price.shape)  # cells of up to 8 GPUs, wider than most gangs
    price = np.where(cap > 0, np.where(np.isinf(price), 0.25, price), np.inf)
    allocator = StaticPriceAllocator(req, price, cap)
    for _ in range(6):
        free = np.minimum(cap, rng.integers(0, 9, size=cap.shape))
        capped = capped_state(free.ravel().tolist(), w)
        assert exact(allocator.candidates(capped)) == exact(
            find_alloc._candidates_small(req, free, price)
        )


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 6), st.integers(1, 3), st.integers(1, 4), st.integers(0, 2**31 - 1))
def test_free_gpus_beyond_capacity_fall_back_to_the_per_state_construction(nodes, types, w, seed):
    rng, cap, price, req = random_instance(nodes, types, w, seed, ties=True)
    price = np.where(cap > 0, price, 0.5)  # a state that is not a sub-state of the capacity
    free = rng.integers(0, 5, size=cap.shape)
    got = StaticPriceAllocator(req, price, cap).candidates(free.ravel().tolist())
    assert exact(got) == exact(find_alloc._candidates_small(req, free, price))


def test_single_gpu_candidates_are_one_per_rate_level_fastest_first():
    cap = np.array([[2, 0], [0, 2], [2, 0]])
    price = np.where(cap > 0, np.array([[0.1, 0.0], [0.0, 0.3], [0.2, 0.0]]), np.inf)
    cons = np.array([[1.0, 9.9], [9.9, 3.0], [2.0, 9.9]])
    got = StaticPriceAllocator(JobRequest(1, cons, cons), price, cap).candidates(
        cap.ravel().tolist()
    )
    # levels 3.0, 2.0, 1.0: the cheapest cell at least that fast (node 1, node 2, node 0)
    assert [(np.argwhere(c.alloc).tolist(), c.rate, c.unit_cost) for c in got] == [
        ([[1, 1]], 3.0, 0.3),
        ([[2, 0]], 2.0, 0.2),
        ([[0, 0]], 1.0, 0.1),
    ]
    assert all(not c.alloc.flags.writeable for c in got)  # shared between DP states: read-only


@settings(max_examples=120, deadline=None)
@given(
    st.integers(2, 8),
    st.integers(1, 3),
    st.integers(0, 2**31 - 1),
    st.sampled_from(["all free", "some taken", "beyond capacity"]),
)
def test_dp_plans_equal_with_and_without_static_prices(nodes, types, seed, start):
    """The cache's static path (fixed prices, kept placements; small clusters: flat tuple states,
    single-GPU candidates remembered by which cells have a free GPU) gives the DP the same plan
    as the per-state path it replaces, from any starting state."""
    rng, cap, price, _ = random_instance(nodes, types, 1, seed, ties=True)
    requests = []  # four job classes, three jobs each
    for _ in range(4):
        cons = rng.choice([1.0, 2.0, 3.5], size=cap.shape)
        requests.append(JobRequest(int(rng.integers(1, 5)), cons, cons * 0.6))
    entries = []
    for j in range(12):
        req = requests[j % 4]
        w = req.num_gpus
        keep = None
        if j % 4 == 0:  # a running job's placement: w GPUs of the first cells that have them
            flat = np.zeros(cap.size, dtype=np.int64)
            left = w
            for i in np.flatnonzero(cap.ravel()):
                flat[i] = t = min(left, int(cap.ravel()[i]))
                left -= t
            keep = flat.reshape(cap.shape) if left == 0 else None
        weight = float(rng.uniform(0.5, 2.0))
        entries.append(
            QueueEntry(
                j,
                req,
                j % 4,
                lambda r, a=weight: a * r,
                lambda r: 1.0,
                keep=keep,
                kept_utility=(lambda r, a=weight: 1.5 * a * r) if keep is not None else None,
            )
        )
    fixed = np.broadcast_to(np.where(np.isfinite(price), price, 0.0).max(axis=0), cap.shape)
    static = CandidateCache(cap, None, fixed)
    per_state = CandidateCache(cap, None, fixed)
    per_state.static = False
    free = cap.copy()
    if start == "some taken":
        free = np.minimum(cap, rng.integers(0, 4, size=cap.shape))
    elif start == "beyond capacity":  # GPUs on cells the capacity lacks: no shortcut there
        free = cap + rng.integers(0, 2, size=cap.shape) * (cap == 0)
    a = plan_queue(entries, free.copy(), static, beam=8)
    b = plan_queue(entries, free.copy(), per_state, beam=8)
    assert [(i, c.alloc.tolist(), c.rate, c.unit_cost, c.kept, p) for i, c, p in a.chosen] == [
        (i, c.alloc.tolist(), c.rate, c.unit_cost, c.kept, p) for i, c, p in b.chosen
    ]
    assert (a.total_payoff, a.exact, a.states) == (b.total_payoff, b.exact, b.states)


def large_instance(nodes: int, types: int, seed: int, ties: bool, filled: float):
    """A cluster past PRUNE_ABOVE_NODES (a ``filled`` share of its cells with GPUs), per-type
    prices and per-type consolidated rates."""
    rng = np.random.default_rng(seed)
    cap = rng.integers(0, 9, size=(nodes, types)) * (rng.random((nodes, types)) < filled)
    type_price = rng.choice([0.0, 0.5, 2.0], types) if ties else rng.random(types)
    price = np.where(cap > 0, type_price[None, :], np.inf)
    cons = np.tile(
        rng.choice([1.0, 2.0, 3.5], types) if ties else rng.random(types) * 3, (nodes, 1)
    )
    return rng, cap, price, cons


@settings(max_examples=40, deadline=None)
@given(st.integers(65, 300), st.integers(1, 3), st.integers(0, 2**31 - 1), st.booleans())
def test_single_gpu_candidates_on_large_clusters_equal_the_pruned_construction(
    nodes, types, seed, ties
):
    """Clusters past PRUNE_ABOVE_NODES: the vectorised single-GPU shortcut gives the candidates of
    ``candidate_allocations`` (node pruning, then the per-state construction)."""
    rng, cap, price, cons = large_instance(nodes, types, seed, ties, filled=0.6)
    req = JobRequest(1, cons, cons * 0.5, find_alloc.static_node_groups(cap, cons, cons * 0.5))
    allocator = StaticPriceAllocator(req, price, cap)
    for _ in range(4):
        free = np.minimum(cap, rng.integers(0, 9, size=cap.shape) * (rng.random(cap.shape) < 0.5))
        got = allocator.single_gpu_array(free)
        assert got is not None
        assert exact(got) == exact(find_alloc.candidate_allocations(req, free, price))
    beyond = cap.copy()
    beyond[cap == 0] = 1  # GPUs where there is no capacity: no shortcut
    assert allocator.single_gpu_array(beyond) is None or (cap > 0).all()


@settings(max_examples=30, deadline=None)
@given(st.integers(2, 8), st.integers(1, 3), st.integers(0, 2**31 - 1), st.booleans())
def test_a_cache_that_forgets_states_plans_the_same(nodes, types, seed, exponential):
    """Forgetting free states (large clusters) costs rebuilds, never a different plan."""
    from primal_dual.prices import PriceBounds

    rng, cap, _, _ = random_instance(nodes, types, 1, seed, ties=False)
    cap = np.maximum(cap, 1)
    entries = []
    for j in range(10):
        cons = rng.choice([1.0, 2.0, 3.5], size=cap.shape)
        req = JobRequest(int(rng.integers(1, 4)), cons, cons * 0.6)
        entries.append(QueueEntry(j, req, j, lambda r: 10.0 * r, lambda r: 1.0))
    bounds = PriceBounds(np.full(types, 0.01), np.full(types, 10.0)) if exponential else None
    fixed = None if exponential else np.broadcast_to(rng.random(types), cap.shape)

    def plan(max_states: int | None):
        cache = CandidateCache(cap, bounds, fixed)
        if max_states is not None:
            cache.max_states = max_states
        result = plan_queue(entries, cap.copy(), cache, beam=6)
        return [
            (i, c.alloc.tolist(), c.rate, c.unit_cost, p) for i, c, p in result.chosen
        ], result.total_payoff

    assert plan(1) == plan(None)


@settings(max_examples=40, deadline=None)
@given(st.integers(65, 200), st.integers(1, 3), st.integers(0, 2**31 - 1), st.booleans())
def test_single_gpu_candidates_of_a_greedy_pass_equal_the_vectorised_scan(nodes, types, seed, ties):
    """A state that only loses GPUs (the greedy pass): the cursor-resuming scan gives, call after
    call, the candidates of ``single_gpu_array`` (itself equal to the per-state construction)."""
    rng, cap, price, cons = large_instance(nodes, types, seed, ties, filled=0.7)
    cons = cons * (rng.random(cons.shape) < 0.9)  # some cells cannot run the job
    allocator = StaticPriceAllocator(JobRequest(1, cons, cons * 0.5), price, cap)
    free = cap.copy()
    lineage, other = object(), object()
    for step in range(60):
        want = allocator.single_gpu_array(free)
        assert want is not None
        assert exact(allocator.single_gpu_descending(free, lineage)) == exact(want)
        if step % 7 == 0:  # a second pass, started later, keeps its own cursors
            assert exact(allocator.single_gpu_descending(free, other)) == exact(want)
        if not want:
            break
        want[int(rng.integers(len(want)))].take_from(free)  # a placement, as the greedy pass
        for _ in range(int(rng.integers(0, 40))):  # and any other free GPUs
            live = np.flatnonzero(free)
            if live.size:
                free.flat[int(rng.choice(live))] -= 1


def test_greedy_scan_has_no_shortcut_where_gpus_exceed_capacity():
    cap = np.zeros((70, 2), dtype=np.int64)
    cap[:, 0] = 4
    cons = np.ones(cap.shape)
    allocator = StaticPriceAllocator(JobRequest(1, cons, cons), np.where(cap > 0, 0.0, np.inf), cap)
    beyond = cap.copy()
    beyond[3, 1] = 1
    assert allocator.single_gpu_descending(beyond, object()) is None
    assert allocator.single_gpu_array(beyond) is None
