"""The steps of a verified file transfer that the providers share: a temporary name beside the
destination, the sha256 comparison with its one-line error, and the atomic local receive
(fetch to the temporary name, hash, rename over the destination, leave nothing on failure);
and :class:`FolderFiles`, the files and environment of providers whose nodes' working
directories are folders this machine sees (local, Slurm on a shared file system)."""

from __future__ import annotations

import contextlib
import os
import shutil
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path

from hadar.core.cluster import Node
from hadar.core.integrity import sha256_file
from hadar.core.safe_paths import confined, real_folder
from hadar.providers.base import ChecksumMismatchError, NodeProvider, NodeTransferError, confine

PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])
"""The directory holding the ``nodes`` package: added to PYTHONPATH so ``-m nodes.worker``
works from a node's working directory even without an installed package."""


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
    """``fetch`` a file into a temporary name beside ``dst``, check that its sha256 is ``want``
    (see :func:`require_sha256`), then rename it over ``dst``. On any failure the temporary
    file is removed and ``dst`` is untouched.

    An absolute ``dst`` (a run's own folders: the run directory's ``incoming/``, a local node's
    working directory) is received inside its folder's descriptor: the folder is opened one
    component at a time without following a link (created when missing;
    ``safe_paths.real_folder``) and the fetch writes through that descriptor
    (``/proc/self/fd/N/name``), so a folder swapped for a link meanwhile is never written
    through (:class:`~hadar.core.safe_paths.PathEscapeError` if one already is)."""
    if not dst.is_absolute():
        dst.parent.mkdir(parents=True, exist_ok=True)
        tmp = dst.with_name(part_name(dst.name))
        try:
            fetch(tmp)
            require_sha256(sha256_file(tmp), want, what, wanted_label)
            os.replace(tmp, dst)
        finally:
            tmp.unlink(missing_ok=True)
        return
    with real_folder(dst.parent, create=True) as fd:
        name = part_name(dst.name)
        try:
            fetch(Path(f"/proc/self/fd/{fd}") / name)
            require_sha256(
                sha256_file(Path(f"/proc/self/fd/{fd}") / name), want, what, wanted_label
            )
            os.replace(name, dst.name, src_dir_fd=fd, dst_dir_fd=fd)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name, dir_fd=fd)


def copy_verified(src: Path, dst: Path, node: str, expected: str | None = None) -> str:
    """Copy ``src`` to ``dst`` atomically (temp file + rename), hashing both ends."""
    want = sha256_file(src)
    if expected is not None:
        require_sha256(want, expected, f"node {node}: {src}", "expected")
    receive_verified(
        dst, lambda tmp: shutil.copyfile(src, tmp), want, f"node {node}: copy of {src}", "source"
    )
    return want


class FolderFiles(NodeProvider):
    """Files and environment of nodes whose working directories this machine sees as folders
    (``workdir``): files move by verified copies, paths are confined to the working directory,
    commands get the ``nodes`` package on PYTHONPATH."""

    _python: list[str]

    def base_env(self) -> Mapping[str, str]:
        """The environment commands start from (this process's)."""
        return os.environ

    def _workdir(self, node: Node | str) -> Path:
        wd = Path(self.workdir(node))
        wd.mkdir(parents=True, exist_ok=True)
        return wd

    def _file(self, node: Node, rel: str) -> Path:
        """``rel`` inside the node's working directory, refused if it (or a symlink on the way)
        leads outside it."""
        return confined(
            self._workdir(node), confine(node.name, rel), what=f"node {node.name}: file"
        )

    def python(self, node: Node | str) -> list[str]:
        self.node(node)
        return list(self._python)

    def _env(self, extra: Mapping[str, str] | None) -> dict[str, str]:
        env = dict(self.base_env())
        paths = [PACKAGE_ROOT] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
        env.update(extra or {})
        return env

    def put(self, node: Node | str, local_path: str | Path, remote_rel_path: str) -> str:
        n = self.node(node)
        return copy_verified(Path(local_path), self._file(n, remote_rel_path), n.name)

    def get(
        self,
        node: Node | str,
        remote_rel_path: str,
        local_path: str | Path,
        expected_sha256: str | None = None,
    ) -> str:
        n = self.node(node)
        src = self._file(n, remote_rel_path)
        if not src.is_file():
            raise NodeTransferError(
                f"node {n.name}: no file {remote_rel_path} in {self.workdir(n)}"
            )
        return copy_verified(src, Path(local_path), n.name, expected_sha256)

    def sha256(self, node: Node | str, remote_rel_path: str) -> str:
        n = self.node(node)
        return sha256_file(self._file(n, remote_rel_path))
