"""Crash hook for crash-safety tests: a no-op unless ``HADAR_TRACKER_CRASH_AT`` is set.

``HADAR_TRACKER_CRASH_AT=<stage>`` makes the process SIGKILL itself the first time it reaches
``<stage>``; ``<stage>:<n>`` the n-th time. Stages are listed in docs/tracker.md (e.g.
``close:renamed``, ``close:in_tx``; ``STAGES`` are the tracker's, and the coordinator has
``evaluate:computed`` and ``evaluate:scored``). Production never sets the variable, and then the
hook only reads the environment.
"""

from __future__ import annotations

import os
import signal

ENV_VAR = "HADAR_TRACKER_CRASH_AT"
STAGES = (
    "register:tmp_written",
    "register:renamed",
    "register:in_tx",
    "report:in_tx",
    "close:averaged",
    "close:tmp_written",
    "close:renamed",
    "close:in_tx",
    "close:committed",
    "close:pruned",
    "rollback:in_tx",
)
_hits: dict[str, int] = {}


def crash_point(stage: str) -> None:
    """SIGKILL this process if ``HADAR_TRACKER_CRASH_AT`` names ``stage`` (and its hit count)."""
    spec = os.environ.get(ENV_VAR)
    if not spec:
        return
    name, nth = spec, 1
    head, sep, tail = spec.rpartition(":")
    if sep and tail.isdigit():
        name, nth = head, int(tail)
    if name != stage:
        return
    _hits[stage] = _hits.get(stage, 0) + 1
    if _hits[stage] >= nth:
        os.kill(os.getpid(), signal.SIGKILL)
