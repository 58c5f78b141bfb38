"""``hadar.sweep``: the hint when Ray is missing names the package that provides it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from hadar.cli import main
from hadar.core.errors import MissingExtraError
from hadar.sweep import run_cells


def _double(x: int) -> int:
    return 2 * x


def test_a_missing_ray_names_the_extra_of_this_distribution(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    with pytest.raises(MissingExtraError) as caught:
        run_cells(_double, [1, 2], ray_address="auto")
    assert str(caught.value) == (
        "--ray-address needs ray, which is not installed: pip install 'hadar-scheduler[ray]'"
    )
    assert "'hadar[" not in str(caught.value)  # `hadar` on the index is another project
    out = tmp_path / "out"
    assert (
        main(["compare", "--workload", "philly-4", "--ray-address", "auto", "--out", str(out)]) == 2
    )
    assert "pip install 'hadar-scheduler[ray]'" in capsys.readouterr().err
    assert not out.exists()  # refused before the output directory was made


@pytest.mark.parametrize(
    "address, code, needle",
    [
        ("h" * 5000 + ":1", 3, "(not a valid host name)"),
        ("127.0.0.1:99999", 2, "port 99999 is not a TCP port (0-65535)"),
        ("127.0.0.1:\u0663", 2, "the port must be written in 0-9"),
    ],
    ids=["host IDNA cannot encode", "port too large", "non-ASCII digit"],
)
def test_a_bad_ray_address_is_one_short_line_before_ray_starts(
    address: str, code: int, needle: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    pytest.importorskip("ray")
    out = tmp_path / "out"
    assert (
        main(["compare", "--workload", "philly-4", "--ray-address", address, "--out", str(out)])
        == code
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0] and len(err[0]) < 400, err
    if code == 2:  # a malformed address is refused before the output directory exists
        assert not out.exists()
