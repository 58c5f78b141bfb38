"""Registering jobs (their step targets and initial checkpoints) and their copies."""

from __future__ import annotations

import json
import os
from pathlib import Path

from hadar.core.integrity import SHA256_RE, sha256_file
from tracker import ids
from tracker.averaging import signature
from tracker.checkpoints import copy_atomic, load_checkpoint
from tracker.crashpoints import crash_point
from tracker.errors import ParameterMismatchError, RegistrationError
from tracker.records import JobState, as_int
from tracker.summaries import Summaries


class Registration(Summaries):
    """Registering jobs and copies (idempotent)."""

    def register_job(
        self,
        job_id: int,
        target_steps: int,
        model: str | None = None,
        size: str | None = None,
        initial_checkpoint: str | os.PathLike[str] | None = None,
        initial_sha256: str | None = None,
    ) -> JobState:
        """Register a job with its step target; idempotent when repeated with the same values.

        ``initial_checkpoint`` (a hadar-ckpt-1 file, optionally checked against
        ``initial_sha256``) is copied into the checkpoint directory and fixes the job's parameter
        signature; copies must start round one from it. Otherwise the first report fixes it.
        """
        with self._mutex:
            job_id = ids.check_job_id(job_id, self.max_job_count)
            target = as_int(target_steps, f"job {job_id}: target_steps", RegistrationError)
            if target <= 0:
                raise RegistrationError(
                    f"job {job_id}: target_steps must be positive, got {target}"
                )
            for name, v in (("model", model), ("size", size)):
                if v is not None and not (isinstance(v, str) and v):
                    raise RegistrationError(f"job {job_id}: {name} must be a non-empty string")
            if initial_sha256 is not None and not SHA256_RE.match(str(initial_sha256).lower()):
                raise RegistrationError(f"job {job_id}: initial_sha256 is not a sha256 hex digest")
            what = f"job {job_id}"
            src = None if initial_checkpoint is None else Path(initial_checkpoint).resolve()
            sig_json = None
            sha = None if initial_sha256 is None else initial_sha256.lower()
            if src is not None:
                payload = load_checkpoint(src, sha, what)
                sha = sha or sha256_file(src)
                sig_json = json.dumps(signature(payload["state_dict"]))
                for name, given in (("model", model), ("size", size)):
                    stored = payload.get(name)
                    if given is not None and stored is not None and given != stored:
                        raise ParameterMismatchError(
                            f"{what}: initial checkpoint {src} is {name} {stored!r}, not {given!r}"
                        )
                model = model or payload.get("model")
                size = size or payload.get("size")
                del payload
            existing = self._store.job(job_id)
            if existing is not None:
                same = (
                    existing["target_steps"] == target
                    and model in (None, existing["model"])
                    and size in (None, existing["size"])
                    and (src is None or existing["initial_sha256"] == sha)
                )
                if not same:
                    raise RegistrationError(f"{what} is already registered with other settings")
                return self.job_state(job_id)
            rel = None
            if src is not None and sha is not None:
                final, _ = copy_atomic(
                    src,
                    sha,
                    self.checkpoint_dir / f"job-{job_id}",
                    lambda h: f"initial-{h}.pt",
                    "register",
                    what,
                )
                rel = f"job-{job_id}/{final.name}"
            with self._store.transaction():
                self._store.insert_job(job_id, target, model, size, sig_json, rel, sha)
                crash_point("register:in_tx")
            return self.job_state(job_id)

    def register_copies(self, job_id: int, n: int) -> list[int]:
        """Ensure the job has copies 1..n (creating the missing ones); return their ids."""
        with self._mutex:
            job = self._job_row(job_id)
            n = as_int(n, f"job {job_id}: number of copies", RegistrationError)
            if not 1 <= n < self.max_job_count:
                raise RegistrationError(
                    f"job {job_id}: number of copies {n} is outside [1, {self.max_job_count})"
                )
            if job["completed"]:
                raise RegistrationError(f"job {job_id} is complete; it takes no more copies")
            existing = {int(r["idx"]) for r in self._store.copies(job_id)}
            wanted = [(ids.copy_id(job_id, i, self.max_job_count), i) for i in range(1, n + 1)]
            missing = [(cid, i) for cid, i in wanted if i not in existing]
            if missing:
                with self._store.transaction():
                    self._store.insert_copies(job_id, missing)
            return [cid for cid, _ in wanted]
