"""The HiGHS LP helper returns what scipy's linprog(method="highs") returns, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import sparse
from scipy.optimize import linprog

from primal_dual import level_lp
from primal_dual.column_matrix import ColumnMatrix
from primal_dual.highs_lp import LpSolution, solve_lp
from primal_dual.level_lp import min_makespan


def _random_lp(rng: np.random.Generator, rows: int, cols: int, density: float):
    a = sparse.random(rows, cols, density=density, random_state=rng, format="csr")
    a.data = np.round(rng.uniform(0.5, 4.0, a.data.size), 2)  # ties: degenerate optima
    cost = -np.round(rng.uniform(0.0, 3.0, cols), 1)
    b = np.round(rng.uniform(1.0, 10.0, rows), 0)
    upper = np.where(rng.random(cols) < 0.3, np.inf, np.round(rng.uniform(0.5, 2.0, cols), 1))
    return cost, a, b, upper


@pytest.mark.parametrize("seed", range(30))
def test_the_same_solution_as_linprog_bit_for_bit(seed):
    rng = np.random.default_rng(seed)
    cost, a, b, upper = _random_lp(rng, int(rng.integers(2, 40)), int(rng.integers(2, 60)), 0.3)
    ours = solve_lp(cost, a, b, np.zeros(len(cost)), upper)
    theirs = linprog(
        cost, A_ub=a, b_ub=b, bounds=np.column_stack([np.zeros(len(cost)), upper]), method="highs"
    )
    assert ours.optimal == (theirs.status == 0)
    if ours.optimal:
        assert np.array_equal(ours.x, theirs.x)
        assert np.array_equal(ours.row_duals, theirs.ineqlin.marginals)


def test_an_unbounded_model_is_not_optimal_and_says_so():
    ours = solve_lp(
        np.array([-1.0, 0.0]),
        np.array([[0.0, 1.0]]),
        np.array([1.0]),
        np.zeros(2),
        np.full(2, np.inf),
    )
    assert not ours.optimal and ours.x.size == 0
    assert "unbounded" in ours.status.lower()


def test_row_lower_bounds_are_kept():
    # minimise x subject to 2 <= x + y <= 5, y <= 1: x = 1
    ours = solve_lp(
        np.array([1.0, 0.0]),
        np.array([[1.0, 1.0]]),
        np.array([5.0]),
        np.zeros(2),
        np.array([np.inf, 1.0]),
        row_lower=np.array([2.0]),
    )
    assert ours.optimal and ours.x[0] == pytest.approx(1.0)


def _through_linprog(cost, a, row_upper, col_lower, col_upper, row_lower=None):
    assert row_lower is None
    if isinstance(a, ColumnMatrix):  # the same matrix, as scipy holds it
        a = sparse.csc_array((a.value, a.index, a.start), shape=(a.n_rows, a.n_cols))
    res = linprog(
        cost, A_ub=a, b_ub=row_upper, bounds=np.column_stack([col_lower, col_upper]), method="highs"
    )
    return LpSolution(res.status == 0, res.x, res.ineqlin.marginals, res.message)


@pytest.mark.parametrize("seed", range(10))
def test_the_level_lp_is_the_one_linprog_solved(seed):
    # the makespan LP as Gavel's policies and Hadar's TTD guard build it, against the same
    # model given to linprog (the code before this helper)
    rng = np.random.default_rng(100 + seed)
    jobs, types = int(rng.integers(1, 30)), int(rng.integers(1, 4))
    rates = np.where(
        rng.random((jobs, types)) < 0.85, np.round(rng.uniform(0.1, 5.0, (jobs, types)), 2), 0.0
    )
    gangs = rng.choice([1, 1, 2, 4, 8], size=jobs).astype(float)
    counts = rng.choice([4, 8, 16, 36], size=types).astype(float)
    remaining = np.round(rng.uniform(10.0, 5000.0, jobs), 0)
    got = min_makespan(rates, gangs, counts, remaining)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(level_lp, "solve_lp", _through_linprog)
        reference = min_makespan(rates, gangs, counts, remaining)
    assert np.array_equal(got.x, reference.x) and got.level == reference.level
    assert np.isfinite(got.level) and got.level >= 0.0
    assert got.x.shape == (jobs, types)
    # the allocation is feasible: each job's time and each type's GPUs within bounds
    assert (got.x.sum(axis=1) <= 1 + 1e-7).all()
    assert (gangs @ got.x <= counts + 1e-6).all()
