"""hadar.core.io: atomic writes (old or new file, never half of one; no temporary file left behind),
CSV through pandas that keeps each value as Python prints it, JSON with a final newline."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from hadar.core.errors import InputError
from hadar.core.io import (
    atomic_file,
    csv_text,
    replaced_together,
    write_bytes,
    write_csv,
    write_frame,
    write_json,
    write_text,
)
from tests.fixtures.filesystems import fill, immutable, small_tmpfs


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".tmp"))


def test_write_text_replaces_the_file_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "deep" / "out.txt"  # the folder is created
    assert write_text(path, "first\n") == path
    write_text(path, "second\n")
    assert path.read_text() == "second\n"
    assert _leftovers(path.parent) == []


def test_new_files_follow_the_umask_not_a_private_mode(tmp_path):
    old = os.umask(0o022)
    try:
        write_text(tmp_path / "a.json", "{}")
        write_bytes(tmp_path / "b.bin", b"\x00", durable=True)
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "a.json").stat().st_mode) == 0o644
    assert stat.S_IMODE((tmp_path / "b.bin").stat().st_mode) == 0o644


def test_an_error_while_writing_keeps_the_old_file(tmp_path):
    path = tmp_path / "state.json"
    write_json(path, {"v": 1}, durable=True)
    with pytest.raises(RuntimeError, match="disk on fire"), atomic_file(path) as f:
        f.write('{"v": 2, "trunc')
        raise RuntimeError("disk on fire")
    assert json.loads(path.read_text()) == {"v": 1}
    assert _leftovers(tmp_path) == []


def test_binary_and_json_round_trip(tmp_path):
    blob = bytes(range(256)) * 10
    assert write_bytes(tmp_path / "x.bin", blob).read_bytes() == blob
    data = {"a": [1, 2.5, None], "b": "é"}
    p = write_json(tmp_path / "x.json", data, indent=1)
    text = p.read_text(encoding="utf-8")
    assert text.endswith("}\n") and text == json.dumps(data, indent=1) + "\n"


_KILLED_WRITER = """
import sys
from hadar.core.io import write_bytes
path, size = sys.argv[1], int(sys.argv[2])
i = 0
while True:
    write_bytes(path, bytes([i % 251]) * size)
    i += 1
"""


def test_sigkill_mid_write_leaves_a_whole_file(tmp_path):
    """A writer SIGKILLed while rewriting a 4 MB file: the file holds one whole version."""
    path, size = tmp_path / "big.bin", 4 * 2**20
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])}
    proc = subprocess.Popen([sys.executable, "-c", _KILLED_WRITER, str(path), str(size)], env=env)
    try:
        deadline = time.monotonic() + 60
        while not path.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.3)  # several rewrites in flight
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    data = path.read_bytes()
    assert len(data) == size and data == data[:1] * size


def test_csv_keeps_each_value_as_python_prints_it():
    rows = [
        {"id": 1, "x": 0.1 + 0.2, "flag": True, "name": "a,b"},
        {"id": None, "x": None, "flag": False, "name": 'say "hi"'},
        {"id": 3, "x": float("nan"), "name": ""},  # a missing key is an empty cell
    ]
    text = csv_text(rows, ["id", "x", "flag", "name"])
    assert text.splitlines() == [
        "id,x,flag,name",
        '1,0.30000000000000004,True,"a,b"',  # the id column stays integer despite the gap
        ',,False,"say ""hi"""',
        "3,,,",
    ]
    assert "\r" not in text


def test_csv_rounds_floats_only_and_takes_sequence_rows(tmp_path):
    path = write_csv(
        tmp_path / "r.csv", [("a", 2, 1 / 3), ("b", 10**20, 2.0)], ["k", "n", "v"], decimals=4
    )
    assert path.read_text() == "k,n,v\na,2,0.3333\nb,100000000000000000000,2.0\n"
    back = pd.read_csv(path)
    assert list(back.columns) == ["k", "n", "v"] and back["v"].tolist() == [0.3333, 2.0]


def test_write_frame_rounds_and_leaves_missing_cells_empty(tmp_path):
    frame = pd.DataFrame({"job": [1, 2], "t": [1.23456789, None]})
    path = write_frame(tmp_path / "f.csv", frame, decimals=3)
    assert path.read_text() == "job,t\n1,1.235\n2,\n"
    assert _leftovers(tmp_path) == []


# -- the files of one save, replaced together --------------------------------------------------
SAVE = ["summary.json", "jobs.csv", "rounds.csv", "sub/placements.csv"]


def _save(folder: Path, text: str) -> None:
    with replaced_together(folder, SAVE) as stage:
        for name in SAVE:
            write_text(stage / name, f"{text} {name}\n")


