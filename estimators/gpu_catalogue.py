"""The GPU catalogue (``estimators/data/gpus.yaml``): known GPU types and their datasheet figures."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from importlib import resources

import yaml

from hadar.errors import InputError


@dataclass(frozen=True)
class GpuSpec:
    """Datasheet figures of one GPU type."""

    id: str
    name: str
    fp32_tflops: float
    tensor_tflops: float
    memory_gb: float
    pcie_gen: int
    smi_pattern: str = ""
    """Regular expression (case-insensitive search) matching this GPU's ``nvidia-smi`` names."""


def _key(name: str) -> str:
    """Normalise a user-written GPU name: case, spaces and underscores do not matter."""
    return re.sub(r"[\s_]+", "-", name.strip().lower())


@functools.lru_cache(maxsize=1)
def catalogue() -> dict[str, GpuSpec]:
    """All GPU types of the catalogue, by canonical id."""
    text = resources.files("estimators").joinpath("data/gpus.yaml").read_text()
    raw = yaml.safe_load(text)["gpus"]
    return {
        gid: GpuSpec(
            id=gid,
            name=v["name"],
            fp32_tflops=float(v["fp32_tflops"]),
            tensor_tflops=float(v["tensor_tflops"]),
            memory_gb=float(v["memory_gb"]),
            pcie_gen=int(v["pcie_gen"]),
            smi_pattern=str(v.get("smi_pattern", "")),
        )
        for gid, v in raw.items()
    }


@functools.lru_cache(maxsize=1)
def _aliases() -> dict[str, str]:
    text = resources.files("estimators").joinpath("data/gpus.yaml").read_text()
    raw = yaml.safe_load(text)["gpus"]
    table: dict[str, str] = {}
    for gid, v in raw.items():
        for name in [gid, *v.get("aliases", [])]:
            table[_key(name)] = gid
            table[_key(name).replace("-", "")] = gid
    return table


def canonical_gpu(name: str, field: str = "gpu type") -> str:
    """Return the catalogue id for ``name`` (e.g. ``"Titan RTX"`` -> ``"titan-rtx"``).

    Raises InputError naming ``field`` when the type is unknown.
    """
    k = _key(str(name))
    gid = _aliases().get(k) or _aliases().get(k.replace("-", ""))
    if gid is None:
        known = ", ".join(sorted(catalogue()))
        raise InputError(f"{field}: unknown GPU type {name!r} (known: {known})")
    return gid


def gpu_for_smi_name(name: str) -> str | None:
    """The catalogue id of the GPU ``nvidia-smi`` calls ``name`` (``"Tesla V100-SXM2-16GB"`` ->
    ``"v100"``), or None when no catalogue type matches."""
    for gid, spec in catalogue().items():
        if spec.smi_pattern and re.search(spec.smi_pattern, name, flags=re.IGNORECASE):
            return gid
    return None
