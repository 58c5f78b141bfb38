"""Suite-wide: tests marked ``gpu`` need a CUDA GPU and are skipped without one (torch is only
imported when such a test is about to run)."""

from __future__ import annotations

import pytest


def pytest_runtest_setup(item: pytest.Item) -> None:
    marker = item.get_closest_marker("gpu")
    if marker is None:
        return
    import torch

    need = int(marker.kwargs.get("count", 1))
    have = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if have < need:
        pytest.skip(f"needs {need} CUDA GPU{'s' if need > 1 else ''}, this machine has {have}")