def _contents(folder: Path) -> dict[str, str]:
    """Every entry below ``folder`` (hidden ones too): a file's text, a FIFO or folder's kind."""
    found = {}
    for path in sorted(folder.rglob("*")):
        kind = path.lstat().st_mode
        name = str(path.relative_to(folder))
        if stat.S_ISREG(kind):
            found[name] = path.read_text()
        elif stat.S_ISFIFO(kind):
            found[name] = "FIFO"
        elif stat.S_ISDIR(kind) and not any(path.iterdir()):
            found[name] = "empty folder"
    return found


def _old(folder: Path) -> dict[str, str]:
    return {name: f"old {name}\n" for name in SAVE}


def test_a_save_replaces_all_its_files_and_leaves_nothing_else(tmp_path):
    out = tmp_path / "out"
    _save(out, "old")
    outside = tmp_path / "outside.csv"
    outside.write_text("not yours\n")
    (out / "rounds.csv").unlink()
    (out / "rounds.csv").symlink_to(outside)  # replaced itself, never written through
    _save(out, "new")
    assert _contents(out) == {name: f"new {name}\n" for name in SAVE}
    assert not (out / "rounds.csv").is_symlink() and outside.read_text() == "not yours\n"


@pytest.mark.parametrize("planted", ["fifo", "folder", "link to a folder"])
def test_a_path_that_is_no_regular_file_refuses_the_whole_save_before_any_write(tmp_path, planted):
    out = tmp_path / "out"
    _save(out, "old")
    (out / "rounds.csv").unlink()
    if planted == "fifo":
        os.mkfifo(out / "rounds.csv")
    elif planted == "folder":
        (out / "rounds.csv").mkdir()
    else:
        (tmp_path / "elsewhere").mkdir()
        (out / "rounds.csv").symlink_to(tmp_path / "elsewhere")
    before = _contents(out)
    with pytest.raises(InputError, match=r"out/rounds.csv: is a (FIFO|folder), not a regular file"):
        _save(out, "new")
    assert _contents(out) == before  # summary.json and jobs.csv too: not one file replaced


def test_a_path_planted_while_the_files_are_written_is_refused_at_the_renames(tmp_path):
    out = tmp_path / "out"
    _save(out, "old")
    with (
        pytest.raises(InputError, match=r"out/sub/placements.csv: is a FIFO"),
        replaced_together(out, SAVE) as stage,
    ):
        for name in SAVE:
            write_text(stage / name, f"new {name}\n")
        (out / "sub" / "placements.csv").unlink()
        os.mkfifo(out / "sub" / "placements.csv")
    assert _contents(out) == {**_old(out), "sub/placements.csv": "FIFO"}


def test_an_error_in_the_block_replaces_nothing(tmp_path):
    out = tmp_path / "out"
    _save(out, "old")
    with (
        pytest.raises(RuntimeError, match="drawing failed"),
        replaced_together(out, SAVE) as stage,
    ):
        write_text(stage / "summary.json", "new\n")
        raise RuntimeError("drawing failed")
    assert _contents(out) == _old(out)


def test_a_full_filesystem_keeps_the_previous_files_and_names_the_file(tmp_path):
    page = os.sysconf("SC_PAGE_SIZE")
    with small_tmpfs(tmp_path / "fs") as fs:
        out = fs / "out"
        _save(out, "old")
        filler = fill(fs)
        os.truncate(filler, filler.stat().st_size - 2 * page)  # room for two files of a page
        with (
            pytest.raises(InputError) as refused,
            replaced_together(out, SAVE) as stage,
        ):
            for name in SAVE:
                write_text(stage / name, "n" * page)
        assert _contents(out) == _old(out)  # and no temporary file, no staging folder
    assert str(refused.value) == f"{out / 'rounds.csv'}: cannot write: No space left on device"


def test_an_immutable_file_refuses_the_save_before_any_rename(tmp_path):
    out = tmp_path / "out"
    _save(out, "old")
    with immutable(out / "rounds.csv"), pytest.raises(InputError) as refused:
        _save(out, "new")
    assert str(refused.value) == (
        f"{out / 'rounds.csv'}: cannot replace: Operation not permitted; nothing was replaced"
    )
    assert _contents(out) == _old(out)


def test_a_rename_failing_part_way_puts_the_previous_files_back(tmp_path):
    """``sub/`` immutable: its file can be kept aside (linked) but not replaced, and it is
    renamed after the top-level files, which are then already new."""
    out = tmp_path / "out"
    _save(out, "old")
    with immutable(out / "sub"), pytest.raises(InputError) as refused:
        _save(out, "new")
    assert str(refused.value) == (
        f"{out / 'sub' / 'placements.csv'}: cannot replace: Operation not permitted; "
        "nothing was replaced"
    )
    assert _contents(out) == _old(out)
