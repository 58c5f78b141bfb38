"""``hadar node-stream from-slurm`` on what sinfo -i and sacct -P print (captured from the local
Slurm of scripts/slurm-local, times made up)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hadar.core.errors import InputError
from hadar.core.node_stream import NodeStream
from hadar.workloads.slurm_formats import parse_slurm_output
from tests.fixtures.cli import hadar_cli, one_error_line

SINFO = """Sat Nov 28 11:05:05 2026
NODELIST   NODES PARTITION STATE
n1             1    debug* idle
n1             1      idle idle
n2             1    debug* idle
n2             1      idle idle

Sat Nov 28 11:05:15 2026
NODELIST   NODES PARTITION STATE
n1             1    debug* mix
n1             1      idle mix
n2             1    debug* idle
n2             1      idle idle

Sat Nov 28 11:05:45 2026
PARTITION AVAIL  TIMELIMIT  NODES  STATE NODELIST
debug*       up   infinite      2   idle n[1-2]
idle         up   infinite      2   idle n[1-2]
"""

SACCT = """JobID|JobName|Partition|Start|End|State|NodeList
10|a|debug|2026-11-28T10:00:00|2026-11-28T10:10:00|COMPLETED|n[1-2]
10.batch|batch||2026-11-28T10:00:00|2026-11-28T10:10:00|COMPLETED|n1
11|b|debug|2026-11-28T10:05:00|2026-11-28T10:20:00|COMPLETED|n3
12|c|debug|2026-11-28T10:15:00|Unknown|RUNNING|n1
13|d|debug|Unknown|Unknown|PENDING|None assigned
"""


def _events(stream: NodeStream) -> list[tuple[float, str, str]]:
    return [(e.time, e.node, e.event) for e in stream.events]


def test_sinfo_iterations_become_idle_spells() -> None:
    stream = parse_slurm_output(SINFO, "s.log")
    assert _events(stream) == [
        (0.0, "n1", "join"),
        (0.0, "n2", "join"),
        (10.0, "n1", "leave"),
        (40.0, "n1", "join"),
    ]


def test_sacct_jobs_keep_their_nodes_busy_and_steps_do_not_count() -> None:
    stream = parse_slurm_output(SACCT, "a.log", nodes=["n1", "n2", "n3", "n4"])
    assert _events(stream) == [
        (0.0, "n3", "join"),
        (0.0, "n4", "join"),  # no job used it: idle throughout
        (300.0, "n3", "leave"),
        (600.0, "n1", "join"),
        (600.0, "n2", "join"),
        (900.0, "n1", "leave"),
        (1200.0, "n3", "join"),
    ]


@pytest.mark.parametrize(
    ("text", "why"),
    [
        (
            SINFO.replace("n[1-2]", "n[1-2"),
            r"s.log: line 17, field NODELIST: unbalanced brackets in host list 'n\[1-2'",
        ),
        ("Sat Nov 28 11:05:05 2026\nNODES STATE\n", r"s.log: line 2: expected sinfo's header"),
        (
            SACCT.replace("10:20:00|COMPLETED|n3", "09:20:00|COMPLETED|n3"),
            r"s.log: line 4, field End: before the job's Start",
        ),
        (
            SACCT.replace("2026-11-28T10:05:00", "yesterday"),
            r"s.log: line 4, field Start: not a time",
        ),
        (SACCT.replace("|n3\n", "|n[3\n"), r"s.log: line 4, field NodeList"),
        # times sinfo's pattern lets through that are no date: one line, not strptime's error
        (
            SINFO.replace("Sat Nov 28 11:05:15", "Sat Nov 31 99:05:15"),
            r"s.log: line 8: sinfo's time line 'Sat Nov 31 99:05:15 2026': not a valid date",
        ),
        (
            SINFO.replace("Sat Nov 28 11:05:05", "Mon Feb 30 11:05:05"),
            r"s.log: line 1: sinfo's time line 'Mon Feb 30 11:05:05 2026': day is out of range",
        ),
    ],
)
def test_bad_output_is_one_line_naming_line_and_field(text: str, why: str) -> None:
    with pytest.raises(InputError, match=why):
        parse_slurm_output(text, "s.log")


def test_the_command_reads_sacct_output(tmp_path: Path) -> None:
    log = tmp_path / "sacct.txt"
    log.write_text(SACCT)
    out = tmp_path / "s.csv"
    res = hadar_cli("node-stream", "from-slurm", str(log), "-o", str(out), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert out.read_text().splitlines()[:3] == ["time,node,event", "0.0,n3,join", "300.0,n3,leave"]


@pytest.mark.parametrize("stamp", ["Sat Nov 31 99:05:05 2026", "Mon Feb 30 11:05:05 2026"])
def test_the_command_refuses_an_impossible_sinfo_time_in_one_line(tmp_path: Path, stamp) -> None:
    (tmp_path / "sinfo.log").write_text(SINFO.replace("Sat Nov 28 11:05:05 2026", stamp))
    res = hadar_cli("node-stream", "from-slurm", "sinfo.log", "-o", "s.csv", cwd=tmp_path)
    assert res.returncode == 2, res.stderr
    line = one_error_line(res)
    assert line.startswith(f"hadar: error: sinfo.log: line 1: sinfo's time line {stamp!r}: ")
    assert not (tmp_path / "s.csv").exists()


def test_a_long_line_is_echoed_cut() -> None:
    with pytest.raises(
        InputError, match=r"line 2: expected sinfo's header .* \(got 'a{60}\.\.\.'\)$"
    ):
        parse_slurm_output("Sat Nov 28 11:05:05 2026\n" + "a" * 5000 + "\n", "s.log")


def test_a_log_that_expands_past_the_row_cap_is_refused_before_it_is_written(
    tmp_path: Path,
) -> None:
    # 21 lines of 100,000 nodes each: past two million rows at line 21's block; 11 KB of text
    block = "NODELIST STATE\ng[00000-99999] {}\n"
    text = "".join(
        f"Sat Nov 28 11:{m:02d}:05 2026\n" + block.format("idle" if m % 2 else "allocated")
        for m in range(21)
    )
    (tmp_path / "big.log").write_text(text)
    res = hadar_cli("node-stream", "from-slurm", "big.log", "-o", "s.csv", cwd=tmp_path)
    assert res.returncode == 2, res.stderr
    line = one_error_line(res)
    assert "big.log: line 63, field NODELIST: the log expands to more than 2,000,000" in line
    assert not (tmp_path / "s.csv").exists()
