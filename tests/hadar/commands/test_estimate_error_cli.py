"""``hadar estimate-error`` through the real CLI entry point: exit codes and one-line errors."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from hadar import cli
from tests.fixtures.filesystems import fill, small_tmpfs
from tests.fixtures.processes import run_group
from tests.hadar.commands.helpers import folder_entries

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture
def only_estimate(monkeypatch):
    """Keep this test independent of other sub-commands' import health."""
    monkeypatch.setattr(cli, "COMMAND_MODULES", ["hadar.commands.estimate"])


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    rc = cli.main(["estimate-error", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_registered_in_the_cli() -> None:
    assert "hadar.commands.estimate" in cli.COMMAND_MODULES


def test_report_on_the_bundled_table(only_estimate, capsys, tmp_path) -> None:
    rc, out, err = run(["--holdout", "cell", "--out", str(tmp_path / "o")], capsys)
    assert rc == 0 and err == ""
    assert "hold-out = cell" in out and "Ranking agreement" in out and "k80" in out
    summary = json.loads((tmp_path / "o" / "estimate_error.json").read_text())
    assert any(s["gpu_type"] == "k80" and s["num_gpus"] == 1 for s in summary["summaries"])


def test_reference_flag(only_estimate, capsys) -> None:
    rc, out, _ = run(["--holdout", "cell", "--reference", "Tesla P100"], capsys)
    assert rc == 0 and "reference p100" in out


@pytest.mark.parametrize(
    ("content", "args", "fragment"),
    [
        (None, ["--throughputs", "{missing}"], "throughputs file not found"),
        (b"{not json", ["--throughputs", "{file}"], "malformed JSON at line 1"),
        (b"\xff\xfe\x00", ["--throughputs", "{file}"], "not a UTF-8 text file"),
        (b'{"v200": {}}', ["--throughputs", "{file}"], "unknown GPU type 'v200'"),
        (
            b'{"k80": {"(\'A\', 1)": {"null": 1.0}}}',
            ["--throughputs", "{file}"],
            "--reference: v100 is not measured",
        ),
        (b'{"v100": {"(\'A\', 1)": {"null": NaN}}}', ["--throughputs", "{file}"], "must be finite"),
        (None, ["--reference", "v200"], "--reference: unknown GPU type 'v200'"),
        (None, ["--holdout", "cell,bogus"], "--holdout: unknown hold-out 'bogus'"),
    ],
)
def test_bad_input_exits_2_with_one_line(
    only_estimate, capsys, tmp_path, content, args, fragment
) -> None:
    f = tmp_path / "t.json"
    if content is not None:
        f.write_bytes(content)
    argv = [a.format(file=f, missing=tmp_path / "missing.json") for a in args]
    rc, out, err = run(argv, capsys)
    assert rc == 2
    assert err.count("\n") == 1 and err.startswith("hadar: error: ") and fragment in err
    assert "Traceback" not in err + out


def test_unwritable_out_dir_fails_before_the_report(only_estimate, capsys, tmp_path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    rc, out, err = run(["--out", str(blocker / "sub")], capsys)
    assert rc == 2 and "--out: cannot create" in err and out == ""


FILES = ("estimate_error_cells.csv", "estimate_error_summary.csv", "estimate_error.json")


def _previous(out: Path) -> dict[str, str]:
    """A previous report's files in ``out``; every entry there, as :func:`_entries` shows it."""
    out.mkdir(parents=True, exist_ok=True)
    for name in FILES:
        (out / name).write_text(f"the previous report's {name}\n")
    return folder_entries(out)


def test_a_planted_fifo_refuses_the_report_before_it_is_computed(
    only_estimate, capsys, tmp_path
) -> None:
    out = tmp_path / "o"
    _previous(out)
    (out / "estimate_error.json").unlink()
    os.mkfifo(out / "estimate_error.json")
    before = folder_entries(out)
    rc, printed, err = run(["--holdout", "cell", "--out", str(out)], capsys)
    assert rc == 2 and printed == ""  # no report printed: refused before it was computed
    assert err.splitlines() == [
        f"hadar: error: {out}/estimate_error.json: is a FIFO, not a regular file; "
        "hadar writes only regular files"
    ]
    assert folder_entries(out) == before


def test_a_full_filesystem_keeps_the_previous_report_whole(only_estimate, capsys, tmp_path) -> None:
    with small_tmpfs(tmp_path / "fs") as fs:
        out = fs / "o"
        before = _previous(out)
        fill(fs)
        rc, _, err = run(["--holdout", "cell", "--out", str(out)], capsys)
        after = folder_entries(out)
    assert rc == 2
    assert after == before  # no new file, no temporary file or staging folder left
    assert err.splitlines() == [
        f"hadar: error: {out}/estimate_error_cells.csv: cannot write: No space left on device"
    ]


def test_installed_entry_point_runs_in_a_subprocess(tmp_path) -> None:
    """The real ``python -m hadar`` process: exit code 2 and no traceback on a bad file."""
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    p = run_group(
        [sys.executable, "-m", "hadar", "estimate-error", "--throughputs", str(bad)],
        cwd=ROOT,
        timeout=120,
    )
    assert p.returncode == 2, p.stderr
    assert p.stderr.strip().count("\n") == 0 and "expected an object" in p.stderr
    assert "Traceback" not in p.stderr
