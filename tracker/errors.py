"""Errors raised by the Job Tracker. Every message is one line naming the job, copy, round or file.

``ReportRejected`` groups the reasons a single copy's report is refused; the round loop catches it
to drop only that copy's round (the job continues from its last consolidated parameters).
"""

from __future__ import annotations

from hadar.core.errors import HadarError, InputError


class TrackerError(HadarError):
    """Base class of every Job Tracker error."""


class TrackerConfigError(TrackerError, InputError):
    """The tracker was opened with settings that contradict its database, or bad settings."""


class TrackerBusyError(TrackerError):
    """Another process holds the tracker's database open (a second ``hadar run --resume`` of
    one run, or a second run on one ``--out``): exit code 6."""

    exit_code = 6


class IdError(TrackerError, InputError):
    """A job id, copy index or max_job_count outside its valid range."""


class UnknownJobError(TrackerError):
    """A job id that was never registered."""


class RegistrationError(TrackerError):
    """A job or copy registration that conflicts with what is stored."""


class RoundError(TrackerError):
    """Rounds opened or closed out of order."""


class StateDictMismatchError(TrackerError):
    """State dicts whose keys, shapes or dtypes differ (raised by the pure averaging code)."""


class AveragingError(TrackerError):
    """Averaging asked of an invalid input (no copies, negative steps, unknown mode)."""


class ReportRejected(TrackerError):
    """A copy's report was refused; the database and files are unchanged."""


class UnknownCopyError(ReportRejected):
    """The copy id was never registered."""


class CopyDiscardedError(ReportRejected):
    """The copy belongs to a completed job or was discarded."""


class StaleRoundError(ReportRejected):
    """The report names a round that is not the open one (closed, never opened, or future)."""


class DuplicateReportError(ReportRejected):
    """The copy already reported for this round."""


class InvalidReportError(ReportRejected):
    """Negative or non-numeric steps or seconds, or an empty node name."""


class CheckpointError(ReportRejected):
    """A checkpoint file is missing, unreadable, not in hadar-ckpt-1 format, or fails its sha256."""


class ParameterMismatchError(ReportRejected):
    """The reported parameters' keys, shapes, dtypes, model or size differ from the job's model."""
