"""How many jobs each job has shared the cluster with (the n of the finish-time fairness bound)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Contention:
    """How many jobs each job has shared the cluster with: the time-average, over the rounds since
    the job was first seen, of the number of jobs present (Themis's n, which the finish-time
    fairness bound needs). Between two rounds the count of the earlier one holds."""

    t: float | None = None
    n: int = 0
    area: float = 0.0
    """Job-seconds of presence summed since the first round."""
    since: dict[int, tuple[float, float]] = field(default_factory=dict)
    """Per job present: (``area``, time) when it was first seen."""

    def observe(self, now: float, job_ids: Sequence[int]) -> None:
        if self.t is not None and now > self.t:
            self.area += self.n * (now - self.t)
        self.t, self.n = now, len(job_ids)
        self.since = {j: self.since.get(j, (self.area, now)) for j in job_ids}

    def average(self, job_id: int) -> float:
        """The time-averaged number of jobs present since ``job_id`` was first seen (the current
        count in its first round)."""
        area0, t0 = self.since.get(job_id, (self.area, self.t))
        if self.t is None or t0 is None or self.t <= t0:
            return float(self.n)
        return (self.area - area0) / (self.t - t0)

    def to_json(self) -> dict[str, Any]:
        return {
            "t": self.t,
            "n": self.n,
            "area": self.area,
            "since": {str(j): list(v) for j, v in self.since.items()},
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Contention:
        since = {int(j): (float(a), float(t)) for j, (a, t) in data["since"].items()}
        return cls(data["t"], int(data["n"]), float(data["area"]), since)
