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

The files of one save (a simulation's summary and tables, a comparison's) are replaced together
(:func:`replaced_together`): all checked first, written into a staging folder beside them, and
renamed into place only when every one is complete; a save that fails leaves the previous files
as they were, and its error is one line naming the file.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import secrets
import signal
import stat
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Literal, overload

from hadar.core.errors import InputError
from hadar.core.safe_paths import real_folder, remove_tree

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "atomic_file",
    "check_replaceable",
    "check_writable",
    "csv_text",
    "fsync_dir",
    "open_append",
    "replaced_together",
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


def non_regular_kind(mode: int) -> str | None:
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
        kind = non_regular_kind(mode)
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
    kind = non_regular_kind(os.fstat(fd).st_mode)
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
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except FileExistsError:  # a name on the way that is no folder (a dangling link)
        raise InputError(
            f"{path.parent}: cannot create the folder: a file or a dangling symbolic link is "
            "in the way"
        ) from None
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
    with _staged_errors(path), _folder_of(path, nofollow) as folder:
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


# -- the files of one save, replaced together --------------------------------------------------
STAGING_PREFIX = ".hadar-saving-"
"""Starts the name of a save's staging folder (:func:`replaced_together`) and of what it keeps
there: hidden, removed when the save ends (a process killed mid-save leaves one behind)."""
_DIR_NOFOLLOW = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_Kept = Literal["absent", "linked", "moved"]
"""How a destination's previous file was kept: there was none, a hard link to it in the staging
folder (it stays in place), or moved there (a filesystem without hard links)."""


def _shown(path: Path) -> Path:
    """``path`` as the user knows it: without the staging folders of saves in progress."""
    return Path(*(part for part in path.parts if not part.startswith(STAGING_PREFIX)))


def _cannot(path: Path, what: str, exc: OSError, more: str = "") -> InputError:
    """``PATH: cannot WHAT: REASON`` in one line."""
    return InputError(f"{_shown(path)}: cannot {what}: {exc.strerror or exc}{more}")


@contextlib.contextmanager
def _staged_errors(path: Path) -> Iterator[None]:
    """An OSError writing ``path`` in a staging folder: one line naming the file it is for."""
    try:
        yield
    except OSError as exc:
        if _shown(path) == path:
            raise
        raise _cannot(path, "write", exc) from None


