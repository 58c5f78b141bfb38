"""Writing output and state files: every file is replaced atomically (a reader, or a run resumed
after a crash, sees the old file or the new one, never half of one), CSV goes through pandas and
JSON ends with a newline.

``durable=True`` also fsyncs the file and its folder, so the new content survives a power cut
(state a run resumes from); plain outputs skip the two fsyncs.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Literal, overload

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "atomic_file",
    "csv_text",
    "fsync_dir",
    "write_bytes",
    "write_csv",
    "write_frame",
    "write_json",
    "write_text",
]


def fsync_dir(directory: Path) -> None:
    """fsync a folder so a rename inside it is durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@overload
def atomic_file(
    path: str | Path, mode: Literal["w"] = "w", *, durable: bool = False
) -> contextlib.AbstractContextManager[IO[str]]: ...
@overload
def atomic_file(
    path: str | Path, mode: Literal["wb"], *, durable: bool = False
) -> contextlib.AbstractContextManager[IO[bytes]]: ...
def atomic_file(
    path: str | Path, mode: Literal["w", "wb"] = "w", *, durable: bool = False
) -> contextlib.AbstractContextManager[IO[Any]]:
    """Open a new temporary file beside ``path`` (its folder is created); when the block ends
    normally the file replaces ``path``, when it raises the temporary file is removed and
    ``path`` is untouched. The file gets the usual permissions (umask), not a private 0600."""
    return _atomic_file(Path(path), mode, durable)


@contextlib.contextmanager
def _atomic_file(path: Path, mode: str, durable: bool) -> Iterator[IO[Any]]:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{secrets.token_hex(4)}.tmp")
    try:
        f: IO[Any]
        with open(tmp, "xb") if mode == "wb" else open(tmp, "x", encoding="utf-8") as f:
            yield f
            if durable:
                f.flush()
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if durable:
        fsync_dir(path.parent)


def write_bytes(path: str | Path, data: bytes, *, durable: bool = False) -> Path:
    """Replace ``path`` with ``data`` atomically; returns the path."""
    with atomic_file(path, "wb", durable=durable) as f:
        f.write(data)
    return Path(path)


def write_text(path: str | Path, text: str, *, durable: bool = False) -> Path:
    """Replace ``path`` with ``text`` (UTF-8) atomically; returns the path."""
    with atomic_file(path, "w", durable=durable) as f:
        f.write(text)
    return Path(path)


def write_json(path: str | Path, data: Any, *, indent: int = 2, durable: bool = False) -> Path:
    """Replace ``path`` with ``data`` as JSON (``indent`` spaces, a final newline) atomically."""
    return write_text(path, json.dumps(data, indent=indent) + "\n", durable=durable)


def csv_text(
    rows: Iterable[Mapping[str, Any] | Sequence[Any]],
    columns: Sequence[str],
    *,
    decimals: int | None = None,
) -> str:
    """CSV of ``rows`` under the header ``columns``: a row is a mapping (missing keys and None
    are empty cells) or a sequence in column order. Each value is written as Python prints it
    (no int -> float widening of a column that has an empty cell; NaN is an empty cell too);
    floats are rounded to ``decimals`` places when given."""
    import pandas as pd  # pandas loads in ~0.3 s; the worker writes JSON only

    def cell(value: Any) -> Any:
        if decimals is not None and isinstance(value, float):
            return round(value, decimals)
        return value

    table = [
        [cell(r.get(c)) for c in columns] if isinstance(r, Mapping) else [cell(v) for v in r]
        for r in rows
    ]
    frame = pd.DataFrame(table, columns=list(columns), dtype=object)
    return frame.to_csv(index=False, na_rep="", lineterminator="\n")


def write_csv(
    path: str | Path,
    rows: Iterable[Mapping[str, Any] | Sequence[Any]],
    columns: Sequence[str],
    *,
    decimals: int | None = None,
) -> Path:
    """Replace ``path`` with the CSV of ``rows`` (see :func:`csv_text`) atomically."""
    return write_text(path, csv_text(rows, columns, decimals=decimals))


def write_frame(path: str | Path, frame: pd.DataFrame, *, decimals: int | None = None) -> Path:
    """Replace ``path`` with ``frame`` as CSV atomically: no index, floats rounded to
    ``decimals`` places when given, missing values empty."""
    rounded = frame if decimals is None else frame.round(decimals)
    return write_text(path, rounded.to_csv(index=False, na_rep="", lineterminator="\n"))
