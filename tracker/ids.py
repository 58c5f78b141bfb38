"""Copy ids of forked jobs (pure functions).

HadarE forks job ``j`` into copies ``j * max_job_count + i`` for ``i = 1 .. n``; ``i = 0`` is never
a copy, so a copy id is never a multiple of ``max_job_count``. The parent and index are recovered
with integer division. Job ids must lie in ``[0, max_job_count)`` and indices in
``[1, max_job_count)`` so that the mapping is one-to-one.
"""

from __future__ import annotations

import operator
from typing import SupportsIndex

from tracker.errors import IdError

DEFAULT_MAX_JOB_COUNT = 1000
MAX_MAX_JOB_COUNT = 2**31
"""Upper bound that keeps every copy id below 2**62 (a SQLite INTEGER)."""


def _as_int(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, SupportsIndex):
        raise IdError(f"{what}: expected an integer, got {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise IdError(f"{what}: expected an integer, got {value!r}") from None


def check_max_job_count(max_job_count: object) -> int:
    """Return ``max_job_count`` as an int if it is in ``[2, 2**31]``, else raise IdError."""
    m = _as_int(max_job_count, "max_job_count")
    if not 2 <= m <= MAX_MAX_JOB_COUNT:
        raise IdError(f"max_job_count: {m} is outside [2, {MAX_MAX_JOB_COUNT}]")
    return m


def check_job_id(job_id: object, max_job_count: int) -> int:
    """Return ``job_id`` as an int if ``0 <= job_id < max_job_count``, else raise IdError."""
    j = _as_int(job_id, "job_id")
    if not 0 <= j < max_job_count:
        raise IdError(
            f"job_id: {j} is outside [0, {max_job_count}) (max_job_count={max_job_count})"
        )
    return j


def check_copy_index(index: object, max_job_count: int) -> int:
    """Return ``index`` as an int if ``1 <= index < max_job_count``, else raise IdError."""
    i = _as_int(index, "copy index")
    if not 1 <= i < max_job_count:
        raise IdError(
            f"copy index: {i} is outside [1, {max_job_count}) (max_job_count={max_job_count})"
        )
    return i


def copy_id(job_id: int, index: int, max_job_count: int) -> int:
    """The id of copy ``index`` (1-based) of job ``job_id``."""
    m = check_max_job_count(max_job_count)
    return check_job_id(job_id, m) * m + check_copy_index(index, m)


def parent_job(copy_id_: int, max_job_count: int) -> int:
    """The job a copy id belongs to. Raises IdError if ``copy_id_`` is not a valid copy id."""
    return split_copy_id(copy_id_, max_job_count)[0]


def copy_index(copy_id_: int, max_job_count: int) -> int:
    """The 1-based index of a copy within its job. Raises IdError for invalid copy ids."""
    return split_copy_id(copy_id_, max_job_count)[1]


def split_copy_id(copy_id_: object, max_job_count: int) -> tuple[int, int]:
    """``(job_id, index)`` of a copy id; raises IdError if it is not a valid copy id."""
    m = check_max_job_count(max_job_count)
    c = _as_int(copy_id_, "copy_id")
    if c < 0:
        raise IdError(f"copy_id: {c} is negative")
    job, index = divmod(c, m)
    if index == 0:
        raise IdError(f"copy_id: {c} is a multiple of max_job_count={m}, never a copy")
    if job >= m:
        raise IdError(f"copy_id: {c} names job {job}, outside [0, {m})")
    return job, index


def is_copy_id(copy_id_: object, max_job_count: int) -> bool:
    """Whether ``copy_id_`` is a valid copy id under ``max_job_count``."""
    try:
        split_copy_id(copy_id_, max_job_count)
    except IdError:
        return False
    return True
