"""Online refinement: measured throughputs replace the prior, then are smoothed (section V-A).

Observations are keyed by (job type, gang size W, node, GPU type). The first positive
measurement of a key *replaces* the prior for that (job, node) cell; later ones are blended in
by an exponentially weighted moving average ``v <- alpha x new + (1 - alpha) x v``. Copies of
one job share their job type, so every copy's report refines the same figure.

Measurements are single-node (consolidated) rates. The unconsolidated figure of an observed
cell keeps the prior's multi-node ratio (``measured x prior_unc / prior_cons``).

Calibration: the prior supplies *relative* speeds across GPU types, measurements the absolute
scale. Once a (job type, W) has measured cells, its unmeasured cells are the prior times the
geometric mean of measured / prior over the measured cells. Without this, a prior in other units
(the paper-size models of Gavel's table against a tiny model on a lab box, or simply a machine
faster than the table's) makes every measured cell look faster or slower than every unmeasured
one, and HadarE would never fork a job onto a node it has not yet run on.

Elastic jobs (``Job.is_elastic``) run on GPU counts other than ``num_gpus``: observations are
keyed by the count they ran on, and a job's rate on a placement is read at the placement's GPU
count (as ``estimators/gang_sizes.py`` does for Gavel's table). Their workers also report
iteration times and gradient statistics (``estimators/iterations.py``), kept per job and handed
to policies by :meth:`OnlineThroughput.iterations`.

Bad values: a measured rate that is NaN, infinite, zero or negative carries no information
(e.g. a copy that had nothing to do this round) and is *skipped* with a logged warning; the
call returns False and the state is unchanged. Arguments of the wrong kind (a non-number rate,
W < 1, an empty node name, an unknown GPU type) raise InputError.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from estimators.iterations import IterationSample
from estimators.throughput import DEFAULT_UNCONSOLIDATED_PENALTY, EstimatedCell, ThroughputModel
from hadar.core.cluster import Cluster
from hadar.core.errors import InputError
from hadar.core.gpu_catalogue import canonical_gpu
from hadar.core.io import write_json
from hadar.core.jobs import Job, Placement, at_placement
from hadar.core.validation import load_json

log = logging.getLogger(__name__)

DEFAULT_ALPHA = 0.5
"""Knob: EWMA weight of a new measurement. A round's figure is already an average over minutes
of training, so rounds are trusted equally with the recent past: 0.5 keeps a third of one
round's noise variance (alpha / (2 - alpha)) and follows a real change to within 6 % in four
rounds (0.5^4)."""

FORMAT = "hadar-online-throughput"
_ANY_GPU = "*"


@dataclass
class _Entry:
    value: float
    count: int


def _calibration(measured: Mapping[tuple[int, int], float], prior_cons: np.ndarray) -> float:
    """Geometric mean of measured / prior over the measured cells the prior has a figure for
    (1.0 when there is none)."""
    logs = [
        math.log(v / float(prior_cons[c])) for c, v in measured.items() if float(prior_cons[c]) > 0
    ]
    return math.exp(sum(logs) / len(logs)) if logs else 1.0


class OnlineThroughput(ThroughputModel):
    """A prior model refined by measurements; thread-safe, persistable to a plain dict."""

    learns = True

    def __init__(self, prior: ThroughputModel, alpha: float = DEFAULT_ALPHA) -> None:
        if not (isinstance(alpha, (int, float)) and 0.0 < alpha <= 1.0):
            raise InputError(f"alpha: must be in (0, 1] (got {alpha!r})")
        self.prior = prior
        self.alpha = float(alpha)
        self._lock = threading.Lock()
        self._entries: dict[tuple[str, int, str, str], _Entry] = {}
        self._iterations: dict[int, dict[int, IterationSample]] = {}
        self.skipped = 0
        """How many observations were skipped as non-positive or non-finite."""

    # -- observations ------------------------------------------------------------------------
    def observe(
        self,
        job: Job | str,
        node: str,
        num_gpus: int,
        steps_per_second: float,
        gpu_type: str | None = None,
    ) -> bool:
        """Record a measured whole-gang rate of ``job`` on ``node``; True if it was used.

        ``gpu_type`` narrows it to one GPU type of a mixed node (default: every type there).
        """
        job_type = job if isinstance(job, str) else job.job_type
        key = self._key(job_type, node, num_gpus, gpu_type)
        if isinstance(steps_per_second, bool) or not isinstance(
            steps_per_second, (int, float, np.number)
        ):
            raise InputError(
                f"{job_type} on {node}: steps_per_second must be a number (got {steps_per_second!r})"
            )
        rate = float(steps_per_second)
        if not math.isfinite(rate) or rate <= 0:
            with self._lock:
                self.skipped += 1
            log.warning(
                "skipped throughput %r for %s on %s (not a positive finite number)",
                rate,
                job_type,
                node,
            )
            return False
        with self._lock:
            e = self._entries.get(key)
            if e is None:
                self._entries[key] = _Entry(rate, 1)
            else:
                e.value = self.alpha * rate + (1.0 - self.alpha) * e.value
                e.count += 1
        return True

    @staticmethod
    def _key(
        job_type: object, node: object, num_gpus: object, gpu_type: object
    ) -> tuple[str, int, str, str]:
        """Validate one key read from a caller or a saved file (any JSON value) and normalise it."""
        if not isinstance(job_type, str) or not job_type:
            raise InputError(f"job type must be a non-empty string (got {job_type!r})")
        if not isinstance(node, str) or not node:
            raise InputError(f"{job_type}: node must be a non-empty string (got {node!r})")
        if isinstance(num_gpus, bool) or not isinstance(num_gpus, int) or num_gpus < 1:
            raise InputError(
                f"{job_type} on {node}: num_gpus must be an integer >= 1 (got {num_gpus!r})"
            )
        gpu = (
            _ANY_GPU
            if gpu_type is None
            else canonical_gpu(str(gpu_type), f"{job_type} on {node}: gpu_type")
        )
        return job_type, num_gpus, node, gpu

    def observe_iterations(self, job_id: int, sample: IterationSample) -> None:
        """Record what a worker measured of an elastic job's round (one sample per round: a
        round observed again, e.g. re-read after a restart, replaces its sample)."""
        with self._lock:
            self._iterations.setdefault(job_id, {})[sample.round] = sample

    def iterations(self, job: Job) -> tuple[IterationSample, ...]:
        with self._lock:
            mine = self._iterations.get(job.job_id, {})
            return tuple(mine[r] for r in sorted(mine))

    def rate(self, job: Job, placement: Placement, cluster: Cluster) -> float:
        """As the base class; an elastic job is rated at the placement's GPU count."""
        return super().rate(at_placement(job, placement), placement, cluster)

    def measured(
        self, job: Job | str, node: str, num_gpus: int, gpu_type: str | None = None
    ) -> float | None:
        """The smoothed measurement for the key, or None when never observed."""
        job_type = job if isinstance(job, str) else job.job_type
        with self._lock:
            e = self._entries.get(self._key(job_type, node, num_gpus, gpu_type))
            return None if e is None else e.value

    def observed_pairs(self) -> list[tuple[str, int, str, str | None]]:
        """Every (job type, W, node, GPU type or None) observed so far."""
        with self._lock:
            return sorted((jt, w, n, None if g == _ANY_GPU else g) for jt, w, n, g in self._entries)

    # -- ThroughputModel ---------------------------------------------------------------------
    def rate_class(self, job: Job) -> Hashable:
        return self.prior.rate_class(job)

    def cell_rates(self, job: Job, cluster: Cluster) -> tuple[np.ndarray, np.ndarray]:
        return self._rates(job, cluster, *self.prior.cell_rates(job, cluster))

    def multi_node_rates(self, job: Job, cluster: Cluster, bandwidth_gbps: float) -> np.ndarray:
        """As :meth:`cell_rates`' multi-node figures, from the prior's at ``bandwidth_gbps``."""
        prior_cons, _ = self.prior.cell_rates(job, cluster)
        prior_unc = self.prior.multi_node_rates(job, cluster, bandwidth_gbps)
        return self._rates(job, cluster, prior_cons, prior_unc)[1]

    def _rates(
        self, job: Job, cluster: Cluster, prior_cons: np.ndarray, prior_unc: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        with self._lock:
            mine = {
                (n, g): e.value
                for (jt, w, n, g), e in self._entries.items()
                if jt == job.job_type and w == job.num_gpus and n in cluster.node_index
            }
        if not mine:
            return prior_cons, prior_unc
        cap = cluster.capacity
        measured: dict[tuple[int, int], float] = {}
        for h, node in enumerate(cluster.node_names):
            for k, gpu in enumerate(cluster.gpu_types):
                v = mine.get((node, gpu))
                if v is None and cap[h, k] > 0:
                    v = mine.get((node, _ANY_GPU))
                if v is not None:
                    measured[h, k] = v
        scale = _calibration(measured, prior_cons)
        cons, unc = (
            np.asarray(prior_cons, dtype=float) * scale,
            np.asarray(prior_unc, dtype=float) * scale,
        )
        for (h, k), v in measured.items():
            pc = float(prior_cons[h, k])
            if job.num_gpus == 1:
                ratio = 1.0
            elif pc > 0:
                ratio = float(prior_unc[h, k]) / pc
            else:
                ratio = DEFAULT_UNCONSOLIDATED_PENALTY
            cons[h, k] = v
            unc[h, k] = v * ratio
        cons.setflags(write=False)
        unc.setflags(write=False)
        return cons, unc

    def estimated_cells(self, jobs: Iterable[Job], cluster: Cluster) -> list[EstimatedCell]:
        """The prior's estimated figures (a measurement replaces a cell only once it is observed)."""
        return self.prior.estimated_cells(jobs, cluster)

    def reference_job_types(self) -> list[tuple[str, int]]:
        return self.prior.reference_job_types()

    def describe(self, job: Job, cluster: Cluster) -> str:
        with self._lock:
            nodes = sorted(
                {
                    n
                    for (jt, w, n, _g) in self._entries
                    if jt == job.job_type and w == job.num_gpus and n in cluster.node_index
                }
            )
        base = self.prior.describe(job, cluster)
        return f"measured online on {', '.join(nodes)}; elsewhere {base}" if nodes else base

    # -- persistence -------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Plain-JSON state (the prior is not included: restore with the same prior)."""
        with self._lock:
            entries = [
                {
                    "job_type": jt,
                    "num_gpus": w,
                    "node": n,
                    "gpu_type": None if g == _ANY_GPU else g,
                    "steps_per_second": e.value,
                    "observations": e.count,
                }
                for (jt, w, n, g), e in sorted(self._entries.items())
            ]
            return {
                "format": FORMAT,
                "version": 1,
                "alpha": self.alpha,
                "skipped": self.skipped,
                "entries": entries,
            }

    @classmethod
    def from_dict(
        cls, data: Any, prior: ThroughputModel, source: str = "<state>"
    ) -> OnlineThroughput:
        """Inverse of :meth:`to_dict`; malformed state raises a one-line InputError."""
        if not isinstance(data, Mapping) or data.get("format") != FORMAT:
            raise InputError(f"{source}: not a {FORMAT} state (missing or wrong 'format')")
        if data.get("version") != 1:
            raise InputError(f"{source}: version: unsupported {data.get('version')!r} (expected 1)")
        alpha = data.get("alpha", DEFAULT_ALPHA)
        if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 < alpha <= 1:
            raise InputError(f"{source}: alpha: must be in (0, 1] (got {alpha!r})")
        model = cls(prior, alpha=float(alpha))
        entries = data.get("entries", [])
        if not isinstance(entries, list):
            raise InputError(f"{source}: entries: expected a list")
        for i, e in enumerate(entries):
            where = f"{source}: entries[{i}]"
            if not isinstance(e, Mapping):
                raise InputError(f"{where}: expected an object")
            try:
                key = cls._key(
                    e.get("job_type"), e.get("node"), e.get("num_gpus"), e.get("gpu_type")
                )
            except InputError as exc:
                raise InputError(f"{where}: {exc}") from None
            v, n = e.get("steps_per_second"), e.get("observations", 1)
            if (
                isinstance(v, bool)
                or not isinstance(v, (int, float))
                or not math.isfinite(v)
                or v <= 0
            ):
                raise InputError(
                    f"{where}: steps_per_second: must be a positive number (got {v!r})"
                )
            if isinstance(n, bool) or not isinstance(n, int) or n < 1:
                raise InputError(f"{where}: observations: must be an integer >= 1 (got {n!r})")
            if key in model._entries:
                raise InputError(f"{where}: duplicate entry for {key[0]!r} x{key[1]} on {key[2]}")
            model._entries[key] = _Entry(float(v), n)
        skipped = data.get("skipped", 0)
        model.skipped = skipped if isinstance(skipped, int) and skipped >= 0 else 0
        return model

    def save(self, path: str | Path) -> None:
        """Write the state as JSON atomically (a crash leaves the old file or the new one)."""
        write_json(path, self.to_dict(), indent=1, durable=True)

    @classmethod
    def load(cls, path: str | Path, prior: ThroughputModel) -> OnlineThroughput:
        """Restore from :meth:`save`'s file; bad files raise a one-line InputError."""
        p = Path(path)
        data = load_json(p, "online throughput state")
        return cls.from_dict(data, prior, source=str(p))
