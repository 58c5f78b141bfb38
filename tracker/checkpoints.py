"""Checkpoint files in the ``hadar-ckpt-1`` format: verified loading and atomic writing.

A checkpoint is ``torch.save({"format": "hadar-ckpt-1", "model": str|None, "size": str|None,
"state_dict": {...}, "optimizer": {...}|None, "steps": int}, path)``; its sha256 (of the file's
bytes, :func:`hadar.core.integrity.sha256_file`) travels alongside it.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, BinaryIO

import torch

from hadar.core.integrity import CHECKPOINT_FORMAT as FORMAT
from hadar.core.integrity import CHUNK, sha256_file
from hadar.core.safe_paths import real_folder
from tracker.crashpoints import crash_point
from tracker.errors import CheckpointError

TMP_PREFIX = ".tmp-"


def make_payload(
    state_dict: Mapping[str, Any],
    optimizer: Mapping[str, Any] | None,
    steps: int,
    model: str | None,
    size: str | None,
) -> dict[str, Any]:
    """The dict saved in a ``hadar-ckpt-1`` file."""
    return {
        "format": FORMAT,
        "model": model,
        "size": size,
        "state_dict": dict(state_dict),
        "optimizer": optimizer,
        "steps": int(steps),
    }


def verify_file(path: Path, sha256: str, what: str) -> None:
    """Raise CheckpointError unless ``path`` is a file whose sha256 is ``sha256``."""
    if not path.is_file():
        raise CheckpointError(f"{what}: checkpoint {path} does not exist")
    try:
        actual = sha256_file(path)
    except OSError as exc:
        raise CheckpointError(f"{what}: cannot read checkpoint {path}: {exc.strerror}") from None
    if actual != sha256:
        raise CheckpointError(
            f"{what}: checkpoint {path} has sha256 {actual[:12]}..., reported {sha256[:12]}..."
        )


def load_checkpoint(path: Path, sha256: str | None, what: str) -> dict[str, Any]:
    """Verify (when ``sha256`` is given) and load a checkpoint, memory-mapping its tensors.

    Raises CheckpointError if the file is missing, fails its hash, cannot be read by
    ``torch.load(weights_only=True)``, or is not a ``hadar-ckpt-1`` dict with a tensor state_dict.
    """
    if sha256 is not None:
        verify_file(path, sha256, what)
    elif not path.is_file():
        raise CheckpointError(f"{what}: checkpoint {path} does not exist")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception as exc:  # torch raises many types for corrupt files
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CheckpointError(f"{what}: cannot load checkpoint {path}: {reason[:200]}") from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise CheckpointError(f"{what}: checkpoint {path} is not in {FORMAT} format")
    sd = payload.get("state_dict")
    if not isinstance(sd, dict) or not sd:
        raise CheckpointError(f"{what}: checkpoint {path} has no state_dict")
    for field in ("model", "size"):
        if payload.get(field) is not None and not isinstance(payload[field], str):
            raise CheckpointError(f"{what}: checkpoint {path} field {field!r} is not a string")
    return payload


class _HashingWriter:
    """File-like object that writes through to ``f`` and hashes everything written."""

    def __init__(self, f: BinaryIO) -> None:
        self._f = f
        self.hash = hashlib.sha256()

    def write(self, data: bytes) -> int:
        self.hash.update(data)
        return self._f.write(data)

    def flush(self) -> None:
        self._f.flush()


def _write_atomic(
    write: Callable[[BinaryIO], str], directory: Path, final_name: Callable[[str], str], stage: str
) -> tuple[Path, str]:
    # ``directory`` is a real path (the tracker resolved it when it opened): it is opened from
    # ``/`` without following a link, and the file is created and renamed inside it, so a folder
    # swapped for a link while the run goes is refused, never written through
    with real_folder(directory, create=True) as folder:
        tmp = f"{TMP_PREFIX}{uuid.uuid4().hex}.pt"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            with os.fdopen(os.open(tmp, flags, 0o666, dir_fd=folder), "wb") as f:
                sha = write(f)
                f.flush()
                os.fsync(f.fileno())
            crash_point(f"{stage}:tmp_written")
            final = final_name(sha)
            os.replace(tmp, final, src_dir_fd=folder, dst_dir_fd=folder)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp, dir_fd=folder)
            raise
        os.fsync(folder)
    crash_point(f"{stage}:renamed")
    return directory / final, sha


def save_atomic(
    payload: Mapping[str, Any], directory: Path, final_name: Callable[[str], str], stage: str
) -> tuple[Path, str]:
    """Save ``payload`` durably as ``directory / final_name(sha256)``; return (path, sha256).

    The bytes are streamed through a hasher to a temporary name in ``directory``, fsynced,
    renamed to the content-derived final name, and the directory is fsynced. Crash hooks
    ``<stage>:tmp_written`` and ``<stage>:renamed`` fire between the steps.
    """

    def write(f: BinaryIO) -> str:
        writer = _HashingWriter(f)
        # torch.save documents "a file-like object (has to implement write and flush)"; its
        # annotation asks for IO[bytes], which this two-method writer cannot claim to be.
        torch.save(dict(payload), writer)  # type: ignore[arg-type]
        return writer.hash.hexdigest()

    return _write_atomic(write, directory, final_name, stage)


def copy_atomic(
    src: Path, sha256: str, directory: Path, final_name: Callable[[str], str], stage: str, what: str
) -> tuple[Path, str]:
    """Copy ``src`` durably into ``directory`` like :func:`save_atomic`, checking its sha256.

    Raises CheckpointError (and leaves no file) if the bytes copied do not hash to ``sha256``.
    """

    def write(f: BinaryIO) -> str:
        h = hashlib.sha256()
        with open(src, "rb") as s:
            while block := s.read(CHUNK):
                h.update(block)
                f.write(block)
        if h.hexdigest() != sha256:
            raise CheckpointError(f"{what}: checkpoint {src} changed while being copied")
        return sha256

    return _write_atomic(write, directory, final_name, stage)
