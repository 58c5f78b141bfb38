"""The rounds' step reports: opening a round, accepting (or refusing) the copies' reports,
withdrawing one."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from hadar.core.integrity import SHA256_RE
from tracker.averaging import signature, signature_difference
from tracker.checkpoints import load_checkpoint
from tracker.crashpoints import crash_point
from tracker.errors import (
    CopyDiscardedError,
    DuplicateReportError,
    InvalidReportError,
    ParameterMismatchError,
    ReportRejected,
    RoundError,
    StaleRoundError,
    UnknownCopyError,
)
from tracker.records import Report, ReportItem, as_id, as_int
from tracker.summaries import Summaries


class Reports(Summaries):
    """Opening rounds and recording the copies' work in them."""

    def open_round(self, round_: int) -> None:
        """Open round ``round_``; a no-op if it is already the open round.

        Raises RoundError if another round is open or ``round_`` is not after every earlier one.
        """
        with self._mutex:
            r = as_int(round_, "round", RoundError)
            if r < 0:
                raise RoundError(f"round {r}: round numbers are non-negative")
            current = self._store.open_round()
            if current == r:
                return
            if current is not None:
                raise RoundError(
                    f"round {current} is still open; close it before opening round {r}"
                )
            last = self._store.last_round()
            if last is not None and r <= last:
                raise RoundError(f"round {r} is not after the last round {last}")
            with self._store.transaction():
                self._store.insert_round(r)

    def report(
        self,
        round_: int,
        copy_id: int,
        node: str,
        steps_done: int,
        seconds: float,
        checkpoint_path: str | os.PathLike[str],
        sha256: str,
    ) -> Report:
        """Record a copy's work in the open round. Rejections raise a ReportRejected subclass
        and change nothing (no row, no file)."""
        (out,) = self.report_many(
            round_, [(copy_id, node, steps_done, seconds, checkpoint_path, sha256)]
        )
        if isinstance(out, ReportRejected):
            raise out
        return out

    def report_many(
        self, round_: int, items: Sequence[ReportItem]
    ) -> list[Report | ReportRejected]:
        """Record the work of several copies in the open round, each ``(copy_id, node,
        steps_done, seconds, checkpoint_path, sha256)``, as :meth:`report` would one after the
        other, in one transaction and a few statements. Each item's outcome: its Report, or
        the ReportRejected that changed nothing for it."""
        with self._mutex:
            current = self._store.open_round()
            cids = [c for c in (as_id(item[0]) for item in items) if c is not None]
            copies = self._store.copies_by_id(cids)
            jobs: dict[int, Any] = dict(
                self._store.jobs_by_id({int(c["job_id"]) for c in copies.values()})
            )
            reported = (
                {int(x["copy_id"]) for x in self._store.reports(current)}
                if current is not None
                else set()
            )
            out: list[Report | ReportRejected] = []
            rows: list[tuple[Any, ...]] = []
            signatures: dict[int, tuple[str, str | None, str | None]] = {}
            for item in items:
                try:
                    rep, new_sig = self._check_report(round_, item, current, copies, jobs, reported)
                except ReportRejected as exc:
                    out.append(exc)
                    continue
                out.append(rep)
                reported.add(rep.copy_id)
                rows.append(
                    (
                        rep.round,
                        rep.copy_id,
                        rep.node,
                        rep.steps,
                        rep.seconds,
                        str(rep.checkpoint),
                        rep.sha256,
                    )
                )
                if new_sig is not None:  # the job's first report fixes its model for the next
                    signatures[rep.job_id] = new_sig
                    jobs[rep.job_id] = {
                        **dict(jobs[rep.job_id]),
                        "signature": new_sig[0],
                        "model": new_sig[1],
                        "size": new_sig[2],
                    }
            if rows:
                with self._store.transaction():
                    self._store.insert_reports(rows)
                    for job_id, sig in signatures.items():
                        self._store.set_job_model(job_id, *sig)
                    for _ in rows:
                        crash_point("report:in_tx")
            return out

    def _check_report(
        self,
        round_: int,
        item: ReportItem,
        current: int | None,
        copies: Mapping[int, Any],
        jobs: Mapping[int, Any],
        reported: set[int],
    ) -> tuple[Report, tuple[str, str | None, str | None] | None]:
        """One report checked against the open round, its copy and its job (rows read
        beforehand); ReportRejected if it is refused."""
        copy_id, node, steps_done, seconds, checkpoint_path, sha256 = item
        what = f"round {round_} copy {copy_id}"
        steps = as_int(steps_done, f"{what}: steps_done", InvalidReportError)
        if steps < 0:
            raise InvalidReportError(f"{what}: steps_done is negative ({steps})")
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
            raise InvalidReportError(f"{what}: seconds must be a number, got {seconds!r}")
        if not math.isfinite(seconds) or seconds < 0:
            raise InvalidReportError(f"{what}: seconds must be finite and >= 0, got {seconds}")
        if not isinstance(node, str) or not node.strip():
            raise InvalidReportError(f"{what}: node must be a non-empty string")
        sha = str(sha256).lower()
        if not SHA256_RE.match(sha):
            raise InvalidReportError(f"{what}: {sha256!r} is not a sha256 hex digest")
        r = as_int(round_, f"{what}: round", StaleRoundError)
        if r != current:
            state = self._store.round_state(r)
            now = "no round is open" if current is None else f"round {current} is open"
            raise StaleRoundError(f"{what}: round {r} is {state or 'not opened'}; {now}")
        cid = as_int(copy_id, f"{what}: copy_id", UnknownCopyError)
        copy = copies.get(cid)
        if copy is None:
            raise UnknownCopyError(f"{what}: copy {cid} is not registered")
        job = jobs[int(copy["job_id"])]
        if job["completed"] or copy["discarded"]:
            reason = "is complete" if job["completed"] else "had this copy discarded"
            raise CopyDiscardedError(f"{what}: job {job['job_id']} {reason}")
        if cid in reported:
            raise DuplicateReportError(f"{what}: this copy already reported for round {r}")
        path = Path(checkpoint_path).resolve()
        payload = load_checkpoint(path, sha, what)
        new_sig = self._check_model(job, payload, what)
        del payload
        return Report(r, cid, int(job["job_id"]), node, steps, float(seconds), path, sha), new_sig

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Make the tracker's changes inside the block one transaction (e.g. every report of a
        round: one commit instead of one per report). A call that raises inside it changes
        nothing, as alone; a crash before the block ends loses all of them."""
        with self._mutex, self._store.transaction():
            yield

    def withdraw_report(self, round_: int, copy_id: int) -> None:
        """Remove a copy's accepted report from the open round (e.g. its checkpoint file was
        lost before the round closed); the copy's work in that round is then not counted."""
        with self._mutex:
            r = as_int(round_, "round", RoundError)
            if self._store.open_round() != r:
                raise RoundError(f"round {r} is not the open round")
            cid = as_int(copy_id, "copy_id", UnknownCopyError)
            if not self._store.has_report(r, cid):
                raise UnknownCopyError(f"round {r} copy {cid}: no report to withdraw")
            with self._store.transaction():
                self._store.delete_report(r, cid)

    @staticmethod
    def _check_model(
        job: Any, payload: Mapping[str, Any], what: str
    ) -> tuple[str, str | None, str | None] | None:
        """Raise ParameterMismatchError if the payload is not the job's model; return the
        (signature, model, size) to store when this report fixes the job's signature."""
        for name in ("model", "size"):
            if (
                job[name] is not None
                and payload.get(name) is not None
                and job[name] != payload[name]
            ):
                raise ParameterMismatchError(
                    f"{what}: checkpoint is {name} {payload[name]!r}, job {job['job_id']} is {job[name]!r}"
                )
        sig = signature(payload["state_dict"])
        if job["signature"] is None:
            return (
                json.dumps(sig),
                job["model"] or payload.get("model"),
                job["size"] or payload.get("size"),
            )
        diff = signature_difference(json.loads(job["signature"]), sig)
        if diff:
            raise ParameterMismatchError(f"{what}: {diff} in job {job['job_id']}'s model")
        return None
