"""A job's typed profile: what the PMI/PCIe estimate (Eq. 10, ``estimators/pmi.py``) needs to know
about a job besides its measurements, derived once per job from where job types enter: Gavel's
``"Family (batch size B)"`` type names, the physical workload catalogue and a job file's own
``model``/``weight_class``/``dataset_class``/``batch_size`` fields. Read it as ``job.profile``."""

from __future__ import annotations

import re
from dataclasses import dataclass

from hadar.core.errors import InputError
from hadar.core.jobs import SIZE_CLASSES, Job
from hadar.core.physical_workloads import PHYSICAL_WORKLOADS

WEIGHT_CLASSES = ("small", "modest", "high", "extra-high")
"""Eq. 10's model weight classes (parameters and FLOPs per sample), lightest first."""
DATASET_CLASSES = SIZE_CLASSES
"""Eq. 10's dataset size classes, smallest first."""


@dataclass(frozen=True)
class JobProfile:
    """What Eq. 10 needs to know about a job besides its measurements."""

    family: str | None
    batch_size: int | None
    weight_class: str
    dataset_class: str


@dataclass(frozen=True)
class Family:
    weight_class: str
    dataset_class: str
    batch_size: int | None
    note: str


FAMILIES: dict[str, Family] = {
    "ResNet-18": Family("modest", "S", 64, "ResNet-18 on CIFAR-10, 11.7 M parameters"),
    "ResNet-50": Family(
        "extra-high", "XL", 64, "ResNet-50 on ImageNet, 25.6 M parameters, 4 GFLOP/image"
    ),
    "LM": Family("high", "L", 20, "2-layer LSTM language model on Wikitext-2"),
    "Transformer": Family("high", "L", 64, "Transformer translation on Multi30k"),
    "Recommendation": Family("modest", "XL", 2048, "autoencoder recommender on MovieLens-20M"),
    "CycleGAN": Family("high", "M", 1, "CycleGAN (2 generators + 2 discriminators) on monet2photo"),
    "A3C": Family("small", "S", None, "A3C reinforcement learning on Atari Pong"),
}
"""Gavel's job families with their Eq. 10 classes (model weight by parameters and FLOPs per
sample; dataset class from the paper's Table II/III)."""

PHYSICAL_FAMILY = {"MM": "Transformer"}
"""Physical workloads Gavel never measured, mapped to the family whose measurements anchor them
(MiMa is an encoder-decoder Transformer); their own classes come from hadar.core.physical_workloads."""

_TYPE_RE = re.compile(r"^(?P<family>.*?)\s*\(batch size (?P<batch>\d+)\)\s*$")


def _norm(s: str) -> str:
    return re.sub(r"[^a-z0-9]", "", s.lower())


_FAMILY_KEYS = {_norm(f): f for f in FAMILIES}


def parse_job_type(job_type: str) -> tuple[str | None, int | None]:
    """``"ResNet-18 (batch size 64)"`` -> ``("ResNet-18", 64)``; unknown families -> (None, B)."""
    m = _TYPE_RE.match(job_type)
    name, batch = (m["family"], int(m["batch"])) if m else (job_type, None)
    return _FAMILY_KEYS.get(_norm(name)), batch


def job_profile(job: Job | str) -> JobProfile:
    """The job's family, batch size and classes.

    The job type decides first, since it is what keys the measured table: Gavel's
    ``"Family (batch size B)"``, a physical workload's short name (``"MM"``) or a bare family
    name. A Job's own fields only fill what the type leaves open: ``model`` (a family name or a
    weight class), ``spec["weight_class"]``, ``spec["dataset_class"]`` or ``size_class``,
    ``spec["batch_size"]``. Then the family's defaults; an unknown family is (modest, M).
    """
    job_type = job if isinstance(job, str) else job.job_type
    family, batch = parse_job_type(job_type)
    weight: str | None = None
    dataset: str | None = None
    phys = PHYSICAL_WORKLOADS.get(job_type)
    if phys is not None:
        family = (
            parse_job_type(phys.gavel_job_type)[0]
            if phys.gavel_job_type
            else PHYSICAL_FAMILY.get(job_type)
        )
        batch, weight, dataset = phys.batch_size, phys.weight_class, phys.dataset_class

    def fill_from_family() -> None:
        nonlocal weight, dataset, batch
        if family is not None:
            fam = FAMILIES[family]
            weight = weight or fam.weight_class
            dataset = dataset or fam.dataset_class
            batch = batch if batch is not None else fam.batch_size

    fill_from_family()
    where = f"job type {job_type!r}"
    if isinstance(job, Job):
        where = f"job {job.job_id}"
        spec, model = job.spec, job.model
        weight = weight or spec.get("weight_class") or (model if model in WEIGHT_CLASSES else None)
        dataset = dataset or spec.get("dataset_class") or job.size_class
        if batch is None and spec.get("batch_size") is not None:
            batch = spec["batch_size"]
        if family is None and model and _norm(model) in _FAMILY_KEYS:
            family = _FAMILY_KEYS[_norm(model)]
            fill_from_family()
    weight, dataset = weight or "modest", dataset or "M"
    if weight not in WEIGHT_CLASSES:
        raise InputError(
            f"{where}: weight class must be one of {', '.join(WEIGHT_CLASSES)} (got {weight!r})"
        )
    if dataset not in DATASET_CLASSES:
        raise InputError(
            f"{where}: dataset class must be one of {', '.join(DATASET_CLASSES)} (got {dataset!r})"
        )
    if batch is not None and (isinstance(batch, bool) or not isinstance(batch, int) or batch < 1):
        raise InputError(f"{where}: batch size must be an integer >= 1 (got {batch!r})")
    return JobProfile(family, batch, weight, dataset)
