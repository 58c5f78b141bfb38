"""Suite-wide: tests marked ``gpu`` need a CUDA GPU and are skipped without one (torch is only
imported when such a test is about to run); the suite runs from the repository root."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def pytest_configure(config: pytest.Config) -> None:
    """Refuse to run from inside ``tests/``: the folders there mirror the packages
    (``tests/hadar``, ``tests/nodes``, ...), and a ``python -c``/``-m`` subprocess a test starts
    puts its working directory first on its path, where they would stand in for the product."""
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
