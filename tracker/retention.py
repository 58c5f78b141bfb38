"""The checkpoint files the tracker owns: which ones it keeps (the retention window), removing
the others and a crash's leftovers, and setting damaged ones aside (quarantine)."""

from __future__ import annotations

import contextlib
from collections.abc import Collection
from pathlib import Path

from hadar.core.io import fsync_dir
from hadar.core.safe_paths import PathEscapeError, prune_files, rename_in
from tracker.base import OWNED_NAME_RE, TrackerBase
from tracker.checkpoints import TMP_PREFIX
from tracker.records import Quarantine

"""Names of checkpoint files the tracker owns inside ``<checkpoint_dir>/job-<id>/``."""
QUARANTINE_DIR = "quarantine"
"""Damaged checkpoints are moved to ``<checkpoint_dir>/quarantine/job-<id>/``."""


class Retention(TrackerBase):
    """Keeping, pruning and quarantining the tracker's checkpoint files."""

    def _retained(self, job_ids: Collection[int] | None = None) -> set[str]:
        """Owned checkpoints to keep: every job's latest and the ``keep_checkpoints - 1`` newest
        older ones still on disk (all of them with ``keep_history``); the older ones only of
        ``job_ids`` when given (the jobs whose directories are pruned)."""
        keep = self._store.referenced_paths(self.keep_history, job_ids)
        if self.keep_history or self.keep_checkpoints < 2:
            return keep
        for job in self._store.jobs_by_id(job_ids).values():
            latest, latest_round = job["ckpt_path"], job["ckpt_round"]
            if latest is None:
                continue
            if latest_round is None:
                continue
            older: list[str] = []
            for h in self._store.checkpoint_history(int(job["job_id"])):
                if len(older) >= self.keep_checkpoints - 1:
                    break  # newest first: the rest is outside the window
                if (
                    h["path"] != latest
                    and (h["round"] is None or h["round"] < latest_round)
                    and self._abs(h["path"]).exists()
                ):
                    older.append(h["path"])
            keep |= set(older)
        return keep

    def _remove_orphans(self) -> None:
        """Delete temp files and unreferenced owned checkpoints under ``job-*/`` directories."""
        keep = self._retained()
        for job_dir in sorted(self.checkpoint_dir.glob("job-*")):

            def doomed(name: str, d: str = job_dir.name) -> bool:
                owned = OWNED_NAME_RE.match(name) is not None
                return name.startswith(TMP_PREFIX) or (owned and f"{d}/{name}" not in keep)

            # a planted link is never followed, at any component of the path (a run refuses a
            # directory holding one before it opens the tracker; here it is left alone)
            with contextlib.suppress(PathEscapeError):
                prune_files(job_dir, doomed)

    def _prune(self, job_ids: list[int]) -> None:
        """Delete the jobs' owned checkpoints that fell out of the retention window."""
        keep = self._retained(set(job_ids))
        for job_id in job_ids:
            d = f"job-{job_id}"

            def doomed(name: str, d: str = d) -> bool:
                return OWNED_NAME_RE.match(name) is not None and f"{d}/{name}" not in keep

            # a planted link is never followed, at any component of the path: refused
            prune_files(self.checkpoint_dir / d, doomed)

    def _quarantine(self, job_id: int, rel: str, reason: str) -> Quarantine:
        """Move an owned checkpoint aside to ``quarantine/`` (if it still exists)."""
        src = self._abs(rel)
        moved: Path | None = None
        if src.exists():
            qdir = self.checkpoint_dir / QUARANTINE_DIR / f"job-{job_id}"
            moved = qdir / src.name
            n = 1
            while moved.exists():
                moved = qdir / f"{src.name}.{n}"
                n += 1
            rename_in(src, moved, create=True)  # never through a link planted on the way
            fsync_dir(src.parent)
        return Quarantine(job_id, src, moved, reason)
