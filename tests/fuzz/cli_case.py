"""Run one command line through ``hadar.cli.main`` in this process and check the input contract:
exit code 0, 2 or 3 (``hadar compare`` also 7: some policies' simulations stopped, the others are
reported); otherwise exactly one stderr line (``hadar: error: ...``) and no traceback; never
longer than a per-case time limit."""

from __future__ import annotations

import contextlib
import io
import signal
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from hypothesis import event, settings

from hadar.cli import main
from hadar.core.errors import PARTIAL_RESULT_EXIT_CODE

CASE_LIMIT_S = 60.0
"""One command may take this long (wall time) before the case counts as a hang; generous, since
CI machines are shared. Generated valid workloads finish in well under a second."""


def fuzz_settings() -> settings:
    """The ``long`` profile when pytest was given ``--hypothesis-profile=long``, else ``fuzz-ci``."""
    name = settings.get_current_profile_name()
    return settings.get_profile("long" if name == "long" else "fuzz-ci")


class CaseTimeout(BaseException):
    """Raised in the main thread when a case runs past :data:`CASE_LIMIT_S` (a hang)."""


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise :class:`CaseTimeout` after ``seconds``. An outer SIGALRM timer (pytest-timeout's
    signal method) is put back afterwards, less the time spent here."""

    def expire(signum, frame):  # noqa: ARG001 - signal handler signature
        raise CaseTimeout(f"command still running after {seconds:g} s")

    start = time.monotonic()
    old_handler = signal.signal(signal.SIGALRM, expire)
    old_delay, old_interval = signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old_handler)
        if old_delay > 0:
            signal.setitimer(
                signal.ITIMER_REAL, max(old_delay - (time.monotonic() - start), 0.001), old_interval
            )


@dataclass(frozen=True)
class Outcome:
    argv: tuple[str, ...]
    code: int
    stdout: str
    stderr: str


def run_cli(argv: Sequence[str], limit_s: float = CASE_LIMIT_S) -> Outcome:
    """Run ``hadar argv`` in-process (stdout and stderr captured) and assert the contract."""
    out, err = io.StringIO(), io.StringIO()
    with time_limit(limit_s), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    outcome = Outcome(tuple(argv), code, out.getvalue(), err.getvalue())
    check_contract(outcome)
    event(f"exit {code}")  # --hypothesis-show-statistics shows how often each exit code occurred
    return outcome


def check_contract(o: Outcome) -> None:
    shown = f"hadar {' '.join(repr(a) for a in o.argv)}\nexit {o.code}\nstderr:\n{o.stderr}"
    compare = o.argv[:1] == ("compare",)
    assert o.code in ((0, 2, 3, PARTIAL_RESULT_EXIT_CODE) if compare else (0, 2, 3)), shown
    assert "Traceback" not in o.stderr and "Traceback" not in o.stdout, shown
    if o.code:
        lines = [ln for ln in o.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1, shown
        assert lines[0].startswith("hadar: error: "), shown
