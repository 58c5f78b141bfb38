"""Hostile input found by fuzzing the file parsers: a throughputs key that overflows ast's
recursion, CSV headers and rows the csv module mis-reports or silently misreads (an oversized
field, a column named twice, more fields than the header). Each is one short InputError line
naming the file and the physical line or field (exit 2 through the CLI, no traceback)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from estimators.throughput import GavelThroughputTable
from hadar.cli import main
from hadar.core.errors import SHOWN_CHARS, InputError
from hadar.core.node_stream import parse_node_stream
from hadar.workloads.files import load_job_file
from hadar.workloads.pollux import jobs_from_pollux_csv

R18 = "ResNet-18 (batch size 64)"
ROW = f"0,{R18},1,1000"
LONGEST_LINE = 300
"""No message here may be longer, its file's path counted as :data:`PATH_CHARS` characters: each
echoes at most :data:`SHOWN_CHARS` of a user's value."""
PATH_CHARS = 70
"""What a message's file path counts for in :data:`LONGEST_LINE`, however long it is: the user
chooses the path (under a long TMPDIR tmp_path alone is ~200 characters), the product the rest.
70 is about pytest's own tmp_path under /tmp, with which the bound was set: the rest may take 230."""


def line_length(text: str, path: Path | str) -> int:
    """``text``'s length with its mention of ``path`` (as ``PATH: ``) counted as
    :data:`PATH_CHARS` characters."""
    assert f"{path}: " in text, text
    return len(text) - len(str(path)) + PATH_CHARS


def refused(call, path: Path | str, *needles: str) -> str:
    """The one-line :class:`InputError` ``call`` raises: it starts with ``path``, names each of
    ``needles`` and is short, the path aside."""
    with pytest.raises(InputError) as info:
        call()
    text = str(info.value)
    assert "\n" not in text and text.startswith(f"{path}: "), text
    assert line_length(text, path) < LONGEST_LINE, text
    for needle in needles:
        assert needle in text, text
    return text


def one_line_exit_2(
    capsys: pytest.CaptureFixture[str], code: int, path: Path, *needles: str
) -> str:
    assert code == 2
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err[:2000]
    line = lines[0]
    assert line.startswith(f"hadar: error: {path}: "), line
    assert line_length(line, path) < LONGEST_LINE, line
    for needle in needles:
        assert needle in line, line
    return line


def throughputs(tmp_path: Path, key: str) -> Path:
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"v100": {key: 1.0}}))
    return path


# -- throughputs keys ------------------------------------------------------------------------


@pytest.mark.parametrize("minuses", [5000, 20000])
def test_a_deeply_nested_job_key_is_refused_before_ast_parses_it(tmp_path, minuses):
    path = throughputs(tmp_path, "('x', " + "-" * minuses + "1)")
    refused(
        lambda: GavelThroughputTable.from_file(path),
        path,
        f"{path}: v100: job key ",
        "('x', ---",
        "...",
        f"is {minuses + 8:,} characters; at most 400",
    )


def test_a_5000_digit_job_key_is_echoed_truncated(tmp_path):
    path = throughputs(tmp_path, "('x', " + "9" * 5000 + ")")
    text = refused(lambda: GavelThroughputTable.from_file(path), path, f"{path}: v100: job key ")
    assert "9" * (SHOWN_CHARS + 1) not in text


def test_a_gang_size_beyond_any_cluster_is_refused(tmp_path):
    path = throughputs(tmp_path, f"('{R18}', 1000000000000)")
    refused(lambda: GavelThroughputTable.from_file(path), path, "bad job key", "W in 1..65,536")


def test_estimate_error_reports_a_hostile_key_in_one_line(tmp_path, capsys):
    path = throughputs(tmp_path, "('x', " + "-" * 5000 + "1)")
    code = main(["estimate-error", "--throughputs", str(path), "--out", str(tmp_path / "o")])
    one_line_exit_2(capsys, code, path, f"{path}: v100: job key")


# -- job CSV ---------------------------------------------------------------------------------


