"""Small integer programs through scipy's HiGHS directly (primal_dual/mip.py): the same solution
as ``scipy.optimize.milp`` on the same model, and a time limit that is reported."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import sparse
from scipy.optimize import Bounds, LinearConstraint, milp

from primal_dual.column_matrix import ColumnMatrix
from primal_dual.mip import solve_mip


def _assignment(
    seed: int,
) -> tuple[np.ndarray, sparse.csr_matrix, np.ndarray, np.ndarray, np.ndarray]:
    """A type-matching-like program: groups of jobs (rows = group sizes) over types (capacity)."""
    rng = np.random.default_rng(seed)
    groups, types = int(rng.integers(3, 12)), 3
    size = rng.integers(1, 5, groups).astype(float)
    gang = rng.choice([1.0, 2.0, 4.0], groups)
    cost = rng.uniform(1.0, 10.0, (groups, types))
    gi, ki = np.nonzero(np.ones((groups, types), dtype=bool))
    nv = gi.size
    rows = np.concatenate([gi, groups + ki])
    cols = np.concatenate([np.arange(nv), np.arange(nv)])
    a = sparse.csr_matrix(
        (np.concatenate([np.ones(nv), gang[gi]]), (rows, cols)), shape=(groups + types, nv)
    )
    cap = np.full(types, float((size * gang).sum()) / 2.0)
    lower = np.concatenate([size, np.zeros(types)])
    upper = np.concatenate([size, cap])
    return cost[gi, ki], a, lower, upper, size[gi]


@pytest.mark.parametrize("seed", range(12))
def test_the_same_solution_as_scipy_milp(seed):
    c, a, lower, upper, ub = _assignment(seed)
    ours = solve_mip(c, ColumnMatrix.from_sparse(a), lower, upper, np.zeros(c.size), ub, 5.0)
    ref = milp(
        c,
        constraints=LinearConstraint(a, lower, upper),
        integrality=np.ones(c.size),
        bounds=Bounds(np.zeros(c.size), ub),
        options={"time_limit": 5.0},
    )
    assert ref.x is not None and ours.x is not None
    assert np.array_equal(ours.x, ref.x)
    assert ours.objective == pytest.approx(ref.fun)
    assert not ours.time_limit_hit


def test_an_infeasible_program_has_no_solution():
    a = sparse.csr_matrix(np.array([[1.0, 1.0]]))
    res = solve_mip(
        np.ones(2),
        ColumnMatrix.from_sparse(a),
        np.array([3.0]),
        np.array([3.0]),
        np.zeros(2),
        np.ones(2),
        5.0,
    )
    assert res.x is None and res.objective == float("inf") and not res.time_limit_hit


def test_a_time_limit_that_binds_is_reported():
    # a 60-item knapsack-like program HiGHS cannot prove optimal in a microsecond
    rng = np.random.default_rng(0)
    n = 60
    weights = rng.integers(10, 100, n).astype(float)
    a = sparse.csr_matrix(weights[None, :])
    res = solve_mip(
        -rng.uniform(1.0, 2.0, n) * weights,
        ColumnMatrix.from_sparse(a),
        np.array([0.0]),
        np.array([weights.sum() / 2 + 0.5]),
        np.zeros(n),
        np.ones(n),
        1e-6,
    )
    assert res.time_limit_hit


def test_a_fractional_relaxation_still_gets_the_integer_optimum():
    """Where the LP relaxation is integral its optimum is returned (no integer point is better);
    here it is fractional (half of the second item fits), so the integer program is solved."""
    weights = np.array([3.0, 2.0, 2.0])
    a = sparse.csr_matrix(weights[None, :])
    res = solve_mip(
        np.array([-5.5, -3.0, -2.9]),
        ColumnMatrix.from_sparse(a),
        np.array([0.0]),
        np.array([4.0]),
        np.zeros(3),
        np.ones(3),
        5.0,
    )
    assert res.x is not None
    assert res.x.tolist() == [0.0, 1.0, 1.0]  # 5.9; the relaxation's 1, 0.5, 0 is worth 7.0
    assert res.objective == pytest.approx(-5.9)


def test_a_cost_per_column_is_required():
    a = ColumnMatrix.from_sparse(sparse.csr_matrix(np.array([[1.0, 1.0]])))
    with pytest.raises(ValueError, match="3 costs for a matrix of 2 columns"):
        solve_mip(np.ones(3), a, np.zeros(1), np.ones(1), np.zeros(3), np.ones(3), 5.0)
