import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from estimators.throughput import GavelThroughputTable
from hadar.core.cluster import Cluster, Node
from hadar.core.jobs import Job
from primal_dual.find_alloc import JobRequest, candidate_allocations


def test_mixed_type_placement_runs_at_the_bottleneck_types_unconsolidated_rate():
    table = GavelThroughputTable.bundled()
    cluster = Cluster("c", (Node("a", {"v100": 2}), Node("b", {"k80": 2})))
    job = Job(0, "ResNet-50 (batch size 16)", 4, 1000.0)
    rate = table.rate(job, {"a": {"v100": 2}, "b": {"k80": 2}}, cluster)
    assert rate == table.lookup("ResNet-50 (batch size 16)", "k80", 4, consolidated=False)
    assert rate < table.lookup("ResNet-50 (batch size 16)", "v100", 4, consolidated=False)
    one_node = Cluster("d", (Node("a", {"v100": 2, "k80": 2}),))
    rate1 = table.rate(job, {"a": {"v100": 2, "k80": 2}}, one_node)
    assert rate1 == table.lookup("ResNet-50 (batch size 16)", "k80", 4, consolidated=True)


def test_candidates_include_consolidated_and_cross_node_options():
    free = np.array([[4, 0], [2, 0], [0, 3]])
    price = np.where(free > 0, 1.0, np.inf)
    price[2, 1] = 0.1
    cons = np.tile([1.0, 3.0], (3, 1))
    req = JobRequest(4, cons, cons * 0.5)
    cands = candidate_allocations(req, free, price)
    by_nodes = {c.nodes: c for c in cands}
    assert 1 in by_nodes and by_nodes[1].alloc[0, 0] == 4 and by_nodes[1].rate == 1.0
    multi = [c for c in cands if c.nodes > 1]
    assert multi, "expected a cross-node candidate"
    cheapest = min(multi, key=lambda c: c.unit_cost)
    assert cheapest.alloc[2, 1] == 3 and cheapest.rate == 0.5  # bottleneck: type 0, unconsolidated


def test_job_that_cannot_run_on_a_type_is_never_placed_there():
    free = np.array([[4, 0], [0, 4]])
    price = np.where(free > 0, 1.0, np.inf)
    cons = np.tile([0.0, 2.0], (2, 1))  # rate 0 on type 0
    cands = candidate_allocations(JobRequest(2, cons, cons), free, price)
    assert cands and all(c.alloc[:, 0].sum() == 0 for c in cands)
    assert candidate_allocations(JobRequest(5, cons, cons), free, price) == []


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.lists(st.integers(0, 4), min_size=3, max_size=3), min_size=1, max_size=6),
    st.integers(1, 8),
    st.lists(st.floats(0.0, 5.0), min_size=3, max_size=3),
    st.integers(0, 2**16),
)
def test_candidates_respect_free_gpus_and_gang_size(rows, w, rates, seed):
    free = np.array(rows)
    rng = np.random.default_rng(seed)
    price = np.where(free > 0, rng.random(free.shape), np.inf)
    cons = np.tile(rates, (free.shape[0], 1))
    req = JobRequest(w, cons, cons * 0.7)
    for c in candidate_allocations(req, free, price):
        assert c.alloc.sum() == w
        assert (c.alloc <= free).all() and (c.alloc >= 0).all()
        used = c.alloc > 0
        expected = (cons if c.nodes == 1 else cons * 0.7)[used].min()
        assert c.rate == expected > 0
        assert c.nodes == int(used.any(axis=1).sum())


def test_large_cluster_pruning_gives_the_same_candidates_as_the_full_search():
    from primal_dual import find_alloc

    rng = np.random.default_rng(3)
    cap = np.zeros((200, 3), dtype=int)
    cap[np.arange(200), np.arange(200) % 3] = 8
    free = np.minimum(cap, rng.integers(0, 9, cap.shape))
    price = np.where(cap > 0, 0.01 * (1 + cap - free), np.inf)
    cons = np.tile([1.0, 2.0, 3.0], (200, 1))
    groups = find_alloc.static_node_groups(cap, cons, cons * 0.5)
    for w in (1, 3, 8, 20):
        req = JobRequest(w, cons, cons * 0.5, groups)
        full = find_alloc._candidates(req, free, price)
        pruned = find_alloc.candidate_allocations(req, free, price)
        assert [(c.alloc.tobytes(), c.rate, c.unit_cost) for c in full] == [
            (c.alloc.tobytes(), c.rate, c.unit_cost) for c in pruned
        ]


@settings(max_examples=30, deadline=None)
@given(
    st.integers(65, 160),
    st.integers(1, 3),
    st.sampled_from([1, 2, 4, 8, 16]),
    st.integers(0, 2**31 - 1),
)
def test_pruning_equals_the_full_search_on_random_large_clusters(nodes, types, w, seed):
    """Above PRUNE_ABOVE_NODES nodes, candidates come from a few representatives per group of
    interchangeable nodes (free GPUs, prices, rates); they must equal the unpruned construction's."""
    from primal_dual import find_alloc

    rng = np.random.default_rng(seed)
    cap = np.zeros((nodes, types), dtype=int)
    cap[np.arange(nodes), rng.integers(0, types, nodes)] = rng.choice([4, 8], nodes)
    free = np.minimum(cap, rng.integers(0, 9, cap.shape))
    type_price = rng.choice([0.5, 1.0, 2.0], types)  # per-type prices, as the round LP sets them
    price = np.where(cap > 0, type_price[None, :], np.inf)
    cons = np.tile(rng.uniform(0.5, 3.0, types), (nodes, 1))
    groups = find_alloc.static_node_groups(cap, cons, cons * 0.5)
    req = JobRequest(w, cons, cons * 0.5, groups)
    if w == 1:  # at most 3 types x 2 sizes x 9 free counts = 54 groups, one node each
        assert find_alloc.relevant_nodes(req, free, price).size <= 54 < nodes
    full = find_alloc._candidates(req, free, price)
    pruned = find_alloc.candidate_allocations(req, free, price)
    assert [(c.alloc.tobytes(), c.rate, c.nodes) for c in full] == [
        (c.alloc.tobytes(), c.rate, c.nodes) for c in pruned
    ]
    assert [c.unit_cost for c in pruned] == pytest.approx([c.unit_cost for c in full], rel=1e-12)


