"""The HadarE Job Tracker: registers forked copies, sums their steps per job and consolidates
their parameters by (step-weighted) averaging, with crash-safe state in SQLite.

See docs/tracker.md.
"""

from tracker.tracker import (
    CheckpointRef,
    JobRoundResult,
    JobState,
    JobTracker,
    Report,
    RoundSummary,
)

__all__ = ["CheckpointRef", "JobRoundResult", "JobState", "JobTracker", "Report", "RoundSummary"]
