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

from hadar.core.io import (
    atomic_file,
    csv_text,
    write_bytes,
    write_csv,
    write_frame,
    write_json,
    write_text,
)


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
