"""Fixtures for the Job Tracker tests: a real tracker on real files in a temporary directory."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from tracker import JobTracker  # noqa: E402


class Env:
    """Paths of one tracker under test and a helper to (re)open it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.db = root / "state" / "tracker.sqlite"
        self.ckpt = root / "ckpt"
        self.reports = root / "reports"

    def open(self, **kw) -> JobTracker:
        kw.setdefault("max_job_count", 10)
        return JobTracker.open(self.db, self.ckpt, **kw)


@pytest.fixture
def env(tmp_path: Path) -> Env:
    return Env(tmp_path)


@pytest.fixture
def tracker(env: Env) -> Iterator[JobTracker]:
    t = env.open()
    yield t
    t.close()


@pytest.fixture
def single_thread() -> Iterator[None]:
    """Run torch ops on one thread (faster and deterministic on a shared 2-core machine)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
