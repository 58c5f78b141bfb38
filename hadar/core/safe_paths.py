"""Names that become parts of file paths, and paths built from them, kept inside their root.

Node names, cluster names and run ids end up as directory names (``RUNDIR/nodes/<run>/<node>``,
``~/.hadar/runs/<run>/<node>`` on an SSH host). They are restricted to a safe character set
where the file that names them is loaded (:func:`check_safe_name`), and every path built from
them is resolved and checked to stay under its root where it is built (:func:`confined`), so a
name like ``../../x``, an absolute path or a planted symlink cannot move a run's files elsewhere.

A run never creates a symbolic link in its directory, so one found there was planted: a run (new
or resumed) refuses such a directory (:func:`refuse_links`), and code that deletes files inside
it lists only real files of real folders (:func:`regular_files`).

A link planted while a run is going (a folder swapped for one between rounds) is refused where
the run writes, prunes or deletes: the run resolves its directory once, and those operations open
that real path one component at a time from ``/`` without following a link
(:func:`real_folder`, openat-style), then work inside the folder's descriptor
(:func:`prune_files`, :func:`remove_tree`, :func:`rename_in`; :mod:`hadar.core.io` with
``nofollow=True``), so no component can be swapped between a check and the use.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

from hadar.core.errors import InputError, shorten

SAFE_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$")
SAFE_NAME_RULE = "use 1-63 letters, digits, '.', '_' or '-', starting with a letter or digit"
"""Names become file, directory and tag names; 63 is a DNS label's and an AWS tag key's safe length."""


class PathEscapeError(InputError):
    """A path built from input resolves outside the directory it must stay in."""


def is_safe_name(value: object) -> bool:
    """Whether ``value`` may be used as one path component."""
    return isinstance(value, str) and bool(SAFE_NAME_RE.match(value))


def check_safe_name(value: str) -> str:
    """``value`` if it is a safe path component, else ``ValueError`` (for pydantic validators)."""
    if not is_safe_name(value):
        raise ValueError(f"{shorten(value)!r} is not a safe name ({SAFE_NAME_RULE})")
    return value


def confined(root: Path, *parts: str, what: str) -> Path:
    """``root/parts...`` resolved (symlinks followed); :class:`PathEscapeError` naming ``what``
    if that lands outside ``root`` (itself resolved)."""
    base = root.resolve()
    path = base.joinpath(*parts).resolve()
    if not path.is_relative_to(base):
        shown = "/".join(parts)
        raise PathEscapeError(f"{what}: {shown!r} resolves to {path}, outside {base}")
    return path


def refuse_links(root: Path, what: str) -> None:
    """One-line :class:`PathEscapeError` naming the first symbolic link found below ``root``
    (walked without following links; ``root`` itself may be one). Nothing if ``root`` is missing."""
    for dirpath, dirnames, filenames in os.walk(root):
        for name in sorted(dirnames + filenames):
            path = Path(dirpath, name)
            if path.is_symlink():
                raise PathEscapeError(
                    f"{path}: a symbolic link in {what} {root}, which hadar never creates; "
                    "remove it (hadar does not write or delete through links)"
                )


def regular_files(folder: Path) -> Iterator[Path]:
    """The regular files directly in ``folder``, not following links: nothing when ``folder``
    is missing, a link or no folder; links and other non-regular entries are skipped."""
    try:
        if not stat.S_ISDIR(os.lstat(folder).st_mode):
            return
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError:
        return
    for entry in entries:
        if entry.is_file(follow_symlinks=False):
            yield Path(entry.path)


_PATH_FLAG: int = getattr(os, "O_PATH", os.O_RDONLY)
"""Intermediate folders are opened for lookups only where the system allows (Linux ``O_PATH``)."""
_NOFOLLOW_DIR = os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _planted(path: Path) -> PathEscapeError:
    return PathEscapeError(
        f"{path}: a symbolic link (or no folder) where the run keeps a folder, planted while it "
        "ran; hadar does not write or delete through links (remove it, then resume)"
    )


def _open_component(name: str, parent: int, path: Path, create: bool, lookup: bool) -> int:
    """Open folder ``name`` in the folder ``parent`` without following a link (created when
    missing and ``create``); for lookups only (``lookup``: a folder on the way, which then needs
    search permission alone) or to read; ``path`` names it in errors."""
    flags = (_PATH_FLAG if lookup else os.O_RDONLY) | _NOFOLLOW_DIR
    for attempt in (0, 1):
        try:
            return os.open(name, flags, dir_fd=parent)
        except FileNotFoundError:
            if not create or attempt:
                raise
            with contextlib.suppress(FileExistsError):
                os.mkdir(name, 0o777, dir_fd=parent)
        except OSError as exc:
            if isinstance(exc, NotADirectoryError) or exc.errno == errno.ELOOP:
                raise _planted(path) from None
            raise
    raise AssertionError("unreachable")  # pragma: no cover


@contextlib.contextmanager
def real_folder(path: Path, *, create: bool = False) -> Iterator[int]:
    """A read-only descriptor of the folder ``path``, which must be absolute and its own real
    path (resolved once, when the run started): opened one component at a time from ``/``
    without following a link, created with its missing parents when ``create``.

    :class:`PathEscapeError` naming the first component that is now a link (or no folder);
    ``FileNotFoundError`` when it is missing and not ``create``."""
    if not path.is_absolute():
        raise ValueError(f"{path}: real_folder needs an absolute path")
    with _walk("/", Path("/"), path.parts[1:], create) as fd:
        yield fd


@contextlib.contextmanager
def real_subfolder(path: Path, *, create: bool = False) -> Iterator[int]:
    """:func:`real_folder` for a relative ``path``, walked from the working directory (a
    worker's node folder): a read-only descriptor of it, opened one component at a time without
    following a link, created with its missing parents when ``create``. ``..`` and ``.`` are
    refused like a link."""
    if path.is_absolute():
        raise ValueError(f"{path}: real_subfolder needs a relative path")
    with _walk(".", Path(), path.parts, create) as fd:
        yield fd


@contextlib.contextmanager
def _walk(start: str, base: Path, names: tuple[str, ...], create: bool) -> Iterator[int]:
    """The folder ``names`` below ``start`` (``base`` names it in errors), walked as
    :func:`real_folder` walks it."""
    fd = os.open(start, (_PATH_FLAG if names else os.O_RDONLY) | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        walked = base
        for i, name in enumerate(names):
            walked = walked / name
            if name in (".", ".."):
                raise _planted(walked)
            child = _open_component(name, fd, walked, create, lookup=i < len(names) - 1)
            os.close(fd)
            fd = child
        yield fd
    finally:
        os.close(fd)


def prune_files(folder: Path, doomed: Callable[[str], bool]) -> list[str]:
    """Delete the regular files directly in the real folder ``folder`` whose names ``doomed``
    accepts (links and other entries are never followed or deleted); their names. Nothing
    when ``folder`` is missing; :class:`PathEscapeError` when a component of it is a link."""
    removed: list[str] = []
    try:
        with real_folder(folder) as fd:
            for entry in sorted(os.scandir(fd), key=lambda e: e.name):
                if entry.is_file(follow_symlinks=False) and doomed(entry.name):
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(entry.name, dir_fd=fd)
                        removed.append(entry.name)
    except FileNotFoundError:
        pass
    return removed


def _clear(fd: int) -> None:
    """Delete everything inside the folder ``fd``, never following a link (a link is removed
    itself)."""
    for entry in list(os.scandir(fd)):
        if entry.is_dir(follow_symlinks=False):
            child = os.open(entry.name, os.O_RDONLY | _NOFOLLOW_DIR, dir_fd=fd)
            try:
                _clear(child)
            finally:
                os.close(child)
            os.rmdir(entry.name, dir_fd=fd)
        else:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(entry.name, dir_fd=fd)


def remove_tree(path: Path, *, only_empty: bool = False) -> None:
    """Delete the real folder ``path`` and what it holds (only its empty folders when
    ``only_empty``: a file anywhere keeps it and the folders above it), never following a link:
    a link inside is removed itself, a component of ``path`` that is a link is a
    :class:`PathEscapeError`. Nothing when it is missing."""
    try:
        with real_folder(path.parent) as parent:
            fd = os.open(path.name, os.O_RDONLY | _NOFOLLOW_DIR, dir_fd=parent)
            try:
                if only_empty:
                    _clear_empty(fd)
                else:
                    _clear(fd)
            finally:
                os.close(fd)
            with contextlib.suppress(OSError) if only_empty else contextlib.nullcontext():
                os.rmdir(path.name, dir_fd=parent)
    except FileNotFoundError:
        return
    except NotADirectoryError:
        raise _planted(path) from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _planted(path) from None
        raise


def _clear_empty(fd: int) -> None:
    """Delete the empty folders inside the folder ``fd`` (depth first), not following links."""
    for entry in list(os.scandir(fd)):
        if entry.is_dir(follow_symlinks=False):
            child = os.open(entry.name, os.O_RDONLY | _NOFOLLOW_DIR, dir_fd=fd)
            try:
                _clear_empty(child)
            finally:
                os.close(child)
            with contextlib.suppress(OSError):
                os.rmdir(entry.name, dir_fd=fd)


def rename_in(src: Path, dst: Path, *, create: bool = False) -> None:
    """Move ``src`` to ``dst`` (both under real folders, no component a link; ``dst``'s folder
    created when ``create``), replacing ``dst``."""
    with real_folder(src.parent) as a, real_folder(dst.parent, create=create) as b:
        os.replace(src.name, dst.name, src_dir_fd=a, dst_dir_fd=b)