def jobs_csv(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "jobs.csv"
    path.write_text(text)
    return path


def test_an_oversized_header_field_is_one_line_through_the_cli(tmp_path, capsys):
    path = jobs_csv(tmp_path, "id,type,gpus,steps," + "x" * 200_000 + f"\n{ROW},0\n")
    argv = ["simulate", "--workload", str(path), "--out", str(tmp_path / "o"), "--no-progress"]
    one_line_exit_2(
        capsys, main(argv), path, f"{path}: line 1: malformed CSV: field larger than field limit"
    )


def test_an_oversized_field_names_its_physical_line(tmp_path):
    rows = "".join(f"{i},{R18},1,1000,0\n" for i in range(4))
    path = jobs_csv(tmp_path, "id,type,gpus,steps,arrival\n" + rows + "4," + "x" * 200_000 + "\n")
    refused(lambda: load_job_file(path), path, f"{path}: line 6: malformed CSV: field larger")


def test_a_column_named_twice_is_refused(tmp_path):
    path = jobs_csv(tmp_path, f"id,type,gpus,steps,steps\n{ROW},5\n")
    refused(
        lambda: load_job_file(path), path, f"{path}: line 1 (header): column 'steps' is named twice"
    )


def test_more_fields_than_the_header_names_the_line_and_counts(tmp_path):
    path = jobs_csv(
        tmp_path, f"id,type,gpus,steps,arrival\n{ROW},0\n\n1,{R18},1,1000,0,extra,more\n"
    )
    refused(lambda: load_job_file(path), path, f"{path}: line 4: 7 fields, the header has 5")


def test_an_unknown_long_column_is_named_truncated_at_the_header(tmp_path):
    path = jobs_csv(tmp_path, "id,type,gpus,steps," + "y" * 5000 + f"\n{ROW},1\n")
    text = refused(
        lambda: load_job_file(path), path, f"{path}: line 1 (header): unknown column 'yyy"
    )
    assert "y" * (SHOWN_CHARS + 1) not in text


def test_a_value_under_an_unnamed_column_is_refused(tmp_path):
    path = jobs_csv(tmp_path, f"id,type,gpus,steps,\n{ROW},\n1,{R18},1,1000,7\n")
    refused(lambda: load_job_file(path), path, f"{path}: line 3: field 5 ('7') is under a column")


# -- Pollux CSV --------------------------------------------------------------------------------

POLLUX_HEADER = "name,time,application,num_replicas,batch_size"


def test_pollux_csv_with_a_column_named_twice_is_refused():
    text = f"{POLLUX_HEADER},name\njob-0,0,cifar10,1,128,other\n"
    refused(
        lambda: jobs_from_pollux_csv(text, "p.csv"),
        "p.csv",
        "p.csv: line 1 (header): column 'name' is named",
    )


def test_pollux_csv_oversized_field_names_its_physical_line():
    text = f"{POLLUX_HEADER}\njob-0,0,cifar10,1,128\njob-1," + "9" * 200_000 + ",cifar10,1,128\n"
    refused(lambda: jobs_from_pollux_csv(text, "p.csv"), "p.csv", "p.csv: line 3: malformed CSV")


def test_pollux_csv_echoes_a_long_application_truncated():
    text = f"{POLLUX_HEADER}\njob-0,0," + "a" * 5000 + ",1,128\n"
    text = refused(
        lambda: jobs_from_pollux_csv(text, "p.csv"), "p.csv", "row[0].application: unknown"
    )
    assert "a" * (SHOWN_CHARS + 1) not in text


# -- node stream ---------------------------------------------------------------------------------


def test_node_stream_with_a_column_named_twice_is_refused():
    refused(
        lambda: parse_node_stream("time,node,event,event\n0,a,join,leave\n", "s.csv"),
        "s.csv",
        "s.csv: line 1 (header): column 'event' is named twice",
    )


def test_node_stream_echoes_a_long_node_name_truncated():
    text = refused(
        lambda: parse_node_stream("time,node,event\n0," + "n" * 5000 + ",join\n", "s.csv", {"a"}),
        "s.csv",
        "s.csv: line 2, field node: node 'nnn",
    )
    assert "n" * (SHOWN_CHARS + 1) not in text
