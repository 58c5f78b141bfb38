"""One BLAS thread while a scheduler decides.

NumPy and SciPy each load an OpenBLAS that starts a pool of threads, one per core, and those
threads spin for a while after every call, waiting for more work. A decision makes many tiny
BLAS calls (Pollux's L-BFGS-B fits of Eq. 11, the LP and integer-program set-up, small
reductions) that are never large enough to gain from a second thread, so the pool only burns
CPU: measured on a loaded 2-core machine, one Pollux decision on ``pollux-6`` (64 GPUs) took
0.5-1.9 CPU s with the pool and 0.03-0.08 s with one thread, the same decision (Hadar's rounds,
whose BLAS calls are fewer, measured alike within the machine's noise). Decisions do not change:
the decision hashes of Hadar, Pollux and AFS are identical (``benchmarks/decision_hash.py``,
``benchmarks/decision_cpu.py``).

:func:`one_blas_thread` limits every loaded BLAS to one thread for the duration of a block
(``threadpoolctl``; a no-op where it is not installed) and restores the previous limits after.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_controller: Any = None
_modules_seen = -1
"""``len(sys.modules)`` when the controller last listed the loaded libraries: a module imported
since may have loaded another BLAS (SciPy's is loaded with ``scipy.linalg``)."""


@contextmanager
def one_blas_thread() -> Iterator[None]:
    """Run the block with every loaded BLAS limited to one thread, then restore the limits."""
    controller = _blas_controller()
    if controller is None:
        yield
        return
    with controller.limit(limits=1, user_api="blas"):
        yield


def _blas_controller() -> Any:
    """The threadpoolctl controller over the BLAS libraries loaded now (listed again when modules
    were imported since: 15 ms, a few times per process), or None without threadpoolctl."""
    global _controller, _modules_seen
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:  # pragma: no cover - a dependency; tolerate a stripped install
        return None
    if _modules_seen != len(sys.modules):
        _controller = ThreadpoolController()
        _modules_seen = len(sys.modules)
    return _controller
