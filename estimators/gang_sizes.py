"""Throughputs at GPU counts a table did not measure (elastic jobs on Gavel's table).

Gavel's table measures each job type at 1, 2, 4 and 8 GPUs. An elastic job (``min_gpus <
max_gpus``) may run on any count in between, so :class:`InterpolatedGangs` wraps a
:class:`~estimators.throughput.GavelThroughputTable`:

* at a measured count the table's figure is used as is;
* between two measured counts ``a < g < b`` the rate is interpolated linearly,
  ``r(g) = r(a) + (g - a) / (b - a) * (r(b) - r(a))``, per GPU type and separately for the
  consolidated and multi-node figures (a multi-node figure missing at ``a`` or ``b`` falls back
  as in the table: the consolidated figure times the table's penalty);
* above the largest measured count the rate stays at that count's (a job gains nothing from
  GPUs nobody measured it on), and a count below the smallest measured one has no rate (0).
  Where either neighbour's rate is 0 (the job cannot run there) the interpolated rate is 0.

A job's rate on a placement is taken at the placement's GPU count, not at the job's
``num_gpus`` (for a rigid job the two are equal, so nothing changes for it).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable

import numpy as np

from estimators.throughput import EstimatedCell, GavelThroughputTable, ThroughputModel
from hadar.core.cluster import Cluster
from hadar.core.jobs import Job, Placement, at_placement


def interpolate(points: dict[int, float], g: int) -> float:
    """The rate at ``g`` GPUs from ``points`` (GPU count -> rate), as the module docstring says."""
    if g in points:
        return points[g]
    counts = sorted(points)
    if not counts or g < counts[0]:
        return 0.0
    if g > counts[-1]:
        return points[counts[-1]]
    i = bisect.bisect_left(counts, g)
    a, b = counts[i - 1], counts[i]
    ra, rb = points[a], points[b]
    if ra <= 0 or rb <= 0:
        return 0.0
    return ra + (g - a) / (b - a) * (rb - ra)


class InterpolatedGangs(ThroughputModel):
    """``base``'s figures, interpolated between measured GPU counts (module docstring)."""

    def __init__(self, base: GavelThroughputTable) -> None:
        self.base = base
        self._cells: dict[
            tuple[str, int, tuple[str, ...], tuple[int, ...]], tuple[np.ndarray, np.ndarray]
        ] = {}

    def cell_rates(self, job: Job, cluster: Cluster) -> tuple[np.ndarray, np.ndarray]:
        sizes = self.base.gang_sizes(job.job_type)
        if job.num_gpus in sizes or not sizes:
            return self.base.cell_rates(job, cluster)
        key = (job.job_type, job.num_gpus, cluster.gpu_types, cluster.capacity.shape)
        hit = self._cells.get(key)
        if hit is None:
            per_type = []
            for consolidated in (True, False):
                row = []
                for gtype in cluster.gpu_types:
                    points = {
                        w: self.base.lookup(job.job_type, gtype, w, consolidated) for w in sizes
                    }
                    row.append(interpolate(points, job.num_gpus))
                per_type.append(np.broadcast_to(np.array(row), cluster.capacity.shape))
            hit = self._cells[key] = (per_type[0], per_type[1])
        return hit[0], hit[1]

    def rate(self, job: Job, placement: Placement, cluster: Cluster) -> float:
        return super().rate(at_placement(job, placement), placement, cluster)

    def describe(self, job: Job, cluster: Cluster) -> str:
        return f"{self.base.describe(job, cluster)}, interpolated between measured GPU counts"

    def estimated_cells(self, jobs: Iterable[Job], cluster: Cluster) -> list[EstimatedCell]:
        return self.base.estimated_cells(jobs, cluster)

    def reference_job_types(self) -> list[tuple[str, int]]:
        return self.base.reference_job_types()
