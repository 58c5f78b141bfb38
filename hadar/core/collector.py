"""Python's cyclic garbage collector held off while a scheduler decides.

A round allocates up to millions of short-lived objects (entries, candidates, DP states, rate
memos' keys) that reference counting frees (none is part of a cycle), and every collection they
would trigger scans the whole heap: 15 % of a 100,000-job Hadar round's CPU time, and on
``pollux-hetero-64`` a full collection inside one decision took up to 0.2 s, the slowest
decision of the run. The round loop pauses the collector around every policy's decision alike
(Hadar also does it itself, for callers outside the loop); garbage cycles made meanwhile wait for
the next collection, which runs between decisions. Decisions do not change.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def cyclic_gc_paused() -> Iterator[None]:
    """Pause the cyclic collector for the block, then restore its state."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
