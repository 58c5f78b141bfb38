"""Workload mixes M-1 ... M-12 (section VI-B) as jobs, at tiny, small or paper size.

``paper`` steps are the paper-scale epochs of each workload (for simulation on aws-5node /
lab-5node); ``tiny`` and ``small`` are for real runs of the tiny / small PyTorch models on CPU
nodes (tests and demos). Every job of a mix is a 1-GPU job (the paper uses one GPU per node).
"""

from __future__ import annotations

from types import MappingProxyType

from hadar.core.defaults import SIMULATED
from hadar.core.errors import InputError
from hadar.core.jobs import Job
from hadar.core.physical_workloads import PHYSICAL_WORKLOADS, mix

SIZES = ("tiny", "small", "paper")

RUN_STEPS = {
    "tiny": {"IC": 300, "LM": 400, "LT": 300, "RS": 200, "MM": 250},
    "small": {"IC": 1500, "LM": 2000, "LT": 1500, "RS": 1000, "MM": 1200},
}
"""Total steps of the real-run sizes (different per workload, so jobs have different lengths)."""

LEARNING_RATES = {"IC": 0.05, "LM": 1.0, "LT": 0.0005, "RS": 0.001, "MM": 0.001}


def mix_jobs(name: str, size: str = SIMULATED.size, seed: int = 0) -> list[Job]:
    """The jobs of mix ``name`` (all arriving at 0), ids 0..n-1 in the mix's order."""
    if size not in SIZES:
        raise InputError(f"--size: unknown size {size!r} (known: {', '.join(SIZES)})")
    jobs = []
    for i, short in enumerate(mix(name)):
        w = PHYSICAL_WORKLOADS[short]
        steps = w.paper_steps if size == "paper" else RUN_STEPS[size][short]
        spec = {
            "model": short,
            "size": "small" if size == "paper" else size,
            "data": "synthetic",
            "batch_size": w.batch_size if size == "paper" else 16,
            "lr": LEARNING_RATES[short],
            "seed": seed + i,
        }
        jobs.append(
            Job(
                job_id=i,
                job_type=w.job_type,
                num_gpus=1,
                total_steps=float(steps),
                model=short,
                size_class=w.dataset_class,
                spec=MappingProxyType(spec),
            )
        )
    return jobs
