"""Pollux's traces on GPU types they were not measured on (issue 23, point 8).

The traces were measured on NVIDIA T4s. On another type, the compute part of each iteration is
multiplied by the T4's speed relative to that type (gradient synchronisation is the network's and
is kept). The ratio would come from Gavel's measured table where it has both types for the same
jobs; it has no T4, so every ratio here is the cold-start estimate: the ratio of the types' PMI
(peak TFLOPS x sqrt(VRAM), the GPU factor of Eq. 10, ``estimators/pmi.py``). Figures so scaled
are reported as estimated cells, never silently.
"""

from __future__ import annotations

from estimators.pmi import PmiParams
from hadar.core.gpu_catalogue import canonical_gpu, catalogue

MEASURED_GPU = "t4"
"""The GPU type of Pollux's testbed (AWS g4dn.12xlarge)."""


def compute_scale(gpu_type: str) -> tuple[float, bool]:
    """(multiplier of the T4's compute time on ``gpu_type``, whether it is estimated)."""
    gtype = canonical_gpu(gpu_type)
    if gtype == MEASURED_GPU:
        return 1.0, False
    specs = catalogue()
    params = PmiParams()
    return params.pmi(specs[MEASURED_GPU]) / params.pmi(specs[gtype]), True
