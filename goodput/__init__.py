"""Goodput of data-parallel training (Pollux, OSDI'21, section 3): the iteration-time model
(Eq. 8-11), statistical efficiency from the gradient noise scale (Eq. 5-6), goodput (Eq. 4) and
the choice of batch size, plus fitting the iteration-time model to measurements.

Pure maths (numpy, scipy): no I/O, no clocks, no global state.
"""

from typing import TYPE_CHECKING, Any

from goodput.model import (
    BatchChoice,
    GoodputModel,
    GradParams,
    PerfParams,
    compute_time,
    overlapped_time,
    speedup,
    statistical_efficiency,
    step_time,
    sync_time,
    total_batch_size,
)

if TYPE_CHECKING:
    from goodput.fit import FitResult, fit_perf_params


def __getattr__(name: str) -> Any:
    """``FitResult`` and ``fit_perf_params`` load the fitting module (SciPy's optimiser) on first
    use, so a policy that only evaluates the model (Hadar's batch search) does not import it."""
    if name in ("FitResult", "fit_perf_params"):
        from goodput import fit

        return getattr(fit, name)
    raise AttributeError(f"module 'goodput' has no attribute {name!r}")


__all__ = [
    "BatchChoice",
    "FitResult",
    "GoodputModel",
    "GradParams",
    "PerfParams",
    "compute_time",
    "fit_perf_params",
    "overlapped_time",
    "speedup",
    "statistical_efficiency",
    "step_time",
    "sync_time",
    "total_batch_size",
]
