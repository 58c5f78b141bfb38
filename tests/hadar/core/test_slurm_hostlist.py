"""Slurm's compressed host lists, expanded as ``scontrol show hostnames`` does."""

from __future__ import annotations

import re

import pytest

from hadar.core.slurm_hostlist import MAX_HOSTS, expand_hostlist


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("n1", ["n1"]),
        ("n[1-3]", ["n1", "n2", "n3"]),
        ("n[1-2,7],gpu-[08-10]a", ["n1", "n2", "n7", "gpu-08a", "gpu-09a", "gpu-10a"]),
        ("r[1-2]n[1-2]", ["r1n1", "r1n2", "r2n1", "r2n2"]),
        ("a,b", ["a", "b"]),
    ],
)
def test_expands(text: str, names: list[str]) -> None:
    assert expand_hostlist(text) == names


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("n[1-3", "unbalanced brackets"),
        ("n1-3]", "unbalanced brackets"),
        ("n[[1-3]]", "unbalanced brackets"),
        ("n[3-1]", "runs backwards"),
        ("n[a-b]", "is no number or range"),
        ("n1,,n2", "empty name"),
        (f"n[1-{MAX_HOSTS + 5}]", "more than"),
    ],
)
def test_refuses_with_a_reason(text: str, why: str) -> None:
    with pytest.raises(ValueError, match=re.escape(why)):
        expand_hostlist(text)
