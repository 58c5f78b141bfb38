"""Hand-written job lists (CSV or YAML).

CSV header ``id,type,gpus,steps[,arrival][,weight]`` (or Pollux's workload schema,
``hadar.workloads.pollux``); YAML ``jobs: [{id, type, gpus, steps,
arrival, weight, spec, min_gpus, max_gpus, batch_range}, ...]`` where ``spec`` (YAML only) is the training spec real runs need. ``type`` is a throughput-table job type (e.g. ``ResNet-18 (batch size
64)``) or, for the physical workloads, IC/LM/LT/RS/MM.
"""

from __future__ import annotations

from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictInt,
    ValidationError,
    field_validator,
)

from goodput.applications import APPLICATIONS
from hadar.core.csv_input import read_csv_dicts
from hadar.core.errors import InputError, shorten
from hadar.core.job_profile import DATASET_CLASSES, WEIGHT_CLASSES
from hadar.core.jobs import Job
from hadar.core.validation import (
    MAX_GANG_GPUS,
    MAX_JOB_ID,
    MAX_JOBS,
    GangGpus,
    Seconds,
    Steps,
    Weight,
    from_validation_error,
    load_yaml,
    read_text,
)
from nodes.spec import MAX_BATCH_SIZE

MAX_SPEC_BATCH_SIZE = MAX_BATCH_SIZE * MAX_GANG_GPUS
"""A job's ``spec.batch_size`` in a simulation: the total batch of an elastic job, at most the
per-rank limit of real runs (:data:`nodes.spec.MAX_BATCH_SIZE`) on the largest gang."""


class _SpecKeys(BaseModel):
    """The keys a job's ``spec`` may hold: a real run's training spec (:class:`nodes.spec.JobSpec`,
    validated when ``hadar run`` accepts the file; a test keeps the two lists together), a Gavel
    trace's kept columns (``gavel``, checked by ``hadar export-gavel``), and the keys the
    simulator reads, checked here: a Pollux ``application`` (the job's type), the total
    ``batch_size``, and the PMI estimator's ``weight_class`` and ``dataset_class``
    (docs/estimators.md)."""

    model_config = ConfigDict(extra="forbid")

    model: Any = None
    size: Any = None
    data: Any = None
    lr: Any = None
    seed: Any = None
    precision: Any = None
    gavel: Any = None
    """A Gavel trace's columns kept for ``hadar export-gavel`` (checked there)."""
    batch_size: StrictInt | None = Field(default=None, gt=0, le=MAX_SPEC_BATCH_SIZE)
    application: Literal[APPLICATIONS] | None = None  # type: ignore[valid-type]
    weight_class: Literal[WEIGHT_CLASSES] | None = None  # type: ignore[valid-type]
    dataset_class: Literal[DATASET_CLASSES] | None = None  # type: ignore[valid-type]


class _JobSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    id: int = Field(ge=0, le=MAX_JOB_ID)
    type: str = Field(min_length=1, max_length=200)
    gpus: GangGpus
    steps: Steps
    arrival: Seconds = 0.0
    weight: Weight = 1.0
    model: str | None = None
    size_class: str | None = None
    spec: _SpecKeys | None = None
    """Training spec for real runs (model, size, data, batch_size, lr, seed; see docs/worker.md),
    and the simulator's keys (:class:`_SpecKeys`)."""
    min_gpus: GangGpus | None = None
    """Elastic jobs: the fewest GPUs (default ``gpus``)."""
    max_gpus: GangGpus | None = None
    """Elastic jobs: the most GPUs (default ``gpus``)."""
    batch_range: tuple[int, int] | None = None
    """Elastic jobs: the total batch sizes a policy may choose, ``[low, high]``."""

    @field_validator("id", "batch_range", mode="before")
    @classmethod
    def _no_booleans(cls, v: Any) -> Any:
        """``false``/``true`` are not ids or batch sizes (pydantic would read them as 0 and 1)."""
        if isinstance(v, bool) or (
            isinstance(v, (list, tuple)) and any(isinstance(x, bool) for x in v)
        ):
            raise ValueError(f"must be a whole number, not a boolean (got {v!r})")
        return v

    @field_validator("spec", mode="before")
    @classmethod
    def _spec_mapping(cls, v: Any) -> Any:
        if v is not None and not isinstance(v, dict):
            raise ValueError(f"expected a mapping of training-spec keys (got {shorten(repr(v))})")
        return v

    @field_validator("type")
    @classmethod
    def _printable(cls, v: str) -> str:
        if not v.isprintable():
            raise ValueError("a job type is one line of printable characters (no newline or tab)")
        # spaces around it are stripped as around the other fields ("LM (batch size 20) " fell
        # through to an estimated throughput instead of the measured one)
        if not v.strip():
            raise ValueError("a job type needs a name, not only spaces")
        return v.strip()

    def spec_dict(self) -> dict[str, Any]:
        """The ``spec`` as written (its keys that were given)."""
        return {} if self.spec is None else self.spec.model_dump(exclude_unset=True)


