"""The verified-receive step every provider uses: rename only bytes that hash as expected."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from hadar.providers.base import ChecksumMismatchError
from hadar.providers.transfer import receive_verified, require_sha256


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_receive_verified_renames_matching_bytes_over_the_destination(tmp_path: Path) -> None:
    dst = tmp_path / "ckpt.pt"
    dst.write_bytes(b"old")
    receive_verified(dst, lambda tmp: tmp.write_bytes(b"new"), _sha(b"new"), "node a: x", "source")
    assert dst.read_bytes() == b"new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt.pt"]


def test_receive_verified_refuses_other_bytes_and_leaves_nothing(tmp_path: Path) -> None:
    dst = tmp_path / "ckpt.pt"
    dst.write_bytes(b"old")
    want = _sha(b"sent")
    got = _sha(b"garbled")
    with pytest.raises(
        ChecksumMismatchError,
        match=rf"^node a: downloaded x has sha256 {got[:12]}\.\.\., node says {want[:12]}\.\.\.$",
    ):
        receive_verified(
            dst, lambda tmp: tmp.write_bytes(b"garbled"), want, "node a: downloaded x", "node says"
        )
    assert dst.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt.pt"]


def test_receive_verified_removes_a_partial_file_when_the_fetch_fails(tmp_path: Path) -> None:
    def broken_fetch(tmp: Path) -> None:
        tmp.write_bytes(b"half")
        raise OSError("connection dropped")

    with pytest.raises(OSError, match="connection dropped"):
        receive_verified(tmp_path / "f", broken_fetch, _sha(b"whole"), "node a: f", "source")
    assert list(tmp_path.iterdir()) == []


def test_require_sha256_accepts_an_upper_case_expectation() -> None:
    digest = _sha(b"x")
    require_sha256(digest, digest.upper(), "node a: f", "expected")
    with pytest.raises(ChecksumMismatchError, match=r"^node a: f has sha256 .*, expected "):
        require_sha256(_sha(b"y"), digest.upper(), "node a: f", "expected")
