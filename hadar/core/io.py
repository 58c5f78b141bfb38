"""Writing output and state files: every file is replaced atomically (a reader, or a run resumed
after a crash, sees the old file or the new one, never half of one), CSV goes through pandas and
JSON ends with a newline.

``durable=True`` also fsyncs the file and its folder, so the new content survives a power cut
(state a run resumes from); plain outputs skip the two fsyncs.

No writer writes into anything but a regular file: an existing path that is a device, a FIFO, a
socket or a folder is refused with one line (:func:`check_writable`), a file opened for appending
is opened without following a symbolic link (:func:`open_append`), and a replaced file replaces a
link itself, never its target.

``nofollow=True`` (a run directory's files, whose real path the run resolved when it started)
also refuses a link at any component of the path, planted while the run goes: the folder is
opened from ``/`` without following links (:func:`hadar.core.safe_paths.real_folder`) and the
file is created, replaced and appended to inside that folder's descriptor.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import secrets
import stat
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Literal, overload

from hadar.core.errors import InputError
from hadar.core.safe_paths import real_folder

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "atomic_file",
    "check_writable",
    "csv_text",
    "fsync_dir",
    "open_append",
    "write_bytes",
    "write_csv",
    "write_figure",
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


_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
)


def _kind(mode: int) -> str | None:
    """What a non-regular file is (None for a regular file or a link)."""
    return next((name for test, name in _KINDS if test(mode)), None)


def _not_regular(path: str | Path, kind: str) -> InputError:
    return InputError(f"{path}: is {kind}, not a regular file; hadar writes only regular files")


def check_writable(path: str | Path) -> None:
    """One-line :class:`InputError` if ``path`` exists and is not a regular file (a device, a
    FIFO, a socket, a folder), itself or where the link it is points: replacing or writing it
    would destroy a device node or block on a pipe."""
    for follow in (False, True):
        try:
            mode = os.stat(path, follow_symlinks=follow).st_mode
        except (FileNotFoundError, NotADirectoryError):
            return
        except OSError as exc:
            raise InputError(f"{path}: cannot write: {exc.strerror or exc}") from None
        kind = _kind(mode)
        if kind is not None:
            raise _not_regular(path, kind)
        if not stat.S_ISLNK(mode):
            return


def open_append(
    path: str | Path, *, follow_links: bool = False, mode: int = 0o666, nofollow: bool = False
) -> IO[str]:
    """Open ``path`` (UTF-8 text) to append to, created with ``mode`` if missing; a FIFO, a
    device, a folder or (unless ``follow_links``: a user's own file such as ``known_hosts``, which
    a dotfile manager may link) a symbolic link there is a one-line :class:`InputError`.
    ``nofollow``: no component of the (real) path may be a link either."""
    # O_NONBLOCK: a FIFO without a reader fails (ENXIO) instead of blocking
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK | os.O_CLOEXEC
    if not follow_links:
        flags |= os.O_NOFOLLOW
    try:
        if nofollow:
            with real_folder(Path(path).parent, create=True) as folder:
                fd = os.open(Path(path).name, flags | os.O_NOFOLLOW, mode, dir_fd=folder)
        else:
            fd = os.open(path, flags, mode)
    except OSError as exc:
        if exc.errno == errno.ENXIO:
            raise _not_regular(path, "a FIFO") from None
        if exc.errno == errno.EISDIR:
            raise _not_regular(path, "a folder") from None
        if exc.errno == errno.ELOOP:
            raise InputError(
                f"{path}: is a symbolic link; hadar does not append through links (remove it)"
            ) from None
        raise
    kind = _kind(os.fstat(fd).st_mode)
    if kind is not None:
        os.close(fd)
        raise _not_regular(path, kind)
    os.set_blocking(fd, True)
    return os.fdopen(fd, "a", encoding="utf-8")


@overload
def atomic_file(
    path: str | Path, mode: Literal["w"] = "w", *, durable: bool = False, nofollow: bool = False
) -> contextlib.AbstractContextManager[IO[str]]: ...
@overload
def atomic_file(
    path: str | Path, mode: Literal["wb"], *, durable: bool = False, nofollow: bool = False
) -> contextlib.AbstractContextManager[IO[bytes]]: ...
def atomic_file(
    path: str | Path,
    mode: Literal["w", "wb"] = "w",
    *,
    durable: bool = False,
    nofollow: bool = False,
) -> contextlib.AbstractContextManager[IO[Any]]:
    """Open a new temporary file beside ``path`` (its folder is created); when the block ends
    normally the file replaces ``path``, when it raises the temporary file is removed and
    ``path`` is untouched. The file gets the usual permissions (umask), not a private 0600.
    ``nofollow``: ``path`` is a real path none of whose components may be a link."""
    return _atomic_file(Path(path), mode, durable, nofollow)


@contextlib.contextmanager
def _folder_of(path: Path, nofollow: bool) -> Iterator[int]:
    """A descriptor of ``path``'s folder, created if missing (see :func:`atomic_file`)."""
    if nofollow:
        with real_folder(path.parent, create=True) as fd:
            yield fd
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        yield fd
    finally:
        os.close(fd)


