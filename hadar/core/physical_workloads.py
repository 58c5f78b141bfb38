"""The paper's five physical workloads (Table III) and their workload mixes M-1 ... M-12.

Each workload has a short name used by the mixes, the Gavel job type whose measured throughput
stands for it in simulation (None for MM, which Gavel never measured: the estimator covers it),
the model-weight and dataset-size classes the PMI/PCIe estimate uses, and a step count per size.
"""

from __future__ import annotations

from dataclasses import dataclass

from hadar.core.errors import InputError


@dataclass(frozen=True)
class PhysicalWorkload:
    short: str
    description: str
    gavel_job_type: str | None
    weight_class: str  # small | modest | high | extra-high
    dataset_class: str  # S | M | L | XL
    batch_size: int
    steps_per_epoch: int
    paper_epochs: int

    @property
    def job_type(self) -> str:
        """Throughput-table key: the Gavel job type, or the short name when Gavel lacks it."""
        return self.gavel_job_type or self.short

    @property
    def paper_steps(self) -> int:
        return self.steps_per_epoch * self.paper_epochs


PHYSICAL_WORKLOADS: dict[str, PhysicalWorkload] = {
    w.short: w
    for w in [
        PhysicalWorkload(
            "IC",
            "ResNet-18 image classification on CIFAR-10",
            "ResNet-18 (batch size 64)",
            "modest",
            "S",
            64,
            782,
            40,
        ),
        PhysicalWorkload(
            "LM",
            "LSTM word language model on Wikitext-2",
            "LM (batch size 20)",
            "high",
            "L",
            20,
            2983,
            20,
        ),
        PhysicalWorkload(
            "LT",
            "Transformer translation on Multi30k",
            "Transformer (batch size 64)",
            "high",
            "L",
            64,
            453,
            30,
        ),
        PhysicalWorkload(
            "RS",
            "Autoencoder recommender on MovieLens-20M",
            "Recommendation (batch size 2048)",
            "modest",
            "XL",
            2048,
            68,
            100,
        ),
        PhysicalWorkload(
            "MM",
            "Encoder-decoder Transformer regression of weather variables (MiMa)",
            None,
            "small",
            "M",
            32,
            1000,
            40,
        ),
    ]
}

MIXES: dict[str, tuple[str, ...]] = {
    "M-1": ("MM",),
    "M-3": ("LT", "MM", "MM"),
    "M-4": ("IC", "LM", "LT", "MM"),
    "M-5": ("IC", "LM", "LT", "RS", "MM"),
    "M-8": ("IC", "LM", "LT", "RS", "MM", "MM", "MM", "MM"),
    "M-10": ("IC", "LM", "LT", "RS") + ("MM",) * 6,
    "M-12": ("IC", "LM", "LT", "RS") + ("MM",) * 8,
}
"""Section VI-B. Other M-n (n = 2..12) follow the same pattern: see :func:`mix`."""


def mix(name: str) -> tuple[str, ...]:
    """The workloads of mix ``name`` (``M-1`` ... ``M-12``)."""
    if name in MIXES:
        return MIXES[name]
    try:
        n = int(name.upper().removeprefix("M-"))
    except ValueError:
        n = -1
    if n == 2:
        return ("LT", "MM")
    if 5 <= n <= 12:
        return ("IC", "LM", "LT", "RS") + ("MM",) * (n - 4)
    raise InputError(f"--workload: unknown workload mix {name!r} (M-1 ... M-12)")