def _check_subfolder(path: Path) -> None:
    """One-line :class:`InputError` unless ``path`` is missing or a real folder (not a link)."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise _cannot(path, "write", exc) from None
    if stat.S_ISLNK(mode):
        raise InputError(
            f"{_shown(path)}: is a symbolic link; hadar does not write results through links "
            "(remove it)"
        )
    if not stat.S_ISDIR(mode):
        raise InputError(f"{_shown(path)}: is {non_regular_kind(mode) or 'a file'}, not a folder")


def check_replaceable(folder: str | Path, names: Iterable[str]) -> None:
    """One-line :class:`InputError` unless every ``folder/NAME`` can take a new file: missing, a
    regular file or a link (replaced itself, never followed) to one, and the subfolder it is in
    (``NAME`` may be ``sub/file``) missing or a real folder. Creates nothing."""
    base = Path(folder)
    for name in names:
        rel = Path(name)
        for sub in reversed(rel.parents[:-1]):
            _check_subfolder(base / sub)
        check_writable(base / rel)


@contextlib.contextmanager
def replaced_together(
    folder: str | Path, names: Iterable[str], *, nofollow: bool = False
) -> Iterator[Path]:
    """Write the files of one save into ``folder`` (created if missing) so that they replace the
    previous ones all together or not at all.

    ``names`` (``file`` or ``sub/file``) are checked first (:func:`check_replaceable`). The block
    gets a new staging folder inside ``folder`` and writes the files there, at the same relative
    names (with this module's writers). When it ends normally, the files written there are
    checked again, each previous file is kept aside (a refusal here, such as an immutable file,
    replaces nothing), and each new file is renamed over its namesake (a link there is replaced,
    never followed); a rename that fails part-way puts the previous files back. When the block
    raises, nothing in ``folder`` changes. The staging folder is removed either way. An OSError
    of a write or a rename is a one-line :class:`InputError` naming the file
    (``out/rounds.csv: cannot write: No space left on device``).

    ``nofollow=True`` (a run directory, ``folder`` its real path): the folder must exist and is
    opened from ``/`` without following a link at any component (module docstring); write the
    staged files with ``nofollow=True`` too."""
    base = Path(folder)
    check_replaceable(base, names)
    stage = f"{STAGING_PREFIX}{os.getpid()}-{secrets.token_hex(4)}"
    try:
        if nofollow:
            real = base
            with real_folder(base) as opened:
                fd = os.dup(opened)
        else:
            base.mkdir(parents=True, exist_ok=True)
            real = Path(os.path.realpath(base))
            fd = os.open(base, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise _cannot(base, "write", exc) from None
    try:
        try:
            os.mkdir(stage, 0o700, dir_fd=fd)
        except OSError as exc:
            raise _cannot(base, "write", exc) from None
        yield base / stage
        with _signals_held():
            _commit(base, fd, stage)
    finally:
        os.close(fd)
        with contextlib.suppress(OSError, InputError):
            remove_tree(real / stage)


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """Ctrl-C and the stop signals wait until the block is done (renames: microseconds), so a
    save is not stopped half renamed."""
    held = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
    before = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


@dataclass(frozen=True)
class _Move:
    """A staged file and where it goes: its folders' descriptors and its name in both."""

    src: int
    dst: int
    name: str
    path: Path
    """The destination, for messages."""


def _commit(base: Path, fd: int, stage: str) -> None:
    """Rename every file of the staging folder ``stage`` over its namesake in ``base`` (``fd``)."""
    with contextlib.ExitStack() as fds:
        sfd = os.open(stage, _DIR_NOFOLLOW, dir_fd=fd)
        fds.callback(os.close, sfd)
        names = _listed(sfd)
        check_replaceable(base, names)  # again: the folder may have changed while the block ran
        moves = _moves(base, fd, sfd, names, fds)
        kept = _keep_previous(base, moves, sfd)
        for i, m in enumerate(moves):
            try:
                os.replace(m.name, m.name, src_dir_fd=m.src, dst_dir_fd=m.dst)
            except OSError as exc:
                stuck = _put_back(moves, kept, sfd, replaced=i)
                raise _cannot(m.path, "replace", exc, _outcome(base, stuck)) from None


def _listed(fd: int, prefix: str = "") -> list[str]:
    """The files in the folder ``fd`` and its subfolders, by relative name, sorted."""
    names: list[str] = []
    for entry in sorted(os.scandir(fd), key=lambda e: e.name):
        if entry.is_dir(follow_symlinks=False):
            sub = os.open(entry.name, _DIR_NOFOLLOW, dir_fd=fd)
            try:
                names += _listed(sub, f"{prefix}{entry.name}/")
            finally:
                os.close(sub)
        else:
            names.append(prefix + entry.name)
    return names


def _open_folder(fd: int, rel: Path, fds: contextlib.ExitStack, create: bool) -> int:
    """The folder ``rel`` under ``fd``, opened one component at a time without following a link
    (created when missing and ``create``); closed with ``fds``."""
    for part in rel.parts:
        if create:
            with contextlib.suppress(FileExistsError):
                os.mkdir(part, 0o777, dir_fd=fd)
        fd = os.open(part, _DIR_NOFOLLOW, dir_fd=fd)
        fds.callback(os.close, fd)
    return fd


def _moves(
    base: Path, fd: int, sfd: int, names: Sequence[str], fds: contextlib.ExitStack
) -> list[_Move]:
    """Where each staged file (``names``, in ``sfd``) goes in ``base`` (``fd``)."""
    folders: dict[Path, tuple[int, int]] = {}
    moves = []
    for name in names:
        rel = Path(name)
        if rel.parent not in folders:
            try:
                folders[rel.parent] = (
                    _open_folder(sfd, rel.parent, fds, create=False),
                    _open_folder(fd, rel.parent, fds, create=True),
                )
            except OSError as exc:
                raise _cannot(base / rel.parent, "write", exc) from None
        src, dst = folders[rel.parent]
        moves.append(_Move(src, dst, rel.name, base / rel))
    return moves


def _previous(i: int) -> str:
    return f"{STAGING_PREFIX}previous-{i}"


def _keep(m: _Move, sfd: int, i: int) -> _Kept:
    """Keep ``m``'s previous file in the staging folder: a hard link, else moved there."""
    try:
        mode = os.lstat(m.name, dir_fd=m.dst).st_mode
    except FileNotFoundError:
        return "absent"
    if stat.S_ISDIR(mode):  # planted since the check: never moved aside, never removed
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR))
    try:
        os.link(m.name, _previous(i), src_dir_fd=m.dst, dst_dir_fd=sfd, follow_symlinks=False)
        return "linked"
    except OSError:
        os.rename(m.name, _previous(i), src_dir_fd=m.dst, dst_dir_fd=sfd)
        return "moved"


def _keep_previous(base: Path, moves: Sequence[_Move], sfd: int) -> list[_Kept]:
    """Each destination's previous file kept (:func:`_keep`); the first that can be neither
    linked nor moved (an immutable file) is refused, and what was moved is put back."""
    kept: list[_Kept] = []
    for i, m in enumerate(moves):
        try:
            kept.append(_keep(m, sfd, i))
        except OSError as exc:
            stuck = _put_back(moves, kept, sfd, replaced=0)
            raise _cannot(m.path, "replace", exc, _outcome(base, stuck)) from None
    return kept


def _put_back(moves: Sequence[_Move], kept: Sequence[_Kept], sfd: int, replaced: int) -> list[Path]:
    """Undo: the first ``replaced`` destinations get their previous file back (or are removed
    where there was none), the others moved aside return; the destinations that could not be
    undone."""
    stuck = []
    for i, (m, how) in enumerate(zip(moves, kept, strict=False)):
        try:
            if i < replaced and how == "absent":
                os.unlink(m.name, dir_fd=m.dst)
            elif i < replaced or how == "moved":
                os.replace(_previous(i), m.name, src_dir_fd=sfd, dst_dir_fd=m.dst)
        except OSError:
            stuck.append(m.path)
    return stuck


def _outcome(base: Path, stuck: Sequence[Path]) -> str:
    """What a failed commit left: nothing replaced, or which files could not be put back."""
    if not stuck:
        return "; nothing was replaced"
    shown = ", ".join(str(p.relative_to(base)) for p in stuck)
    return (
        f"; {shown} could not be put back as it was, so {_shown(base)}/ mixes this save's "
        "files with the previous ones"
    )


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
