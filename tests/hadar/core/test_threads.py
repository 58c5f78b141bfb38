"""``one_blas_thread``: every loaded BLAS runs on one thread inside the block, as before after."""

from __future__ import annotations

import pytest
import scipy.linalg  # noqa: F401  (loads SciPy's own BLAS beside NumPy's)

from hadar.core.threads import one_blas_thread

threadpoolctl = pytest.importorskip("threadpoolctl")


def _blas_threads() -> list[int]:
    return [i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"]


def test_limits_every_blas_inside_and_restores_after() -> None:
    with threadpoolctl.threadpool_limits(limits=2, user_api="blas"):
        before = _blas_threads()
        assert before and all(n == 2 for n in before)
        with one_blas_thread():
            assert all(n == 1 for n in _blas_threads())
            with one_blas_thread():  # nested: still one, and the outer block's limit after
                assert all(n == 1 for n in _blas_threads())
            assert all(n == 1 for n in _blas_threads())
        assert _blas_threads() == before


def test_restores_after_an_exception() -> None:
    with threadpoolctl.threadpool_limits(limits=2, user_api="blas"):
        before = _blas_threads()
        with pytest.raises(RuntimeError), one_blas_thread():
            raise RuntimeError("boom")
        assert _blas_threads() == before


def test_the_round_loop_decides_on_one_blas_thread() -> None:
    from hadar import api
    from hadar.policy import RoundContext, RoundPlan
    from hadar.policy_options import policy_with_options

    policy = policy_with_options("gavel", None)  # a policy that does not limit them itself
    decide = policy.decide
    seen: list[list[int]] = []

    def recording(ctx: RoundContext) -> RoundPlan:
        seen.append(_blas_threads())
        return decide(ctx)

    policy.decide = recording  # type: ignore[method-assign]
    with threadpoolctl.threadpool_limits(limits=2, user_api="blas"):
        api.simulate("aws-5node", "M-1", policy)
        assert all(n == 2 for n in _blas_threads())  # restored after the run
    assert seen and all(n == 1 for threads in seen for n in threads)
