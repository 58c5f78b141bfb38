"""``hadar reproduce NAME --quick``: each system's headline experiment runs end to end with its
paper's set-up and writes reproduce.json as documented; a row's verdict follows its stated
tolerance; exit 0 whatever the figures."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hadar.cli import main
from hadar.experiments.paper import REPRODUCED
from hadar.experiments.reproduce import AT_LEAST, Row
from hadar.experiments.reproduce.report import markdown, tolerance_text
from hadar.simulator.malleable import ReplayResult, static_rate, utilisation_efficiency
from hadar.workloads.malleable import trainer_workload

KEYS = {"figure", "paper", "ours", "tolerance", "within"}


def test_a_rows_verdict_follows_its_tolerance() -> None:
    assert Row("a", 100.0, 109.0, 0.10).within
    assert not Row("a", 100.0, 111.0, 0.10).within
    assert not Row("a", 100.0, 89.0, 0.10).within
    assert not Row("a", 100.0, None, 0.10).within  # not measured is never within
    assert Row("b", 1.9, 1.72, 0.10, unit="x", rule=AT_LEAST).within
    assert Row("b", 1.9, 5.0, 0.10, unit="x", rule=AT_LEAST).within
    assert not Row("b", 1.9, 1.70, 0.10, unit="x", rule=AT_LEAST).within
    assert tolerance_text(Row("b", 1.9, 1.0, 0.10, unit="x", rule=AT_LEAST)) == ">= 1.71x"
    assert tolerance_text(Row("a", 100.0, 1.0, 0.10)) == "+-10 %"


def test_the_static_baseline_of_bftrainers_utilisation() -> None:
    jobs = trainer_workload("hpo", 3)
    one = jobs[0].points[0][1]  # ShuffleNet on one node
    assert static_rate(jobs, 3) == pytest.approx(3 * one)  # one node each beats two on one
    assert static_rate(jobs, 0) == 0.0
    assert static_rate(jobs[:1], 1000) == pytest.approx(jobs[0].points[-1][1])  # capped at n_max
    result = ReplayResult("bftrainer", 1.0, 0.5 * 3 * one * 3600, 0, 0.0, 0.0, 3 * 3600.0, 0, 0.0)
    assert utilisation_efficiency(result, jobs) == pytest.approx(0.5)


@pytest.mark.parametrize("name", REPRODUCED)
def test_quick_reproduction_writes_its_rows(name: str, tmp_path: Path) -> None:
    out = tmp_path / name
    assert main(["reproduce", name, "--quick", "--out", str(out)]) == 0
    got = json.loads((out / "reproduce.json").read_text())
    assert got["system"] == name and got["quick"] is True and got["setup"]
    assert got["rows"]
    for row in got["rows"]:
        assert set(row) >= KEYS
        assert row["ours"] is not None and row["ours"] > 0  # every quick row is measured
        rebuilt = Row(row["figure"], row["paper"], row["ours"], row["tolerance"], rule=row["rule"])
        assert rebuilt.within == row["within"]
    table = (out / "reproduce.md").read_text()
    assert table.count("\n| ") == len(got["rows"]) + 1  # the header and one line per row


def test_an_unknown_system_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["reproduce", "gandiva", "--quick"]) == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'gandiva'" in err and "Traceback" not in err


def test_markdown_says_the_set_up_and_flags_rows_outside() -> None:
    from hadar.experiments.reproduce import Reproduction

    r = Reproduction("x", True, "a set-up", (Row("f", 10.0, 20.0, 0.1), Row("g", 10.0, 10.5, 0.1)))
    text = markdown(r)
    assert text.startswith("Set-up (--quick): a set-up.")
    assert "| f | 10 s | 20 s | +-10 % | **no** |" in text
    assert "| g | 10 s | 10 s | +-10 % | yes |" in text