@contextlib.contextmanager
def _atomic_file(path: Path, mode: str, durable: bool, nofollow: bool) -> Iterator[IO[Any]]:
    check_writable(path)
    tmp = f".{path.name}.{os.getpid()}-{secrets.token_hex(4)}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    with _folder_of(path, nofollow) as folder:
        try:
            raw = os.open(tmp, flags, 0o666, dir_fd=folder)
            f: IO[Any]
            with os.fdopen(raw, "wb") if mode == "wb" else open(raw, "w", encoding="utf-8") as f:
                yield f
                if durable:
                    f.flush()
                    os.fsync(f.fileno())
            os.replace(tmp, path.name, src_dir_fd=folder, dst_dir_fd=folder)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp, dir_fd=folder)
            raise
        if durable:
            os.fsync(folder)


def write_bytes(
    path: str | Path, data: bytes, *, durable: bool = False, nofollow: bool = False
) -> Path:
    """Replace ``path`` with ``data`` atomically; returns the path."""
    with atomic_file(path, "wb", durable=durable, nofollow=nofollow) as f:
        f.write(data)
    return Path(path)


def write_figure(path: str | Path, figure: Any, *, nofollow: bool = False, **savefig: Any) -> Path:
    """Save a matplotlib ``figure`` to ``path`` atomically (format from the suffix; keyword
    arguments go to ``savefig``): a link there is replaced, never written through."""
    p = Path(path)
    with atomic_file(p, "wb", nofollow=nofollow) as f:
        figure.savefig(f, format=p.suffix.lstrip(".") or "png", **savefig)
    return p


def write_text(
    path: str | Path, text: str, *, durable: bool = False, nofollow: bool = False
) -> Path:
    """Replace ``path`` with ``text`` (UTF-8) atomically; returns the path."""
    with atomic_file(path, "w", durable=durable, nofollow=nofollow) as f:
        f.write(text)
    return Path(path)


def write_json(
    path: str | Path, data: Any, *, indent: int = 2, durable: bool = False, nofollow: bool = False
) -> Path:
    """Replace ``path`` with ``data`` as JSON (``indent`` spaces, a final newline) atomically."""
    text = json.dumps(data, indent=indent) + "\n"
    return write_text(path, text, durable=durable, nofollow=nofollow)


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
    text: str = frame.to_csv(index=False, na_rep="", lineterminator="\n")
    return text


def write_csv(
    path: str | Path,
    rows: Iterable[Mapping[str, Any] | Sequence[Any]],
    columns: Sequence[str],
    *,
    decimals: int | None = None,
    nofollow: bool = False,
) -> Path:
    """Replace ``path`` with the CSV of ``rows`` (see :func:`csv_text`) atomically."""
    return write_text(path, csv_text(rows, columns, decimals=decimals), nofollow=nofollow)


def write_frame(path: str | Path, frame: pd.DataFrame, *, decimals: int | None = None) -> Path:
    """Replace ``path`` with ``frame`` as CSV atomically: no index, floats rounded to
    ``decimals`` places when given, missing values empty."""
    rounded = frame if decimals is None else frame.round(decimals)
    return write_text(path, rounded.to_csv(index=False, na_rep="", lineterminator="\n"))
