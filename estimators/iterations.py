"""What a worker measured of one elastic job's round: iteration times and gradient statistics.

Real runs of elastic jobs report, per round (``nodes/gradstats.py`` measures it, the
coordinator files it with the run's online throughput model, ``estimators/online.py``), the
configuration the round ran on and what it measured there. Policies read it through the round
context's throughput model (:meth:`estimators.throughput.ThroughputModel.iterations`), the path
measured throughputs already take: PolluxAgent fits its throughput model (Pollux Eq. 11) to the
step and sync times and tracks the gradient noise scale from the norms.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from hadar.core.errors import InputError


@dataclass(frozen=True)
class IterationSample:
    """One round of one elastic job: its configuration and the means over its steps."""

    round: int
    num_nodes: int
    num_replicas: int
    local_bsz: int
    """Samples per replica per step."""
    steps: int
    step_time: float
    """Seconds per step (forward, backward, gradient all-reduce, optimiser; emulated slow-down
    included)."""
    sync_time: float
    """Seconds per step spent in the gradient all-reduce (0 with one replica)."""
    replica_sqnorms: tuple[float, ...] = ()
    """Per replica, the mean over steps of its local gradient's squared norm (K >= 2)."""
    mean_sqnorm: float | None = None
    """The mean over steps of the averaged gradient's squared norm (K >= 2)."""
    diff_sqnorm: float | None = None
    """One replica: the mean over consecutive steps of |g_t - g_(t-1)|^2."""
    dot: float | None = None
    """One replica: the mean over consecutive steps of g_t . g_(t-1)."""

    def __post_init__(self) -> None:
        for name in ("num_nodes", "num_replicas", "local_bsz", "steps"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise InputError(f"iteration sample: {name} must be an integer >= 1 (got {v!r})")
        for name in ("step_time", "sync_time"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0):
                raise InputError(f"iteration sample: {name} must be a number >= 0 (got {v!r})")
        if self.step_time <= 0:
            raise InputError("iteration sample: step_time must be > 0")

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["replica_sqnorms"] = list(self.replica_sqnorms)
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> IterationSample:
        fields = dict(data)
        fields["replica_sqnorms"] = tuple(float(x) for x in fields.get("replica_sqnorms") or ())
        try:
            return cls(**fields)
        except TypeError as exc:
            raise InputError(f"iteration sample: {exc}") from None