YAML_ONLY = ("spec", "batch_range")
CSV_COLUMNS = tuple(name for name in _JobSpec.model_fields if name not in YAML_ONLY)
"""The columns a CSV job list may have: the job fields, less the nested ones (YAML only)."""


def jobs_from_records(
    records: list[dict[str, Any]], source: str, row_label: str = "jobs"
) -> list[Job]:
    """Validate job records; errors name ``source`` and the record's field."""
    if len(records) > MAX_JOBS:
        raise InputError(f"{source}: {len(records)} jobs; at most {MAX_JOBS:,} are accepted")
    jobs: list[Job] = []
    seen: set[int] = set()
    for i, rec in enumerate(records):
        if not isinstance(rec, dict):
            raise InputError(f"{source}: {row_label}[{i}]: expected a mapping")
        try:
            spec = _JobSpec.model_validate(rec)
        except ValidationError as exc:
            err = from_validation_error(source, exc)
            raise InputError(
                str(err).replace(f"{source}: ", f"{source}: {row_label}[{i}].", 1)
            ) from None
        if spec.id in seen:
            raise InputError(f"{source}: {row_label}[{i}].id: duplicate job id {spec.id}")
        app = None if spec.spec is None else spec.spec.application
        if app is not None and app != spec.type:
            # a Pollux job's rates are its type's traces
            raise InputError(
                f"{source}: {row_label}[{i}].spec.application: must be the job's type "
                f"{shorten(spec.type)!r} (got {app!r})"
            )
        seen.add(spec.id)
        try:
            job = Job(
                job_id=spec.id,
                job_type=spec.type,
                num_gpus=spec.gpus,
                total_steps=spec.steps,
                arrival=spec.arrival,
                weight=spec.weight,
                model=spec.model,
                size_class=spec.size_class,
                spec=MappingProxyType(spec.spec_dict()),
                min_gpus=spec.min_gpus,
                max_gpus=spec.max_gpus,
                batch_range=spec.batch_range,
            )
            job.profile  # noqa: B018 - its type's batch size and classes, checked while the row is known
        except InputError as exc:
            raise InputError(f"{source}: {row_label}[{i}]: {exc}") from None
        jobs.append(job)
    if not jobs:
        raise InputError(f"{source}: no jobs")
    return jobs


def load_job_file(path: str | Path) -> list[Job]:
    """Load a CSV or YAML job list."""
    p = Path(path)
    if p.suffix.lower() in (".yaml", ".yml"):
        data = load_yaml(p, "workload")
        if not isinstance(data.get("jobs"), list):
            raise InputError(f"{p}: jobs: missing required field (a list of jobs)")
        return jobs_from_records(data["jobs"], str(p))
    if p.suffix.lower() == ".csv":
        text = read_text(p, "workload file")
        header, records = read_csv_dicts(text, str(p))
        if "application" in header:  # Pollux's schema (its goodput traces load only for it)
            from hadar.workloads.pollux import jobs_from_pollux_csv

            return jobs_from_pollux_csv(text, str(p))
        missing = {"id", "type", "gpus", "steps"} - set(header)
        if missing:
            raise InputError(f"{p}: header: missing column(s) {', '.join(sorted(missing))}")
        unknown = [c for c in header if c and c not in CSV_COLUMNS]
        if unknown:
            raise InputError(
                f"{p}: line 1 (header): unknown column {shorten(unknown[0])!r} "
                f"(known: {', '.join(CSV_COLUMNS)})"
            )
        rows = [{k: v for k, v in r.items() if v != ""} for _, r in records]
        return jobs_from_records(rows, str(p), row_label="row")
    read_text(p, "workload file")  # a missing or unreadable file says so first
    raise InputError(f"{p}: unsupported workload file type (use .csv, .yaml or .yml)")
