"""The copies of a real run's closed round, from the journal (plans, timings) and the Job
Tracker (what was counted): what :mod:`hadar.runtime.run_state` books and reports show."""

from __future__ import annotations

from typing import Any

from hadar.runtime.journal import RoundRow
from tracker.tracker import JobTracker


def copy_records(row: RoundRow, tracker: JobTracker) -> list[dict[str, Any]]:
    """The copies of a closed round with their outcome: from the journal's timings, or (for a
    round recovered after a crash before the journal recorded them) from the tracker's reports."""
    if row.timings.get("copies") is not None:
        return list(row.timings["copies"])
    reports = {rep.copy_id: rep for rep in tracker.reports(row.round)}
    out = []
    for a in row.plan:
        rep = reports.get(a["tracker_copy"])
        out.append(
            {
                "job": a["job"],
                "copy": a["copy"],
                "node": a["node"],
                "placement": a["placement"],
                "kind": "ok" if rep else "lost",
                "steps": rep.steps if rep else 0,
                "train_s": rep.seconds if rep else 0.0,
                "wall_s": rep.seconds if rep else 0.0,
            }
        )
    return out
