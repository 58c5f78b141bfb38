"""Measured where available, Eq. 10 elsewhere: the throughput model simulations should use.

A cell (job type, GPU type, gang size W) takes the table's consolidated figure when the table
has it (0 included: "measured, cannot run"); the unconsolidated figure likewise, with the table's
documented fallback (consolidated x penalty) when only the consolidated one is measured.
Everything else comes from a :class:`PmiEstimator` anchored on the same table. The model records
which (job type, GPU type) pairs it had to estimate so outputs can say "estimated".
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

import numpy as np

from estimators.pmi import PmiEstimator, job_profile
from estimators.throughput import GavelThroughputTable, ThroughputModel
from hadar.cluster import Cluster
from hadar.jobs import Job


class CompositeThroughput(ThroughputModel):
    """Gavel-style measured table first, PMI/PCIe cold-start estimate for the gaps."""

    def __init__(self, table: GavelThroughputTable | None = None, estimator: PmiEstimator | None = None) -> None:
        self.table = table if table is not None else GavelThroughputTable.bundled()
        self.estimator = estimator if estimator is not None else PmiEstimator(self.table)
        self._lock = threading.Lock()
        self._seen_estimated: set[tuple[str, str]] = set()
        self._cells: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}

    def is_measured(self, job_type: str, gpu_type: str, num_gpus: int) -> bool:
        """True when the table has the consolidated figure for (job type, GPU type, W)."""
        return self.table.measured(job_type, gpu_type, num_gpus, True) is not None

    def estimated_pairs(self, jobs: Iterable[Job], cluster: Cluster) -> list[tuple[str, str]]:
        """Sorted (job type, GPU type) pairs of ``cluster`` whose figure for these jobs is estimated."""
        return sorted(
            {(j.job_type, k) for j in jobs for k in cluster.gpu_types if not self.is_measured(j.job_type, k, j.num_gpus)}
        )

    def seen_estimated(self) -> list[tuple[str, str]]:
        """Every estimated (job type, GPU type) pair ``cell_rates`` has served so far."""
        with self._lock:
            return sorted(self._seen_estimated)

    def cell_rates(self, job: Job, cluster: Cluster) -> tuple[np.ndarray, np.ndarray]:
        key = (job.job_type, job.num_gpus, job_profile(job), cluster.gpu_types,
               tuple(n.pcie_gen for n in cluster.nodes))
        hit = self._cells.get(key)
        if hit is not None:
            return hit
        est_cons, est_unc = self.estimator.cell_rates(job, cluster)
        cons, unc = np.array(est_cons, dtype=float), np.array(est_unc, dtype=float)
        estimated = set()
        for k, gpu in enumerate(cluster.gpu_types):
            if self.is_measured(job.job_type, gpu, job.num_gpus):
                cons[:, k] = self.table.lookup(job.job_type, gpu, job.num_gpus, True)
                unc[:, k] = self.table.lookup(job.job_type, gpu, job.num_gpus, False)
            else:
                estimated.add((job.job_type, gpu))
        cons.setflags(write=False)
        unc.setflags(write=False)
        with self._lock:
            self._seen_estimated |= estimated
            self._cells[key] = (cons, unc)
        return cons, unc

    def describe(self, job: Job, cluster: Cluster) -> str:
        measured = [k for k in cluster.gpu_types if self.is_measured(job.job_type, k, job.num_gpus)]
        estimated = [k for k in cluster.gpu_types if k not in measured]
        parts = []
        if measured:
            parts.append(f"measured ({self.table.source}) on {', '.join(measured)}")
        if estimated:
            parts.append(f"estimated on {', '.join(estimated)} [{self.estimator.describe(job, cluster)}]")
        return "; ".join(parts)
