"""``hadar.sweep``: the hint when Ray is missing names the package that provides it."""

from __future__ import annotations

import sys

import pytest

from hadar.cli import main
from hadar.core.errors import MissingExtraError
from hadar.sweep import run_cells


def _double(x: int) -> int:
    return 2 * x


def test_a_missing_ray_names_the_extra_of_this_distribution(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    with pytest.raises(MissingExtraError) as caught:
        run_cells(_double, [1, 2], ray_address="auto")
    assert str(caught.value) == (
        "--ray-address needs ray, which is not installed: pip install 'hadar-scheduler[ray]'"
    )
    assert "'hadar[" not in str(caught.value)  # `hadar` on the index is another project
    assert main(["compare", "--workload", "philly-4", "--ray-address", "auto"]) == 2
    assert "pip install 'hadar-scheduler[ray]'" in capsys.readouterr().err
