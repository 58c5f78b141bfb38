"""Measured where available, Eq. 10 elsewhere: the throughput model simulations should use.

Each figure of a (job type, GPU type, gang size W) is taken from the measured table when the
table has it, separately for the two placements a gang can have:

* **consolidated** (the gang on one node): the table's figure for the GPU type. A measured 0
  means "measured, cannot run" (e.g. out of memory) and is kept.
* **multi-node** (W > 1, the gang across nodes): the table's ``*_unconsolidated`` figure; where
  only the consolidated figure is measured, the table's documented fallback (consolidated x
  penalty, so a consolidated 0 also forbids multi-node placements on that type); where neither is
  measured, the estimate.

Everything else comes from a :class:`PmiEstimator` anchored on the same table. A measured
multi-node figure is never replaced by an estimate, even when the consolidated one is missing
(e.g. 8-GPU jobs measured only across 4-GPU nodes), and an estimated consolidated figure is never
below the measured multi-node one. :meth:`estimated_cells` lists every figure that is an estimate.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

import numpy as np

from estimators.pmi import PmiEstimator
from estimators.throughput import EstimatedCell, GavelThroughputTable, ThroughputModel
from hadar.core.cluster import Cluster
from hadar.core.job_profile import JobProfile
from hadar.core.jobs import Job

CONSOLIDATED = "consolidated"
MULTI_NODE = "multi-node"

_CellKey = tuple[str, int, JobProfile, tuple[str, ...], tuple[int, ...], "tuple[float, ...] | None"]
"""A job's cache key on a cluster: job type, W, profile, GPU types, PCIe generations, NICs."""


class CompositeThroughput(ThroughputModel):
    """Gavel-style measured table first, PMI/PCIe cold-start estimate for the gaps."""

    def __init__(
        self, table: GavelThroughputTable | None = None, estimator: PmiEstimator | None = None
    ) -> None:
        self.table = table if table is not None else GavelThroughputTable.bundled()
        self.estimator = estimator if estimator is not None else PmiEstimator(self.table)
        self._lock = threading.Lock()
        self._seen_estimated: set[tuple[str, str]] = set()
        self._cells: dict[_CellKey, tuple[np.ndarray, np.ndarray]] = {}
        self._multi: dict[tuple[_CellKey, float], np.ndarray] = {}

    def is_measured(self, job_type: str, gpu_type: str, num_gpus: int) -> bool:
        """True when the table has the consolidated figure for (job type, GPU type, W)."""
        return self.table.measured(job_type, gpu_type, num_gpus, True) is not None

    def _estimated_placements(
        self, job_type: str, gpu_type: str, num_gpus: int, multi_node_possible: bool
    ) -> list[str]:
        """Which of the two placements' figures are estimated for (job type, GPU type, W)."""
        out = []
        if self.table.measured(job_type, gpu_type, num_gpus, True) is None:
            out.append(CONSOLIDATED)
            if (
                multi_node_possible
                and self.table.measured(job_type, gpu_type, num_gpus, False) is None
            ):
                out.append(MULTI_NODE)
        return out

    def estimated_cells(self, jobs: Iterable[Job], cluster: Cluster) -> list[EstimatedCell]:
        multi = len(cluster.nodes) > 1
        cells = {
            EstimatedCell(j.job_type, k, j.num_gpus, where)
            for j in jobs
            for k in cluster.gpu_types
            for where in self._estimated_placements(
                j.job_type, k, j.num_gpus, multi and j.num_gpus > 1
            )
        }
        return sorted(cells)

    def estimated_pairs(self, jobs: Iterable[Job], cluster: Cluster) -> list[tuple[str, str]]:
        """Sorted (job type, GPU type) pairs of ``cluster`` with an estimated figure for these jobs."""
        return sorted({(c.job_type, c.gpu_type) for c in self.estimated_cells(jobs, cluster)})

    def seen_estimated(self) -> list[tuple[str, str]]:
        """Every (job type, GPU type) pair with an estimated figure ``cell_rates`` has served so far."""
        with self._lock:
            return sorted(self._seen_estimated)

    def _cell_key(self, job: Job, cluster: Cluster) -> _CellKey:
        return (
            job.job_type,
            job.num_gpus,
            job.profile,
            cluster.gpu_types,
            cluster.pcie_gens,
            None if cluster.network is None else cluster.network.nics(cluster.node_names),
        )

    def _merged(
        self, job: Job, cluster: Cluster, est_cons: np.ndarray, est_unc: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, set[tuple[str, str]]]:
        """The estimator's arrays with every measured figure put in (see the module docstring),
        and the (job type, GPU type) pairs left estimated."""
        cons, unc = np.array(est_cons, dtype=float), np.array(est_unc, dtype=float)
        estimated = set()
        jt, w = job.job_type, job.num_gpus
        for k, gpu in enumerate(cluster.gpu_types):
            measured_cons = self.table.measured(jt, gpu, w, True)
            measured_unc = self.table.measured(jt, gpu, w, False)
            if measured_cons is not None:
                cons[:, k] = measured_cons
                unc[:, k] = self.table.lookup(jt, gpu, w, False)
                continue
            estimated.add((jt, gpu))
            if measured_unc is not None:
                unc[:, k] = measured_unc
                cons[:, k] = np.maximum(cons[:, k], measured_unc)
        cons.setflags(write=False)
        unc.setflags(write=False)
        return cons, unc, estimated

    def cell_rates(self, job: Job, cluster: Cluster) -> tuple[np.ndarray, np.ndarray]:
        key = self._cell_key(job, cluster)
        hit = self._cells.get(key)
        if hit is not None:
            return hit
        cons, unc, estimated = self._merged(job, cluster, *self.estimator.cell_rates(job, cluster))
        with self._lock:
            self._seen_estimated |= estimated
            self._cells[key] = (cons, unc)
        return cons, unc

    def multi_node_rates(self, job: Job, cluster: Cluster, bandwidth_gbps: float) -> np.ndarray:
        """Measured multi-node figures as given; estimated ones at ``bandwidth_gbps``."""
        key = (self._cell_key(job, cluster), bandwidth_gbps)
        hit = self._multi.get(key)
        if hit is None:
            est_cons, _ = self.estimator.cell_rates(job, cluster)
            est_unc = self.estimator.multi_node_rates(job, cluster, bandwidth_gbps)
            hit = self._merged(job, cluster, est_cons, est_unc)[1]
            with self._lock:
                self._multi[key] = hit
        return hit

    def reference_job_types(self) -> list[tuple[str, int]]:
        return self.table.reference_job_types()

    def describe(self, job: Job, cluster: Cluster) -> str:
        measured = [k for k in cluster.gpu_types if self.is_measured(job.job_type, k, job.num_gpus)]
        estimated = [k for k in cluster.gpu_types if k not in measured]
        parts = []
        if measured:
            parts.append(f"measured ({self.table.source}) on {', '.join(measured)}")
        if estimated:
            parts.append(
                f"estimated on {', '.join(estimated)} [{self.estimator.describe(job, cluster)}]"
            )
        return "; ".join(parts)
