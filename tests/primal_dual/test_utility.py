import pytest
from hypothesis import given
from hypothesis import strategies as st

from primal_dual.utility import UTILITIES, SigmoidUtility, make_utility

taus = st.floats(min_value=1.0, max_value=1e7, allow_nan=False)


@given(
    st.floats(min_value=1.0, max_value=1e12),
    st.floats(min_value=1.0, max_value=1e12),
    st.floats(min_value=10, max_value=1e6),
)
def test_faster_completion_never_has_lower_utility(a, b, ideal):
    lo, hi = min(a, b), max(a, b)
    for u in (*(make_utility(n) for n in UTILITIES), SigmoidUtility(gamma2=1.0)):
        assert u.value(lo, 1.0, ideal) >= u.value(hi, 1.0, ideal), u.name
        assert u.value(lo, 2.0, ideal) >= u.value(lo, 1.0, ideal) >= 0, u.name  # weight never hurts


def test_sigmoid_is_half_the_weight_at_the_ideal_duration_and_floored():
    u = SigmoidUtility(gamma2=5.0)
    assert u.value(100.0, 2.0, 100.0) == 1.0
    low = u.value(1e9, 1.0, 10.0)  # would underflow to 0 without the floor
    assert 0 < low <= u.floor
    assert u.value(1e8, 1.0, 10.0) > low  # below the sigmoid's range, faster still ranks higher
    assert make_utility("inverse-slowdown").value(200.0, 1.0, 100.0) == 0.5


def test_round_progress_values_a_round_of_work_and_caps_at_finishing():
    u = make_utility("round-progress", round_s=360.0)
    assert u.value(3600.0, 1.0, 1.0) == pytest.approx(0.1)  # one round = a tenth of what is left
    assert (
        u.value(100.0, 1.0, 1.0) == u.value(300.0, 1.0, 1.0) == 1.0
    )  # finishing this round either way
    assert make_utility("inverse-remaining").value(7200.0, 2.0, 1.0) == pytest.approx(
        1.0
    )  # w x 3600 / tau
