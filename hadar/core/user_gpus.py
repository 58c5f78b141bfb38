"""GPU types a user declares for their own hardware (RTX 2080 Ti, L4, MI250 ...), with the
figures the PMI/PCIe estimate needs, so a cluster file and a measured throughputs table may name
them. In a cluster file::

    gpu_types:                         # inline ...
      rtx-2080-ti:
        name: GeForce RTX 2080 Ti      # optional (default: the id)
        fp32_tflops: 13.4              # required, 0.01 to 10,000
        memory_gb: 11                  # required, 0.1 to 10,000
        pcie_gen: 3                    # required, 1..6
        tensor_tflops: 53.8            # optional: 0 (no tensor cores, the estimate uses FP32)
                                       # or 0.01 to 100,000
        aliases: [2080ti]              # optional other spellings
        smi_pattern: 'RTX 2080 Ti'     # optional regex for nvidia-smi's name (`hadar nodes check`);
                                       # default: the id's words (rtx-2080-ti: RTX 2080 Ti)
    gpu_types: my-gpus.yaml            # ... or a file (relative to the cluster file) holding
                                       #     the same mapping under `gpus:`
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from hadar.core.errors import InputError
from hadar.core.gpu_catalogue import GpuSpec, gpu_key, register_gpu
from hadar.core.validation import (
    TENSOR_TFLOPS,
    Fp32Tflops,
    MemoryGb,
    from_validation_error,
    load_yaml,
)

GPU_ID_RE = re.compile(r"^[a-z0-9][a-z0-9.-]*$")


class UserGpu(BaseModel):
    """One declared GPU type (unknown fields rejected so typos surface)."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = None
    fp32_tflops: Fp32Tflops
    memory_gb: MemoryGb
    pcie_gen: int = Field(ge=1, le=6)
    tensor_tflops: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    aliases: list[str] = Field(default_factory=list)
    smi_pattern: str | None = None

    @field_validator("tensor_tflops")
    @classmethod
    def _tensor_range(cls, v: float) -> float:
        lo, hi = TENSOR_TFLOPS
        if v != 0 and not lo <= v <= hi:
            raise ValueError(f"must be 0 (no tensor cores) or {lo:g} to {hi:g} TFLOPS (got {v!r})")
        return v

    @field_validator("smi_pattern")
    @classmethod
    def _compiles(cls, v: str | None) -> str | None:
        if v is not None:
            try:
                re.compile(v)
            except re.error as exc:
                raise ValueError(f"not a regular expression ({exc})") from None
        return v


def default_smi_pattern(gpu_id: str) -> str:
    """``rtx-2080-ti`` -> a case-insensitive pattern matching ``NVIDIA GeForce RTX 2080 Ti``."""
    words = [re.escape(w) for w in re.split(r"[-_\s]+", gpu_id) if w]
    return r"\b" + r"[\s_-]?".join(words) + r"\b"


class _Declarations(BaseModel):
    gpu_types: dict[str, UserGpu]


def resolve_gpu_types(value: Any, source: str, base_dir: Path | None) -> dict[str, dict[str, Any]]:
    """The cluster file's ``gpu_types`` (inline mapping or a file name) as a validated inline
    mapping ``{id: figures}``; each GPU is registered with the catalogue. Errors are one line
    naming the file and ``gpu_types.<id>.<field>``."""
    where = source
    if isinstance(value, str):
        if not value.strip():
            raise InputError(
                f"{source}: gpu_types: expected a GPU catalogue file name or a mapping (got '')"
            )
        path = Path(value).expanduser()
        if not path.is_absolute() and base_dir is not None:
            path = base_dir / path
        data = load_yaml(path, "GPU catalogue")
        if set(data) != {"gpus"}:
            raise InputError(f"{path}: expected one top-level key `gpus:` (the GPU types)")
        value, where = data["gpus"], str(path)
        prefix = "gpus"
    else:
        prefix = "gpu_types"
    if not isinstance(value, Mapping) or not value:
        raise InputError(f"{where}: {prefix}: expected a mapping of GPU type ids to their figures")
    try:
        decl = _Declarations.model_validate({"gpu_types": value})
    except ValidationError as exc:
        err = from_validation_error(where, exc)
        raise InputError(str(err).replace(": gpu_types", f": {prefix}", 1)) from None
    out: dict[str, dict[str, Any]] = {}
    for raw_id, gpu in decl.gpu_types.items():
        gid = gpu_key(str(raw_id))
        if not GPU_ID_RE.match(gid):
            raise InputError(
                f"{where}: {prefix}.{raw_id}: use letters, digits, '.', '-', '_' and spaces in "
                f"GPU type names"
            )
        spec = GpuSpec(
            id=gid,
            name=gpu.name or gid,
            fp32_tflops=gpu.fp32_tflops,
            tensor_tflops=gpu.tensor_tflops,
            memory_gb=gpu.memory_gb,
            pcie_gen=gpu.pcie_gen,
            smi_pattern=gpu.smi_pattern or default_smi_pattern(gid),
        )
        register_gpu(spec, tuple(gpu.aliases), where=f"{where}: {prefix}.{raw_id}")
        out[gid] = gpu.model_dump(exclude_defaults=True)
    return out
