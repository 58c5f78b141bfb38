"""Per-type prices from the dual of a round's allocation LP (primal_dual/lp_prices.py)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from primal_dual.lp_prices import type_prices


def _payoffs(values, gang, prices):
    return values - gang[:, None] * prices[None, :]


def test_the_contended_gpu_is_priced_between_the_two_bids():
    values, gang = np.array([[5.0], [3.0]]), np.array([1, 1])
    p = type_prices(values, gang, np.array([1.0]))
    assert 3.0 - 1e-9 <= p[0] <= 5.0 + 1e-9  # the winner's payoff >= 0, the loser's <= 0
    assert type_prices(values, gang, np.array([2.0]))[0] == 0.0  # enough GPUs: no contention


def test_prices_follow_comparative_advantage_not_queue_order():
    # types (fast, slow), one GPU each; job 0 gains little on the fast type, job 1 a lot
    values, gang = np.array([[10.0, 9.0], [10.0, 2.0]]), np.array([1, 1])
    p = type_prices(values, gang, np.array([1.0, 1.0]))
    pay = _payoffs(values, gang, p)
    assert pay[1, 0] >= pay[1, 1] - 1e-9  # job 1 is best off on the fast type
    assert pay[0, 1] >= pay[0, 0] - 1e-9  # job 0 is best off on the slow one
    assert p[0] - p[1] >= 1.0 - 1e-9


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 60), st.integers(1, 3), st.integers(0, 2**31 - 1))
def test_the_prices_are_optimal_duals(n, m, seed):
    """Strong duality: the payoffs at these prices plus the priced capacity equal the LP's optimum
    (solved here independently, dense), so no other prices could make the dual smaller."""
    _check_strong_duality(n, m, seed)


@settings(max_examples=20, deadline=None)
@given(st.integers(1, 60), st.integers(1, 3), st.integers(0, 2**31 - 1))
def test_the_interior_point_prices_are_optimal_duals_too(n, m, seed):
    """LPs over more than INTERIOR_POINT_ABOVE_JOBS jobs go to HiGHS's interior-point method
    (lowered to 0 here); its prices must be optimal duals as well."""
    import primal_dual.lp_prices as lp

    saved = lp.INTERIOR_POINT_ABOVE_JOBS
    lp.INTERIOR_POINT_ABOVE_JOBS = 0
    try:
        _check_strong_duality(n, m, seed)
    finally:
        lp.INTERIOR_POINT_ABOVE_JOBS = saved


@settings(max_examples=20, deadline=None)
@given(st.integers(2, 80), st.integers(1, 3), st.integers(0, 2**31 - 1))
def test_identical_jobs_aggregated_give_optimal_duals(n, m, seed):
    """Above INTERIOR_POINT_ABOVE_JOBS (lowered to 0 here) jobs with the same values and gang
    are one LP row bounded by their count; with few distinct values most jobs have a twin, and
    the prices must still be optimal duals of the job-by-job LP."""
    import primal_dual.lp_prices as lp

    saved = lp.INTERIOR_POINT_ABOVE_JOBS
    lp.INTERIOR_POINT_ABOVE_JOBS = 0
    try:
        _check_strong_duality(n, m, seed, distinct_values=3)
    finally:
        lp.INTERIOR_POINT_ABOVE_JOBS = saved


@settings(max_examples=30, deadline=None)
@given(st.integers(20, 120), st.integers(1, 3), st.integers(0, 2**31 - 1))
def test_column_generation_prices_are_optimal_duals(n, m, seed):
    """Above RESTRICTED_ABOVE_JOBS (lowered to 0 here, and column generation taken whatever its
    first LP's share of the rows) a queue is priced by column generation from the best jobs per
    GPU; its prices must be optimal duals of the job-by-job LP, degenerate rounds (integer
    values, many ties) included."""
    import primal_dual.lp_prices as lp

    saved = lp.RESTRICTED_ABOVE_JOBS, lp.RESTRICTED_SHARE
    lp.RESTRICTED_ABOVE_JOBS, lp.RESTRICTED_SHARE = 0, 1.0
    try:
        _check_strong_duality(n, m, seed)
        _check_strong_duality(n, m, seed, distinct_values=4)
    finally:
        lp.RESTRICTED_ABOVE_JOBS, lp.RESTRICTED_SHARE = saved


def test_column_generation_solves_a_long_queue_on_few_rows_to_the_whole_lps_prices(monkeypatch):
    """2,000 jobs for 12 GPUs: the restricted LP holds a small part of the queue, jobs it left out
    with a positive payoff are priced in, and on a generic instance (unique duals) the prices are
    the whole LP's."""
    import primal_dual.lp_prices as lp

    rng = np.random.default_rng(7)
    n, m = 2000, 3
    values = rng.uniform(0, 10, size=(n, m)) * (rng.random((n, m)) > 0.2)
    # the best value per GPU on each type belongs to jobs that are worth more elsewhere, so the
    # first restricted LP misses jobs the optimum needs
    values[:30] = rng.uniform(50, 60, size=(30, m))
    gang = rng.choice([1, 2, 4], size=n)
    cap = np.array([5.5, 3.25, 3.5])
    solved_rows: list[int] = []
    real = lp._dual_prices

    def counting(jj, kk, col_value, col_width, copies, capacity, interior_point):
        solved_rows.append(len(copies))
        return real(jj, kk, col_value, col_width, copies, capacity, interior_point)

    monkeypatch.setattr(lp, "_dual_prices", counting)
    got = type_prices(values, gang, cap)
    assert solved_rows and max(solved_rows) < n // 4, solved_rows
    want = np.maximum(-linprog_type_duals(values, gang, cap), 0.0)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)


