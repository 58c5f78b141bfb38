import math

import numpy as np
import pytest

from primal_dual.prices import PriceBounds, price_bounds, price_matrix


def eq5(u_min: float, u_max: float, g: int, c: int) -> float:
    """Eq. 5 for one cell, written out: U_min * (U_max / U_min) ** (g / c)."""
    return u_min * (u_max / u_min) ** (g / c)


@pytest.mark.parametrize(
    "g, expected", [(0, 0.0100), (1, 0.0562), (2, 0.3162), (3, 1.778), (4, 10.0)]
)
def test_price_function_values_from_the_design_note(g, expected):
    bounds = PriceBounds(u_min=np.array([0.01]), u_max=np.array([10.0]))
    assert price_matrix(bounds, np.array([[g]]), np.array([[4]]))[0, 0] == pytest.approx(
        expected, rel=1e-3
    )


def test_price_matrix_matches_scalar_and_marks_missing_capacity_infinite():
    bounds = PriceBounds(u_min=np.array([0.01, 1e-9]), u_max=np.array([10.0, 2.0]))
    cap = np.array([[4, 0], [0, 8], [2, 2]])
    alloc = np.array([[1, 0], [0, 3], [2, 1]])
    p = price_matrix(bounds, alloc, cap)
    assert math.isinf(p[0, 1]) and math.isinf(p[1, 0])
    assert p[0, 0] == pytest.approx(eq5(0.01, 10.0, 1, 4))
    assert p[1, 1] == pytest.approx(eq5(1e-9, 2.0, 3, 8))
    assert p[2, 0] == pytest.approx(10.0)  # full node: U_max


def test_price_is_monotone_in_allocation():
    bounds = PriceBounds(np.array([1e-12]), np.array([0.5]))
    cap = np.array([[8]])
    prices = [price_matrix(bounds, np.array([[g]]), cap)[0, 0] for g in range(9)]
    assert all(a < b for a, b in zip(prices, prices[1:], strict=False))
    assert prices[0] == pytest.approx(1e-12) and prices[-1] == pytest.approx(0.5)


def test_price_bounds_by_hand():
    # two jobs, two types; job 1 cannot run on type 1.
    ideal_u = np.array([[0.5, 0.2], [0.4, 0.0]])
    latest_u = np.array([0.01, 0.02])
    w = np.array([1, 2])
    rounds = np.array([[3, 6], [2, 1]])
    runnable = np.array([[True, True], [True, False]])
    b = price_bounds(ideal_u, latest_u, w, rounds, runnable, eta=1.0)
    # U_max[0] = max(0.5/1, 0.4/2) = 0.5 ; U_max[1] = 0.2/1
    assert b.u_max.tolist() == pytest.approx([0.5, 0.2])
    # U_min[0] = 1/4 * min(0.01/(1*3), 0.02/(2*2)) = 1/4 * 0.00333 ; U_min[1] = 1/4 * 0.01/6
    assert b.u_min.tolist() == pytest.approx([0.01 / 3 / 4, 0.01 / 6 / 4])
    b2 = price_bounds(ideal_u, latest_u, w, rounds, runnable, eta=2.0)
    assert b2.u_min.tolist() == pytest.approx((b.u_min / 2).tolist())
    with pytest.raises(ValueError):
        price_bounds(ideal_u, latest_u, w, rounds, runnable, eta=0.5)
