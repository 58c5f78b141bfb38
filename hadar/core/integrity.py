"""How the worker, the providers and the tracker identify a checkpoint file: the format tag stored
inside it and the sha256 of its bytes, which travels alongside it and verifies every transfer.

Standard library only (no torch): the providers and the SSH health check import this and must
stay fast to import.
"""

from __future__ import annotations

import hashlib
import os
import re

CHECKPOINT_FORMAT = "hadar-ckpt-1"
"""The ``format`` value of every checkpoint dict (see :mod:`nodes.checkpoint`)."""

SHA256_RE = re.compile(r"^[0-9a-f]{64}$")
"""A sha256 hex digest in lower case."""

CHUNK = 1 << 20
"""Bytes read at a time when hashing or copying a file."""


def sha256_file(path: str | os.PathLike[str], chunk: int = CHUNK) -> str:
    """Hex sha256 of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()
