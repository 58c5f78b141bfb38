"""The GPU catalogue (``hadar/core/data/gpus.yaml``): known GPU types and their datasheet figures,
plus GPU types a user declares (a cluster file's ``gpu_types:``, see :mod:`hadar.core.user_gpus`),
registered for the rest of the process with :func:`register_gpu`."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources

import yaml

from hadar.core.errors import InputError, shorten


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


def gpu_key(name: str) -> str:
    """Normalise a user-written GPU name: case, spaces and underscores do not matter."""
    return re.sub(r"[\s_]+", "-", name.strip().lower())


# GPU types declared by the user in this process: id -> (spec, aliases, where declared)
_USER: dict[str, tuple[GpuSpec, tuple[str, ...], str]] = {}


def catalogue() -> dict[str, GpuSpec]:
    """All GPU types (the bundled catalogue, then the user's), by canonical id."""
    return {**_bundled(), **{gid: spec for gid, (spec, _, _) in _USER.items()}}


def register_gpu(spec: GpuSpec, aliases: tuple[str, ...] = (), where: str = "") -> None:
    """Make a user-declared GPU type known (idempotent for identical figures). A name that
    is already a catalogue GPU, or declared elsewhere with other figures, is an InputError."""
    for name in (spec.id, *aliases):
        known = _bundled_aliases().get(gpu_key(name)) or _bundled_aliases().get(
            gpu_key(name).replace("-", "")
        )
        if known is not None:
            raise InputError(
                f"{where}: {name!r} is already the catalogue's {known!r} "
                f"({_bundled()[known].name}); use that name or pick another"
            )
    previous = _USER.get(spec.id)
    if previous is not None and (previous[0], previous[1]) != (spec, aliases):
        raise InputError(
            f"{where}: GPU type {spec.id!r} already declared with other figures in {previous[2]}"
        )
    _USER[spec.id] = (spec, aliases, where)
    _aliases.cache_clear()


def forget_user_gpus() -> None:
    """Drop every user-declared GPU type (tests; a long-lived process loading other files)."""
    _USER.clear()
    _aliases.cache_clear()


@functools.lru_cache(maxsize=1)
def _bundled() -> dict[str, GpuSpec]:
    text = resources.files("hadar.core").joinpath("data/gpus.yaml").read_text()
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
def _bundled_aliases() -> dict[str, str]:
    text = resources.files("hadar.core").joinpath("data/gpus.yaml").read_text()
    raw = yaml.safe_load(text)["gpus"]
    return _alias_table((gid, [gid, *v.get("aliases", [])]) for gid, v in raw.items())


def _alias_table(entries: Iterable[tuple[str, Iterable[str]]]) -> dict[str, str]:
    table: dict[str, str] = {}
    for gid, names in entries:
        for name in names:
            table[gpu_key(name)] = gid
            table[gpu_key(name).replace("-", "")] = gid
    return table


@functools.lru_cache(maxsize=1)
def _aliases() -> dict[str, str]:
    user = _alias_table((gid, [gid, *al]) for gid, (_, al, _) in _USER.items())
    return {**_bundled_aliases(), **user}


def canonical_gpu(name: str, field: str = "gpu type") -> str:
    """Return the catalogue id for ``name`` (e.g. ``"Titan RTX"`` -> ``"titan-rtx"``).

    Raises InputError naming ``field`` when the type is unknown.
    """
    k = gpu_key(str(name))
    gid = _aliases().get(k) or _aliases().get(k.replace("-", ""))
    if gid is None:
        known = ", ".join(sorted(catalogue()))
        raise InputError(
            f"{field}: unknown GPU type {shorten(name)!r} (known: {known}; declare your own under the "
            f"cluster file's gpu_types:)"
        )
    return gid


def gpu_for_smi_name(name: str) -> str | None:
    """The catalogue id of the GPU ``nvidia-smi`` calls ``name`` (``"Tesla V100-SXM2-16GB"`` ->
    ``"v100"``), or None when no catalogue type matches."""
    for gid, spec in catalogue().items():
        if spec.smi_pattern and re.search(spec.smi_pattern, name, flags=re.IGNORECASE):
            return gid
    return None
