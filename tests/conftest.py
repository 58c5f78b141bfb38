"""Suite-wide: tests marked ``gpu`` need a CUDA GPU and are skipped without one (torch is only
imported when such a test is about to run)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# pytest puts this folder (tests/) first on sys.path, where tests/baselines/ would shadow the
# product package ``baselines`` and the policy registry would scan the test modules instead of
# the policies: import the product package once with tests/ out of the way.
_tests_dir = str(Path(__file__).resolve().parent)
_saved_path = list(sys.path)
sys.path[:] = [p for p in sys.path if str(Path(p or ".").resolve()) != _tests_dir]
import baselines  # noqa: E402, F401

sys.path[:] = _saved_path


def pytest_runtest_setup(item: pytest.Item) -> None:
    marker = item.get_closest_marker("gpu")
    if marker is None:
        return
    import torch

    need = int(marker.kwargs.get("count", 1))
    have = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if have < need:
        pytest.skip(f"needs {need} CUDA GPU{'s' if need > 1 else ''}, this machine has {have}")
