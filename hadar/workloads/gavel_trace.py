"""Gavel's trace formats: read them as workloads, write any workload as one.

One job per line, tab-separated, in arrival order (Gavel asserts non-decreasing arrivals):

* 10 columns (Gavel's current ``parse_trace``): ``job_type, command, working_dir,
  num_steps_arg, needs_data_dir, total_steps, scale_factor, priority_weight, SLO,
  arrival_time``;
* 7 columns (Gavel's older traces): ``job_type, command, num_steps_arg, needs_data_dir,
  total_steps, arrival_time, scale_factor``.

A job's id is its line index (0-based, blank lines skipped), its gang size W the scale factor,
its weight the priority weight. The columns our jobs have no field for (command, working dir,
steps argument, needs-data-dir, SLO) are kept in ``Job.spec["gavel"]`` so that reading and
writing a trace gives the same trace back.

Writing: jobs in (arrival, id) order; total steps as integers (Gavel's type; non-integral
steps are rounded, at least 1); arrival times and weights printed exactly (``repr``). Commands,
working directories and steps arguments come from Gavel's job table for the job families it
knows (ResNet-18/50, Transformer, LM, Recommendation, A3C, CycleGAN; Gavel's ``job_table.py``,
MIT licence, see estimators/data/LICENSE.gavel); other job types get placeholders
(``python3 train.py``, working dir ``.``, ``--num_steps``, no data dir). Gavel's simulator
ignores these columns; only its physical-cluster runs use them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from estimators.throughput import GavelThroughputTable
from hadar.core.errors import InputError
from hadar.core.io import write_text
from hadar.core.jobs import Job
from hadar.core.validation import (
    MAX_JOBS,
    DataDirFlag,
    GangGpus,
    Seconds,
    SloSeconds,
    Steps,
    Weight,
    from_validation_error,
    read_text,
)

COLUMNS_10 = (
    "job_type",
    "command",
    "working_dir",
    "num_steps_arg",
    "needs_data_dir",
    "total_steps",
    "scale_factor",
    "priority_weight",
    "SLO",
    "arrival_time",
)
COLUMNS_7 = (
    "job_type",
    "command",
    "num_steps_arg",
    "needs_data_dir",
    "total_steps",
    "arrival_time",
    "scale_factor",
)


@dataclass(frozen=True)
class GavelCommand:
    """How Gavel launches a job family (``%s`` = Gavel's data directory)."""

    command: str
    working_dir: str
    num_steps_arg: str
    needs_data_dir: bool = True


# From Gavel's scheduler/job_table.py (MIT licence); "{bs}" is the job type's batch size.
GAVEL_JOB_TABLE: dict[str, GavelCommand] = {
    "ResNet-18": GavelCommand(
        "python3 main.py --data_dir=%s/cifar10 --batch_size {bs}",
        "image_classification/cifar10",
        "--num_steps",
    ),
    "ResNet-50": GavelCommand(
        "python3 main.py -j 8 -a resnet50 -b {bs} %s/imagenet/",
        "image_classification/imagenet",
        "--num_minibatches",
    ),
    "Transformer": GavelCommand(
        "python3 train.py -data %s/translation/multi30k.atok.low.pt -batch_size {bs} "
        "-proj_share_weight",
        "translation",
        "-step",
    ),
    "LM": GavelCommand(
        "python main.py --cuda --data %s/wikitext2 --batch_size {bs}",
        "language_modeling",
        "--steps",
    ),
    "Recommendation": GavelCommand(
        "python3 train.py --data_dir %s/ml-20m/pro_sg/ --batch_size {bs}", "recommendation", "-n"
    ),
    "A3C": GavelCommand(
        "python3 main.py --env PongDeterministic-v4 --workers 4 --amsgrad True",
        "rl",
        "--max-steps",
        needs_data_dir=False,
    ),
    "CycleGAN": GavelCommand(
        "python3 cyclegan.py --dataset_path %s/monet2photo --decay_epoch 0", "cyclegan", "--n_steps"
    ),
}
PLACEHOLDER = GavelCommand("python3 train.py", ".", "--num_steps", needs_data_dir=False)

_TYPE_RE = re.compile(r"^(?P<family>.*?) \(batch size (?P<bs>\d+)\)$")


def gavel_command(job_type: str) -> GavelCommand:
    """Gavel's launch command for ``job_type`` (placeholders for families Gavel does not have)."""
    m = _TYPE_RE.match(job_type)
    family, bs = (m.group("family"), m.group("bs")) if m else (job_type, "")
    template = GAVEL_JOB_TABLE.get(family)
    if template is None:
        return PLACEHOLDER
    return GavelCommand(
        template.command.replace("{bs}", bs),
        template.working_dir,
        template.num_steps_arg,
        template.needs_data_dir,
    )


def family_of(job_type: str) -> str:
    """``"ResNet-18 (batch size 64)"`` -> ``"ResNet-18"``."""
    m = _TYPE_RE.match(job_type)
    return m.group("family") if m else job_type


# -- reading ---------------------------------------------------------------------------------
def read_trace(path: str | Path, table: GavelThroughputTable | None = None) -> list[Job]:
    """Parse a 10- or 7-column Gavel trace. With ``table``, every (job type, W) must be in it."""
    p = Path(path)
    text = read_text(p, "trace file")
    jobs: list[Job] = []
    prev_arrival = -math.inf
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        job = _parse_line(line.split("\t"), len(jobs), f"{p}: line {lineno} (job {len(jobs)})")
        where = f"{p}: line {lineno} (job {job.job_id})"
        if job.arrival < prev_arrival:
            raise InputError(
                f"{where}: arrival_time {job.arrival:g} is earlier than the previous job's "
                f"{prev_arrival:g} (Gavel traces are in arrival order)"
            )
        prev_arrival = job.arrival
        if table is not None:
            check_in_table(job, table, where)
        jobs.append(job)
        if len(jobs) > MAX_JOBS:
            raise InputError(f"{p}: more than {MAX_JOBS:,} jobs; at most {MAX_JOBS:,} are accepted")
    if not jobs:
        raise InputError(f"{p}: no jobs")
    return jobs


def check_in_table(job: Job, table: GavelThroughputTable, where: str) -> None:
    """InputError unless ``table`` has the job's type and (type, W) key."""
    if job.job_type not in table.job_types:
        raise InputError(f"{where}: job type {job.job_type!r} is not in {table.source}")
    if job.num_gpus not in table.gang_sizes(job.job_type):
        raise InputError(
            f"{where}: {table.source} has no entry for ({job.job_type!r}, {job.num_gpus})"
        )


class TraceRow(BaseModel):
    """One line of a Gavel trace (the 10 columns; a 7-column line gets Gavel's defaults)."""

    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    job_type: str = Field(min_length=1, max_length=200)
    command: str
    working_dir: str = ""
    num_steps_arg: str
    needs_data_dir: DataDirFlag
    total_steps: Steps
    scale_factor: GangGpus
    priority_weight: Weight = 1.0
    SLO: SloSeconds = -1.0
    arrival_time: Seconds


def _parse_line(cols: list[str], job_id: int, where: str) -> Job:
    if len(cols) == len(COLUMNS_10):
        rec = dict(zip(COLUMNS_10, cols, strict=True))
    elif len(cols) == len(COLUMNS_7):
        rec = dict(zip(COLUMNS_7, cols, strict=True))
    else:
        raise InputError(f"{where}: expected 10 (or 7) tab-separated columns, got {len(cols)}")
    try:
        row = TraceRow.model_validate(rec)
    except ValidationError as exc:
        raise from_validation_error(where, exc) from None
    gavel = {
        "command": rec["command"],
        "working_dir": rec.get("working_dir", ""),
        "num_steps_arg": rec["num_steps_arg"],
        "needs_data_dir": bool(row.needs_data_dir),
        "SLO": row.SLO,
    }
    return Job(
        job_id=job_id,
        job_type=row.job_type,
        num_gpus=row.scale_factor,
        total_steps=row.total_steps,
        arrival=row.arrival_time,
        weight=row.priority_weight,
        model=family_of(row.job_type),
        spec=MappingProxyType({"gavel": MappingProxyType(gavel)}),
    )


# -- writing ---------------------------------------------------------------------------------
def trace_lines(jobs: Iterable[Job], source: str = "") -> list[str]:
    """The 10-column trace lines of ``jobs`` in (arrival, id) order, each one a line the trace
    reader accepts (:class:`InputError` naming ``source``, the job and the column otherwise: an
    SLO of -5 was written, then refused when read back)."""
    out = []
    prefix = f"{source}: " if source else ""
    for job in sorted(jobs, key=lambda j: (j.arrival, j.job_id)):
        kept: Any = job.spec.get("gavel") if job.spec else None
        cmd, slo = (
            _kept_columns(f"{prefix}job {job.job_id}", kept)
            if kept
            else (gavel_command(job.job_type), -1.0)
        )
        cols = [
            job.job_type,
            cmd.command,
            cmd.working_dir,
            cmd.num_steps_arg,
            str(int(cmd.needs_data_dir)),
            str(gavel_steps(job.total_steps)),
            str(job.num_gpus),
            _exact(job.weight),
            _exact(slo),
            repr(float(job.arrival)),
        ]
        bad = next((c for c in cols if "\t" in c or (c and c.splitlines() != [c])), None)
        if bad is not None:
            raise InputError(
                f"{prefix}job {job.job_id}: field {bad[:60]!r} contains a tab or line break "
                "(not representable)"
            )
        _parse_line(cols, job.job_id, f"{prefix}job {job.job_id}: as a Gavel trace line")
        out.append("\t".join(cols))
    return out


def _kept_columns(job: str, kept: Any) -> tuple[GavelCommand, float]:
    """The command columns and SLO a job read from a Gavel trace keeps in ``spec.gavel``, checked
    (a job file may set ``spec.gavel`` by hand): :class:`InputError` naming the field (``job``
    names the job)."""
    where = f"{job}: spec.gavel"
    if not isinstance(kept, Mapping):
        raise InputError(f"{where}: expected a mapping of the trace's columns")
    for key in ("command", "working_dir", "num_steps_arg"):
        if not isinstance(kept.get(key), str):
            raise InputError(f"{where}.{key}: expected a string")
    data_dir = kept.get("needs_data_dir")
    if data_dir not in (0, 1) or isinstance(data_dir, float):
        raise InputError(f"{where}.needs_data_dir: expected true/false or 0/1")
    slo = kept.get("SLO", -1.0)
    if isinstance(slo, bool) or not isinstance(slo, int | float) or not math.isfinite(slo):
        raise InputError(f"{where}.SLO: expected a finite number")
    command = GavelCommand(
        kept["command"], kept["working_dir"], kept["num_steps_arg"], bool(data_dir)
    )
    return command, float(slo)


def write_trace(jobs: Sequence[Job], path: str | Path, source: str = "") -> Path:
    """Write ``jobs`` (read from ``source``) as a 10-column Gavel trace (parent directories are
    created)."""
    return write_text(path, "".join(line + "\n" for line in trace_lines(jobs, source)))


def gavel_steps(steps: float) -> int:
    """Gavel's integer total steps for ``steps`` (rounded, at least 1)."""
    return max(1, int(round(steps)))


def _exact(v: float) -> str:
    """Integers without a decimal point (as Gavel prints them), other floats exactly."""
    return str(int(v)) if float(v).is_integer() else repr(float(v))