def _check_strong_duality(n: int, m: int, seed: int, distinct_values: int | None = None) -> None:
    """``distinct_values``: draw each value from that many integers (many identical jobs)."""
    from scipy.optimize import linprog

    rng = np.random.default_rng(seed)
    if distinct_values is None:
        values = rng.uniform(0, 10, size=(n, m)) * (rng.random((n, m)) > 0.2)
    else:
        values = rng.integers(1, distinct_values + 1, size=(n, m)).astype(float)
        values *= rng.random((n, m)) > 0.2
    gang = rng.choice([1, 2, 4], size=n)
    cap = rng.integers(1, 8, size=m).astype(float)
    p = type_prices(values, gang, cap)
    assert (p >= 0).all()
    a = np.zeros((n + m, n * m))
    for j in range(n):
        for k in range(m):
            a[j, j * m + k] = 1.0
            a[n + k, j * m + k] = gang[j]
    bounds = [(0, None if values[j, k] > 0 else 0) for j in range(n) for k in range(m)]
    primal = -linprog(
        -values.ravel(),
        A_ub=a,
        b_ub=np.concatenate([np.ones(n), cap]),
        bounds=bounds,
        method="highs",
    ).fun
    dual = np.maximum(_payoffs(values, gang, p).max(axis=1), 0).sum() + (cap * p).sum()
    assert abs(dual - primal) <= 1e-6 * max(1.0, primal)


def test_no_jobs_or_no_runnable_cells_cost_nothing():
    assert type_prices(np.zeros((0, 2)), np.zeros(0), np.array([1.0, 1.0])).tolist() == [0.0, 0.0]
    assert type_prices(np.zeros((3, 2)), np.ones(3), np.array([1.0, 1.0])).tolist() == [0.0, 0.0]


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 80), st.integers(1, 3), st.integers(0, 2**31 - 1))
def test_the_prices_equal_those_of_scipys_linprog_on_the_same_lp(n, m, seed):
    """The LP goes to HiGHS through highspy; scipy's ``linprog(method="highs")`` reaches HiGHS too
    (dual simplex). On generic instances (continuous random values and capacities: a unique
    optimal dual) both give the same prices. Degenerate rounds (a type exactly filled) have many
    optimal duals, and which one HiGHS returns can change between its releases: hence the pinned
    ``highspy`` minor version in pyproject.toml."""
    rng = np.random.default_rng(seed)
    values = rng.uniform(0, 10, size=(n, m)) * (rng.random((n, m)) > 0.2)
    gang = rng.choice([1, 2, 4], size=n)
    cap = rng.uniform(1, 8, size=m)
    if not (values > 0).any():
        assert type_prices(values, gang, cap).tolist() == [0.0] * m
        return
    want = np.maximum(-linprog_type_duals(values, gang, cap), 0.0)
    np.testing.assert_allclose(type_prices(values, gang, cap), want, rtol=1e-9, atol=1e-9)


def test_solving_prints_nothing(capfd):
    """HiGHS's banner and log stay off the user's terminal (also at the first solve of a process)."""
    import subprocess
    import sys

    code = (
        "import numpy as np; from primal_dual.lp_prices import type_prices; "
        "print(type_prices(np.array([[3.0, 1.0], [2.0, 2.0]]), np.array([1, 1]), np.array([1.0, 1.0])))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stderr == ""
    assert out.stdout.strip().startswith("[") and out.stdout.count("\n") == 1, out.stdout


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 40), st.integers(1, 3), st.integers(0, 2**31 - 1))
def test_an_lp_where_no_type_can_be_filled_prices_nothing_as_the_solver_does(n, m, seed):
    """When every type's capacity exceeds what all the jobs that can run on it could take, the
    capacity rows are slack at every feasible point: the prices are 0 without a solve, and the
    solver (scipy's linprog here) agrees."""
    rng = np.random.default_rng(seed)
    values = rng.uniform(0, 10, size=(n, m)) * (rng.random((n, m)) > 0.2)
    values[0, 0] = 1.0  # something to run
    gang = rng.choice([1, 2, 4], size=n)
    demand = ((values > 0) * gang[:, None]).sum(axis=0)
    cap = demand + rng.uniform(0.5, 3.0, size=m)
    assert type_prices(values, gang, cap).tolist() == [0.0] * m
    assert np.abs(linprog_type_duals(values, gang, cap)).max() == 0.0


def linprog_type_duals(values: np.ndarray, gang: np.ndarray, cap: np.ndarray) -> np.ndarray:
    """The capacity rows' marginals of the same LP solved by scipy's ``linprog`` (HiGHS)."""
    from scipy import sparse
    from scipy.optimize import linprog

    n, m = values.shape
    jj, kk = np.nonzero(values > 0)
    nv = jj.size
    a = sparse.csr_matrix(
        (
            np.concatenate([np.ones(nv), gang[jj].astype(float)]),
            (np.concatenate([jj, n + kk]), np.concatenate([np.arange(nv), np.arange(nv)])),
        ),
        shape=(n + m, nv),
    )
    res = linprog(-values[jj, kk], A_ub=a, b_ub=np.concatenate([np.ones(n), cap]), method="highs")
    return np.asarray(res.ineqlin.marginals[n:], dtype=float)
