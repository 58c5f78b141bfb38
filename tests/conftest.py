"""Suite-wide: tests marked ``gpu`` need a CUDA GPU and are skipped without one (torch is only
imported when such a test is about to run); the suite runs from the repository root."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fixtures.processes import end_processes_under

if os.environ.get("PYTEST_XDIST_WORKER"):
    # pytest-xdist hands its workers the controller's terminal width as COLUMNS (80 here);
    # the product lays tables out in $COLUMNS when writing to a pipe, so a test would see a
    # narrower table than a user's pipe or file does (tests that check a width set their own)
    for _name in ("COLUMNS", "LINES"):
        os.environ.pop(_name, None)


ROOT = Path(__file__).resolve().parents[1]


def pytest_configure(config: pytest.Config) -> None:
    """Refuse to run from inside ``tests/``: the folders there mirror the packages
    (``tests/hadar``, ``tests/nodes``, ...), and a ``python -c``/``-m`` subprocess a test starts
    puts its working directory first on its path, where they would stand in for the product.

    A suite started in the background by a non-interactive shell (``scripts/test &``) inherits
    SIGINT ignored, and one started under ``nohup`` SIGHUP ignored, and so would every run a test
    starts (``hadar run`` keeps an ignored stop signal ignored, as ``nohup`` users expect): a
    test's Ctrl-C or SIGHUP would never reach it. Both get their defaults back here, which the
    processes the tests start inherit; the tests of the ignored case ignore the signal themselves."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if signal.getsignal(signal.SIGHUP) is signal.SIG_IGN:
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
    cwd = Path.cwd().resolve()
    if ROOT / "tests" in (cwd, *cwd.parents):
        raise pytest.UsageError(f"run the tests from the repository root ({ROOT}), not from {cwd}")


def pytest_runtest_setup(item: pytest.Item) -> None:
    marker = item.get_closest_marker("gpu")
    if marker is None:
        return
    import torch

    need = int(marker.kwargs.get("count", 1))
    have = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if have < need:
        pytest.skip(f"needs {need} CUDA GPU{'s' if need > 1 else ''}, this machine has {have}")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Iterator[None]:
    """After a test and its fixtures: end every process still working in its ``tmp_path`` or
    naming it (a ``--detach``ed run, warm node servers, workers a killed command left), so a
    failed or timed-out test leaves nothing running."""
    yield
    tmp = getattr(item, "funcargs", {}).get("tmp_path")
    if isinstance(tmp, Path):
        end_processes_under(tmp)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """The same for the folders of module- and session-wide fixtures (this process's
    temporary root: each xdist worker has its own)."""
    factory = getattr(session.config, "_tmp_path_factory", None)
    if factory is not None:
        with contextlib.suppress(OSError, ValueError):
            end_processes_under(factory.getbasetemp())
