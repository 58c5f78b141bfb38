"""Copy ids: job_id * max_job_count + i, parent and index recoverable, ranges validated."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hadar.core.errors import InputError
from tracker import ids
from tracker.errors import IdError


@given(data=st.data(), m=st.integers(2, 10**6))
def test_copy_id_round_trips_to_parent_and_index(data, m: int) -> None:
    job = data.draw(st.integers(0, m - 1))
    index = data.draw(st.integers(1, m - 1))
    cid = ids.copy_id(job, index, m)
    assert cid == job * m + index
    assert ids.split_copy_id(cid, m) == (job, index)
    assert ids.parent_job(cid, m) == job and ids.copy_index(cid, m) == index
    assert ids.is_copy_id(cid, m)


def test_paper_example() -> None:
    assert [ids.copy_id(7, i, 1000) for i in (1, 2, 3)] == [7001, 7002, 7003]
    assert ids.parent_job(7003, 1000) == 7


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: ids.copy_id(1000, 1, 1000), r"job_id: 1000 is outside \[0, 1000\)"),
        (lambda: ids.copy_id(-1, 1, 1000), "job_id: -1"),
        (lambda: ids.copy_id(1, 0, 1000), r"copy index: 0 is outside \[1, 1000\)"),
        (lambda: ids.copy_id(1, 1000, 1000), "copy index: 1000"),
        (lambda: ids.copy_id(1, 1, 1), r"max_job_count: 1 is outside"),
        (lambda: ids.copy_id(1, 1, 2**31 + 1), "max_job_count"),
        (lambda: ids.copy_id(True, 1, 10), "expected an integer"),
        (lambda: ids.copy_id(1.5, 1, 10), "expected an integer"),
        (lambda: ids.split_copy_id(3000, 1000), "multiple of max_job_count"),
        (lambda: ids.split_copy_id(1000 * 1000 + 1, 1000), "names job 1000"),
        (lambda: ids.split_copy_id(-5, 1000), "negative"),
    ],
)
def test_invalid_ids_raise_one_line_input_errors(call, message: str) -> None:
    with pytest.raises(IdError, match=message) as err:
        call()
    assert isinstance(err.value, InputError) and "\n" not in str(err.value)


def test_is_copy_id_is_false_for_job_slots() -> None:
    assert not ids.is_copy_id(0, 10) and not ids.is_copy_id(20, 10) and ids.is_copy_id(21, 10)
