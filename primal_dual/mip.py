"""Small integer programs on HiGHS through ``highspy``, without ``scipy.optimize.milp``'s input
validation and option parsing.

``milp`` spends more time converting and checking a small model than HiGHS spends on it (the
type matching solves about 120 of 20-160 variables per ``philly-480`` run: 2.5 ms of wrapper
each), and importing ``scipy.optimize`` is a quarter of a second of start-up. :func:`solve_mip`
hands HiGHS the model ``milp`` would build (the same column-wise matrix, bounds, integrality and
options), so it returns the same solution (``tests/primal_dual/test_mip.py`` checks it against
``milp``), and says whether the time limit stopped the search. The HiGHS release is the pinned
``highspy``'s (pyproject.toml), not whichever scipy bundles.

It first solves the LP relaxation (the same model without integrality); where that optimum is
integral no integer point is better, and it is returned without branch and bound. The type
matching's programs are transportation problems with gang weights, whose relaxation is integral
in most rounds: the 10,000-job benchmark round's program (3,387 variables) takes 0.012 s instead
of 0.05 s, and every recorded decision is the same (``benchmarks/decision_hash.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from hadar.core.native_output import drop_solver_debug_lines
from primal_dual.column_matrix import ColumnMatrix


@dataclass(frozen=True)
class MipResult:
    """An integer program's best solution found (None if none), its objective (inf if none),
    and whether the time limit stopped the search before optimality was proved."""

    x: np.ndarray | None
    objective: float
    time_limit_hit: bool


def solve_mip(
    cost: np.ndarray,
    a: ColumnMatrix,
    row_lower: np.ndarray,
    row_upper: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
    time_limit_s: float,
) -> MipResult:
    """Minimise ``cost @ x`` s.t. ``row_lower <= a @ x <= row_upper``, ``lower <= x <= upper``,
    every ``x`` integer, within ``time_limit_s``."""
    from highspy import _core as h

    c = np.asarray(cost, dtype=np.float64)
    n = c.size
    if a.n_cols != n:
        raise ValueError(f"solve_mip: {n} costs for a matrix of {a.n_cols} columns")
    lp = h.HighsLp()
    lp.num_col_ = n
    lp.num_row_ = a.n_rows
    lp.a_matrix_.num_col_ = n
    lp.a_matrix_.num_row_ = a.n_rows
    lp.a_matrix_.format_ = h.MatrixFormat.kColwise
    lp.col_cost_ = c
    lp.col_lower_ = np.asarray(lower, dtype=np.float64)
    lp.col_upper_ = np.asarray(upper, dtype=np.float64)
    lp.row_lower_ = np.asarray(row_lower, dtype=np.float64)
    lp.row_upper_ = np.asarray(row_upper, dtype=np.float64)
    lp.a_matrix_.start_ = a.start
    lp.a_matrix_.index_ = a.index
    lp.a_matrix_.value_ = np.asarray(a.value, dtype=np.float64)
    relaxed = _integral_relaxation(h, lp, time_limit_s)
    if relaxed is not None:
        return relaxed
    lp.integrality_ = [h.HighsVarType(1)] * n
    highs = h._Highs()
    options = h.HighsOptions()
    options.log_to_console = False  # what milp sets, in its order
    options.time_limit = float(time_limit_s)
    highs.passOptions(options)
    highs.passModel(lp)
    with drop_solver_debug_lines():  # HiGHS's MIP solver prints a debug line in some solves
        highs.run()
    status = highs.getModelStatus()
    objective = float(highs.getInfo().objective_function_value)
    timed_out = status == h.HighsModelStatus.kTimeLimit
    if status == h.HighsModelStatus.kOptimal or (timed_out and objective != h.kHighsInf):
        return MipResult(np.array(highs.getSolution().col_value), objective, timed_out)
    return MipResult(None, float("inf"), timed_out)


def _integral_relaxation(h: Any, lp: Any, time_limit_s: float) -> MipResult | None:
    """The LP relaxation's optimum where it is integral (then no integer point is better), else
    None (also when it is not solved within ``time_limit_s``)."""
    highs = h._Highs()
    options = h.HighsOptions()
    options.log_to_console = False
    options.time_limit = float(time_limit_s)
    highs.passOptions(options)
    highs.passModel(lp)
    highs.run()
    if highs.getModelStatus() != h.HighsModelStatus.kOptimal:
        return None
    x = np.array(highs.getSolution().col_value)
    rounded = np.round(x)
    if np.abs(x - rounded).max(initial=0.0) > 1e-9:
        return None
    return MipResult(rounded, float(highs.getInfo().objective_function_value), False)
