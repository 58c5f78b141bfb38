"""Malleable Trainers for the BFTrainer/MalleTrain replay: DNNs whose measured scalability is
BFTrainer's Table 2 (ImageNet, minibatch 32 per GPU, Summit nodes of 6 V100s, data parallel
with Horovod), as value objects, and the two workloads the papers evaluate: HPO (every trial the
same model, §5.1) and diverse Trainers / NAS (models taken in turn from the table, §5.2).
"""

from __future__ import annotations

from dataclasses import dataclass

from hadar.core.errors import InputError

TABLE2_NODES = (1, 2, 4, 8, 16, 32, 64)
TABLE2: dict[str, tuple[float, ...]] = {
    "AlexNet": (7.1, 13.1, 21.1, 40.5, 74.0, 130.8, 202.1),
    "ResNet18": (5.2, 10.6, 20.4, 39.6, 78.0, 144.8, 262.7),
    "MnasNet": (3.2, 6.0, 11.5, 23.1, 43.9, 83.5, 160.5),
    "MobileNets": (3.0, 5.9, 11.4, 22.0, 42.5, 82.3, 155.2),
    "ShuffleNet": (2.8, 5.3, 10.0, 20.4, 38.9, 74.1, 145.1),
    "VGG-16": (1.2, 2.4, 4.7, 9.3, 18.3, 36.2, 70.2),
    "DenseNet": (1.0, 2.0, 3.8, 7.6, 15.0, 28.8, 57.8),
}
"""Thousands of samples per second on 1, 2, 4, ..., 64 nodes (BFTrainer, Table 2)."""

DEFAULT_R_UP_S = 20.0
"""Scale-up cost: BFTrainer's example (§2.1, "if scaling up a job takes 20 seconds")."""
DEFAULT_R_DW_S = 5.0
"""Scale-down cost: several times cheaper than a scale-up (MalleTrain Fig. 5a); our choice."""


@dataclass(frozen=True)
class MalleableJob:
    """A Trainer: its true scalability, size limits, work and rescaling costs."""

    key: int
    model: str
    points: tuple[tuple[int, float], ...]
    """True throughput (samples/s) at measured node counts."""
    samples: float
    n_min: int = 1
    n_max: int = 64
    r_up: float = DEFAULT_R_UP_S
    r_dw: float = DEFAULT_R_DW_S
    arrival: float = 0.0


def table2_points(model: str, n_max: int = 64) -> tuple[tuple[int, float], ...]:
    """A Table 2 model's curve in samples/s up to ``n_max`` nodes."""
    try:
        values = TABLE2[model]
    except KeyError:
        raise InputError(f"unknown Table 2 model {model!r} (known: {', '.join(TABLE2)})") from None
    return tuple((n, v * 1000.0) for n, v in zip(TABLE2_NODES, values, strict=True) if n <= n_max)


def trainer_workload(
    kind: str, count: int, samples: float = 1.28e8, n_max: int = 64, arrival_gap_s: float = 0.0
) -> tuple[MalleableJob, ...]:
    """``hpo``: ``count`` ShuffleNet trials (§5.1); ``nas``: models from Table 2 in turn (§5.2).
    ``samples`` per Trainer (default 1.28e8: 100 epochs of ImageNet's 1.28M images, §4.2)."""
    if kind not in ("hpo", "nas"):
        raise InputError(f"trainer workload: unknown kind {kind!r} (hpo or nas)")
    models = ["ShuffleNet"] if kind == "hpo" else list(TABLE2)
    return tuple(
        MalleableJob(
            key=i,
            model=models[i % len(models)],
            points=table2_points(models[i % len(models)], n_max),
            samples=samples,
            n_max=n_max,
            arrival=i * arrival_gap_s,
        )
        for i in range(count)
    )
