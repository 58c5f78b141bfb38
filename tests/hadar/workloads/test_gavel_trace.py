"""Gavel trace formats: 10- and 7-column reading, writing, lossless round trips, bad input."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from hadar.cli import main
from hadar.core.errors import InputError
from hadar.core.jobs import Job
from hadar.workloads import load_workload
from hadar.workloads.gavel_trace import gavel_command, read_trace, trace_lines, write_trace
from tests.baselines.helpers import R18, TABLE
from tests.fixtures.processes import run_group

DATA = Path(__file__).parent / "data"
OLD_TRACE = DATA / "gavel_msr_8jobs.trace"  # first 8 lines of Gavel's msr-seed0-23dbec.trace
FIELDS = ("job_type", "total_steps", "num_gpus", "weight", "arrival")


def fields(jobs):
    return [tuple(getattr(j, f) for f in FIELDS) for j in jobs]


def test_ten_column_round_trip_of_a_generated_workload(tmp_path):
    jobs = load_workload("philly-48", TABLE)
    path = write_trace(jobs, tmp_path / "w.trace")
    back = read_trace(path, TABLE)
    assert fields(back) == fields(sorted(jobs, key=lambda j: (j.arrival, j.job_id)))
    assert [j.job_id for j in back] == list(range(len(jobs)))
    again = write_trace(back, tmp_path / "again.trace")
    assert again.read_bytes() == path.read_bytes()
    first = path.read_text().splitlines()[0].split("\t")
    assert len(first) == 10 and first[3] == "--num_steps" and "cifar10" in first[1]


def test_round_trip_keeps_exact_floats_weights_and_arrivals(tmp_path):
    jobs = [
        Job(0, R18, 2, 1234.0, arrival=0.1 + 0.2, weight=2.5),
        Job(1, "A3C", 1, 7.0, arrival=12.345678901234, weight=1.0),
        Job(2, R18, 8, 99.0, arrival=12.345678901234, weight=3.0),
    ]
    back = read_trace(write_trace(jobs, tmp_path / "x.trace"))
    assert fields(back) == fields(jobs)
    assert [j.model for j in back] == ["ResNet-18", "A3C", "ResNet-18"]


def test_seven_column_trace_reads_and_round_trips_through_ten_columns(tmp_path):
    jobs = read_trace(OLD_TRACE, TABLE)
    assert len(jobs) == 8
    assert fields(jobs)[:3] == [
        ("Transformer (batch size 128)", 14612.0, 1, 1.0, 0.0),
        ("Recommendation (batch size 8192)", 1550.0, 1, 1.0, 11.0),
        ("Transformer (batch size 256)", 19178.0, 8, 1.0, 182095.0),
    ]
    assert jobs[0].spec["gavel"]["num_steps_arg"] == "-step"
    out = write_trace(jobs, tmp_path / "new.trace")
    lines = out.read_text().splitlines()
    assert all(len(line.split("\t")) == 10 for line in lines)
    back = read_trace(out, TABLE)
    assert fields(back) == fields(jobs)
    # Columns we have no field for survive too (the command keeps its trailing space).
    original = OLD_TRACE.read_text().splitlines()[3].split("\t")
    assert back[3].spec["gavel"]["command"] == original[1] and original[1].endswith(" ")


def test_job_table_commands_and_placeholders():
    c = gavel_command("Transformer (batch size 64)")
    assert (c.working_dir, c.num_steps_arg, c.needs_data_dir) == ("translation", "-step", True)
    assert "-batch_size 64" in c.command
    assert gavel_command("A3C").needs_data_dir is False
    p = gavel_command("MM")
    assert (p.command, p.working_dir, p.num_steps_arg, p.needs_data_dir) == (
        "python3 train.py",
        ".",
        "--num_steps",
        False,
    )


def test_non_integral_steps_are_rounded_for_gavel():
    line = trace_lines([Job(0, R18, 1, 10.6)])[0].split("\t")
    assert line[5] == "11"


# -- bad input ------------------------------------------------------------------------------
def _trace(tmp_path: Path, rows: list[list[str]], name: str = "bad.trace") -> Path:
    p = tmp_path / name
    p.write_text("".join("\t".join(r) + "\n" for r in rows))
    return p


def _row(job_type=R18, steps="1000", scale="1", arrival="0"):
    return [
        job_type,
        "python3 main.py",
        "image_classification/cifar10",
        "--num_steps",
        "1",
        steps,
        scale,
        "1",
        "-1",
        arrival,
    ]


def _one_line_error(capsys, code, *needles):
    assert code == 2
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    for n in needles:
        assert n in lines[0], lines[0]


def test_decreasing_arrivals_are_rejected(tmp_path, capsys):
    p = _trace(tmp_path, [_row(arrival="100"), _row(arrival="50")])
    code = main(["simulate", "--workload", str(p), "--out", str(tmp_path / "o"), "--no-progress"])
    _one_line_error(capsys, code, "line 2 (job 1)", "arrival_time 50", "earlier")


def test_unknown_job_type_is_rejected(tmp_path, capsys):
    p = _trace(tmp_path, [_row(), _row(job_type="GPT-5 (batch size 1)")])
    code = main(["export-gavel", "--workload", str(p), "--out", str(tmp_path / "o.trace")])
    _one_line_error(
        capsys, code, "line 2 (job 1)", "'GPT-5 (batch size 1)'", "not in gavel_throughputs.json"
    )


def test_throughputs_file_missing_a_gang_size_is_rejected(tmp_path, capsys):
    table = {
        gpu: {f"('{R18}', 1)": {"null": rate}}
        for gpu, rate in (("v100", 24.0), ("p100", 22.0), ("k80", 7.0))
    }
    tp = tmp_path / "tp.json"
    tp.write_text(json.dumps(table))
    p = _trace(tmp_path, [_row(), _row(scale="2")])
    code = main(
        [
            "simulate",
            "--workload",
            str(p),
            "--throughputs",
            str(tp),
            "--out",
            str(tmp_path / "o"),
            "--no-progress",
        ]
    )
    _one_line_error(
        capsys, code, "line 2 (job 1)", "tp.json has no entry for ('ResNet-18 (batch size 64)', 2)"
    )


@pytest.mark.parametrize(
    "row, needle",
    [
        (["a", "b", "c"], "expected 10 (or 7) tab-separated columns, got 3"),
        (_row(steps="many"), "total_steps: not a number"),
        (_row(scale="0"), "scale_factor: must be an integer >= 1"),
        (_row(arrival="-5"), "arrival_time: must be >= 0"),
    ],
)
def test_malformed_lines_name_line_and_field(tmp_path, row, needle):
    with pytest.raises(InputError, match="line 1 \\(job 0\\)") as exc:
        read_trace(_trace(tmp_path, [row]))
    assert needle in str(exc.value)


def test_bad_trace_through_the_installed_cli(tmp_path):
    p = _trace(tmp_path, [_row(arrival="9"), _row(arrival="3")])
    proc = run_group(
        [
            sys.executable,
            "-m",
            "hadar",
            "export-gavel",
            "--workload",
            str(p),
            "--out",
            str(tmp_path / "o.trace"),
        ],
        timeout=120,
    )
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "line 2 (job 1)" in proc.stderr


def test_export_gavel_cli_writes_a_replayable_trace(tmp_path, capsys):
    out = tmp_path / "p.trace"
    assert main(["export-gavel", "--workload", "philly-48", "--seed", "3", "--out", str(out)]) == 0
    assert "wrote 48 jobs" in capsys.readouterr().out
    assert fields(read_trace(out, TABLE)) == fields(
        sorted(load_workload("philly-48", TABLE, seed=3), key=lambda j: (j.arrival, j.job_id))
    )
