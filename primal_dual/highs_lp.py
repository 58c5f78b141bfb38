"""Linear programs on HiGHS through ``highspy``, as ``scipy.optimize.linprog(method="highs")``
hands them to the same solver, without ``linprog``'s input checks and conversions.

``linprog`` spends more time validating, converting and wrapping a small model than HiGHS spends
solving it (Gavel's level LPs: about 99 per ``philly-480`` run), and importing
``scipy.optimize`` costs a quarter of a second of every command's start-up. :func:`solve_lp` gives
HiGHS the model ``linprog`` would build (column-wise matrix in canonical order, infinite bounds
as HiGHS's infinity) with the options ``linprog`` sets (presolve on, dual simplex where simplex
runs, no output), so it returns the same solution: ``tests/primal_dual/test_highs_lp.py`` checks
it against ``linprog`` bit for bit. The HiGHS release is the pinned ``highspy``'s (pyproject.toml).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from primal_dual.column_matrix import ColumnMatrix


@dataclass(frozen=True)
class LpSolution:
    """HiGHS's answer: whether the model is optimal, the columns' values and the rows' duals
    (HiGHS's signs: minimisation), both empty unless optimal, and HiGHS's status in words."""

    optimal: bool
    x: np.ndarray
    row_duals: np.ndarray
    status: str


def solve_lp(
    cost: np.ndarray,
    a: ColumnMatrix | Any,
    row_upper: np.ndarray,
    col_lower: np.ndarray,
    col_upper: np.ndarray,
    row_lower: np.ndarray | None = None,
) -> LpSolution:
    """Minimise ``cost @ x`` s.t. ``row_lower <= a @ x <= row_upper`` (``row_lower`` -inf when
    None: ``linprog``'s ``A_ub``), ``col_lower <= x <= col_upper``; ``a`` is a
    :class:`ColumnMatrix`, a scipy sparse matrix or a dense array. Infinite bounds may be
    ``np.inf``."""
    import highspy
    from highspy import _core as h

    csc = a if isinstance(a, ColumnMatrix) else ColumnMatrix.from_sparse(a)
    n_rows, n_cols = csc.n_rows, csc.n_cols
    inf = highspy.kHighsInf

    def finite(v: np.ndarray | None, default: float) -> np.ndarray:
        out = np.full(n_rows, default) if v is None else np.asarray(v, dtype=np.float64).copy()
        out[np.isposinf(out)] = inf
        out[np.isneginf(out)] = -inf
        return out

    lp = h.HighsLp()
    lp.num_col_, lp.num_row_ = n_cols, n_rows
    lp.a_matrix_.num_col_, lp.a_matrix_.num_row_ = n_cols, n_rows
    lp.a_matrix_.format_ = h.MatrixFormat.kColwise
    lp.col_cost_ = np.asarray(cost, dtype=np.float64)
    lp.col_lower_ = finite(np.broadcast_to(np.asarray(col_lower, float), (n_cols,)), -inf)
    lp.col_upper_ = finite(np.broadcast_to(np.asarray(col_upper, float), (n_cols,)), inf)
    lp.row_lower_ = finite(row_lower, -inf)
    lp.row_upper_ = finite(row_upper, inf)
    lp.a_matrix_.start_ = csc.start
    lp.a_matrix_.index_ = csc.index
    lp.a_matrix_.value_ = csc.value
    highs = h._Highs()
    options = h.HighsOptions()
    # what linprog(method="highs") sets, in its order
    options.presolve = "on"
    options.log_to_console = False
    options.output_flag = False
    options.simplex_strategy = 1  # dual simplex
    highs.passOptions(options)
    highs.passModel(lp)
    highs.run()
    status = highs.getModelStatus()
    if status != h.HighsModelStatus.kOptimal:
        empty = np.zeros(0)
        return LpSolution(False, empty, empty, highs.modelStatusToString(status))
    solution = highs.getSolution()
    return LpSolution(
        True,
        np.asarray(solution.col_value, dtype=float),
        np.asarray(solution.row_dual, dtype=float),
        "optimal",
    )
