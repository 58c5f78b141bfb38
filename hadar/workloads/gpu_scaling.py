"""Pollux's traces on GPU types they were not measured on.

The traces were measured on NVIDIA T4s. On another type, the compute part of each iteration is
multiplied by the T4's compute time relative to that type (gradient synchronisation is the
network's and is kept). The multiplier of a type is derived in two links:

- **T4 -> V100: estimated.** Gavel's measured table has no T4, so this link is the cold-start
  estimate, the ratio of the types' PMI (peak TFLOPS x sqrt(VRAM), the GPU factor of Eq. 10,
  ``estimators/pmi.py``).
- **V100 -> K80 / P100: measured, per application.** Gavel's table measures the three types on
  the same models; a Pollux application's speed ratio is the geometric mean, over the batch sizes
  Gavel measured at one GPU, of V100 throughput over the type's, for the Gavel family that trains
  the same (or a similar) model (:data:`APPLICATION_FAMILY`).

A type Gavel never measured (A100, RTX 3090, ...) or an application with no matching family takes
the PMI ratio for the whole way. Every figure so scaled is reported as an estimated cell (the
T4 link is always estimated), never silently.
"""

from __future__ import annotations

import math
from functools import lru_cache

from estimators.pmi import PmiParams
from estimators.throughput import GavelThroughputTable
from hadar.core.gpu_catalogue import GpuSpec, canonical_gpu, catalogue
from hadar.core.job_profile import parse_job_type
from hadar.workloads.fork_efficiency import FAMILY_APPLICATION

MEASURED_GPU = "t4"
"""The GPU type of Pollux's testbed (AWS g4dn.12xlarge)."""

ANCHOR_GPU = "v100"
"""The type of Gavel's table the T4 is tied to by the PMI estimate."""

APPLICATION_FAMILY: dict[str, str] = {
    **{app: family for family, (app, _) in FAMILY_APPLICATION.items()},
    "yolov3": "ResNet-50",  # proxy: a deep convolutional network on images (Darknet-53 backbone)
}
"""Pollux application -> the Gavel family whose measured per-type ratios it takes."""


def _pmi(gpu_type: str) -> float:
    return _pmi_of(catalogue()[gpu_type])


@lru_cache(maxsize=256)
def _pmi_of(spec: GpuSpec) -> float:
    """The PMI of a GPU at Eq. 10's default constants (a pure function of its figures: asked for
    every rate of every configuration, it was a tenth of a simulation's CPU when recomputed)."""
    return _DEFAULT_PMI.pmi(spec)


_DEFAULT_PMI = PmiParams()


@lru_cache(maxsize=64)
def measured_ratio(family: str, gpu_type: str) -> float | None:
    """Geometric mean over Gavel's one-GPU measurements of ``family`` of V100 throughput over
    ``gpu_type``'s (how many times longer a step takes there); None when not measured."""
    table = GavelThroughputTable.bundled()
    logs = []
    for job_type in sorted(table.job_types):
        if parse_job_type(job_type)[0] != family:
            continue
        anchor = table.measured(job_type, ANCHOR_GPU, 1)
        there = table.measured(job_type, gpu_type, 1)
        if anchor and there:
            logs.append(math.log(anchor / there))
    return math.exp(sum(logs) / len(logs)) if logs else None


def compute_scale(gpu_type: str, application: str | None = None) -> tuple[float, bool]:
    """(multiplier of the T4's compute time on ``gpu_type`` for ``application``, whether it is
    estimated). Without an application, or for a type or application Gavel's table lacks, the
    PMI ratio of the two types."""
    gtype = canonical_gpu(gpu_type)
    if gtype == MEASURED_GPU:
        return 1.0, False
    family = APPLICATION_FAMILY.get(application or "")
    ratio = measured_ratio(family, gtype) if family is not None else None
    if ratio is None:
        return _pmi(MEASURED_GPU) / _pmi(gtype), True
    return _pmi(MEASURED_GPU) / _pmi(ANCHOR_GPU) * ratio, True
