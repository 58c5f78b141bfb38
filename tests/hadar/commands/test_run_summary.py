"""The run summary (``hadar run``'s last table, ``hadar report``) shows the run's names as text."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from hadar.commands.run import print_run_summary

SUMMARY = {
    "policy": "hadare",
    "cluster": "local-3node",
    "size": "tiny",
    "completed": 1,
    "jobs": 1,
    "ttd_s": 10.0,
    "active_s": 9.0,
    "avg_jct_s": 10.0,
    "median_jct_s": 10.0,
    "p99_jct_s": 10.0,
    "max_jct_s": 10.0,
    "avg_queueing_s": 0.0,
    "gru": 0.5,
    "cru": 0.5,
    "startup_cru": None,
    "rounds": 2,
    "failures": 0,
    "avg_coordination_s": 0.1,
    "avg_overhead_s": 0.2,
    "quality": {},
}


def test_a_workload_path_with_markup_and_escapes_is_printed_as_text(tmp_path: Path) -> None:
    # a workload file named "a[/]b.yaml" stopped hadar run and hadar report with a MarkupError
    # after the run; an ESC in the name reached the terminal
    out = io.StringIO()
    console = Console(file=out, width=200, force_terminal=False)
    workload = "/tmp/a[/]b[bold red]\x1b[31mX.yaml"
    print_run_summary({**SUMMARY, "workload": workload}, tmp_path, console)
    text = out.getvalue()
    assert "a[/]b[bold red]" in text
    assert "\x1b" not in text and "\\x1b[31mX.yaml" in text


def test_a_held_out_metric_that_is_not_a_number_is_shown_as_a_dash(tmp_path: Path) -> None:
    out = io.StringIO()
    console = Console(file=out, width=200, force_terminal=False)
    quality = {"0": {"metric": "loss", "value": None}, "1": {"metric": "loss", "value": 0.5}}
    print_run_summary({**SUMMARY, "workload": "w.yaml", "quality": quality}, tmp_path, console)
    rows = [line for line in out.getvalue().splitlines() if "job " in line]
    assert rows[0].rstrip(" │|").endswith("-") and "0.5000" in rows[1]