@settings(max_examples=200, deadline=None)
@given(
    st.integers(65, 400),
    st.integers(1, 4),
    st.integers(1, 12),
    st.integers(1, 40),
    st.sampled_from([1, 2, 4, 8]),
    st.integers(0, 2**31 - 1),
)
def test_sixteen_bit_node_keys_select_the_same_nodes(nodes, types, most, groups, w, seed):
    """relevant_nodes with 16-bit keys (where group and free GPUs fit) keeps exactly the nodes the
    64-bit keys keep: the first W of each group of interchangeable nodes."""
    from primal_dual import find_alloc

    rng = np.random.default_rng(seed)
    free = rng.integers(0, most + 1, (nodes, types))
    node_groups = rng.integers(0, groups, nodes)
    req = JobRequest(w, np.ones((nodes, types)), np.ones((nodes, types)), node_groups)
    small = find_alloc._small_group_keys(node_groups, free)
    packed = (free * (64 ** np.arange(types))).sum(axis=1)
    wide = node_groups * 64**types + packed
    if small is not None:  # the same partition of the nodes
        pairs = set(zip(small.tolist(), wide.tolist(), strict=True))
        assert len(pairs) == len(set(small.tolist())) == len(set(wide.tolist()))
    order = np.argsort(wide, kind="stable")
    expected = np.sort(order[find_alloc.rank_in_runs(wide[order]) < w])
    got = find_alloc.relevant_nodes(req, free, np.ones((nodes, types)))
    assert got.tolist() == expected.tolist()


def test_sixteen_bit_node_keys_decline_what_does_not_fit():
    from primal_dual import find_alloc

    assert find_alloc._small_group_keys(np.zeros(3, dtype=int), -np.ones((3, 2), dtype=int)) is None
    big = np.full((3, 3), 63)  # 64 ** 3 > 2 ** 16
    assert find_alloc._small_group_keys(np.zeros(3, dtype=int), big) is None
    assert find_alloc._small_group_keys(np.zeros(3, dtype=int), big[:, :2]) is not None


@settings(max_examples=300, deadline=None)
@given(
    st.integers(1, 7),
    st.integers(1, 3),
    st.integers(1, 9),
    st.integers(0, 2**31 - 1),
    st.booleans(),
)
def test_python_and_numpy_constructions_agree(nodes, types, w, seed, ties):
    from primal_dual import find_alloc

    rng = np.random.default_rng(seed)
    cap = rng.integers(0, 5, size=(nodes, types))
    free = np.minimum(cap, rng.integers(0, 5, size=cap.shape))
    raw = rng.integers(1, 4, size=cap.shape) / 10 if ties else rng.random(cap.shape)
    price = np.where(cap > 0, raw, np.inf)
    cons = rng.choice([0.0, 1.0, 2.0, 3.5], size=cap.shape) if ties else rng.random(cap.shape) * 3
    req = JobRequest(w, cons, cons * rng.uniform(0.3, 1.0))
    fast = find_alloc._candidates_small(req, free, price)
    ref = find_alloc._candidates(req, free, price)
    assert [(c.alloc.tolist(), c.rate, c.nodes) for c in fast] == [
        (c.alloc.tolist(), c.rate, c.nodes) for c in ref
    ]
    assert [c.unit_cost for c in fast] == pytest.approx([c.unit_cost for c in ref], rel=1e-12)


@pytest.mark.parametrize("seed", range(40))
def test_kept_candidate_on_cells_equals_the_dense_construction(seed):
    from primal_dual.find_alloc import kept_candidate, kept_candidate_on_cells

    rng = np.random.default_rng(seed)
    shape = (int(rng.integers(1, 12)), int(rng.integers(1, 4)))
    alloc = rng.integers(0, 4, size=shape) * (rng.random(shape) < 0.3)
    alloc.flat[int(rng.integers(alloc.size))] += 1  # a placement holds GPUs
    cons = rng.choice([0.0, 0.7, 1.3, 2.9], size=shape)
    req = JobRequest(int(alloc.sum()), cons, cons * rng.uniform(0.2, 1.0))
    price = rng.random(shape) * rng.choice([0.0, 1.0, 1e3])
    want = kept_candidate(alloc, req, alloc, price)
    got = kept_candidate_on_cells(alloc, np.flatnonzero(alloc), req, price)
    if want is None:
        assert got is None
    else:
        assert got is not None
        assert (got.rate, got.unit_cost, got.nodes, got.kept) == (
            want.rate,
            want.unit_cost,
            want.nodes,
            want.kept,
        )
        assert got.alloc is alloc
        assert got.cells == want.cells  # filled in from the cells it was given
