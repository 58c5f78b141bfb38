"""The steps of a verified file transfer that the providers share: a temporary name beside the
destination, the sha256 comparison with its one-line error, and the atomic local receive
(fetch to the temporary name, hash, rename over the destination, leave nothing on failure)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from pathlib import Path

from hadar.core.integrity import sha256_file
from hadar.providers.base import ChecksumMismatchError


def part_name(name: str) -> str:
    """A hidden, unique temporary name for a file ``name`` is written under until verified."""
    return f".{name}.part-{uuid.uuid4().hex[:8]}"


def require_sha256(actual: str, wanted: str, what: str, wanted_label: str) -> None:
    """Raise :class:`ChecksumMismatchError` (``<what> has sha256 <actual>..., <wanted_label>
    <wanted>...``) unless ``actual`` equals ``wanted`` (which may be in upper case)."""
    if actual != wanted.lower():
        raise ChecksumMismatchError(
            f"{what} has sha256 {actual[:12]}..., {wanted_label} {wanted[:12]}..."
        )


def receive_verified(
    dst: Path, fetch: Callable[[Path], object], want: str, what: str, wanted_label: str
) -> None:
    """``fetch`` a file into a temporary name beside ``dst`` (whose folder must exist), check
    that its sha256 is ``want`` (see :func:`require_sha256`), then rename it over ``dst``.
    On any failure the temporary file is removed and ``dst`` is untouched."""
    tmp = dst.with_name(part_name(dst.name))
    try:
        fetch(tmp)
        require_sha256(sha256_file(tmp), want, what, wanted_label)
        os.replace(tmp, dst)
    finally:
        tmp.unlink(missing_ok=True)
