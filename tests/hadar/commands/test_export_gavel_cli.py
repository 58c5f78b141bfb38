"""``hadar export-gavel`` on what its help offers: the physical mixes are refused in one line
naming the unmeasured job type (nothing is mapped to a stand-in), a missing output folder is
created and said so."""

from __future__ import annotations

from pathlib import Path

import pytest

from hadar.cli import main
from hadar.core.physical_workloads import MIXES


@pytest.mark.parametrize("mix", sorted(MIXES))
def test_every_mix_is_refused_naming_the_unmeasured_job_type(mix: str, tmp_path, capsys) -> None:
    out = tmp_path / "m.trace"
    assert main(["export-gavel", "--workload", mix, "--out", str(out)]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"hadar: error: {mix}: job type 'MM' (MM: ")
    assert "Gavel never measured" in line and "--throughputs" in line
    assert not out.exists()


def test_help_does_not_offer_the_mixes(capsys) -> None:
    assert main(["export-gavel", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert (
        "--workload WORKLOAD philly-N, philly-N-arrivals, a .csv/.yaml job list or a .trace" in text
    )


def test_a_missing_folder_is_created_and_named(tmp_path: Path, capsys) -> None:
    out = tmp_path / "new" / "dir" / "x.trace"
    assert main(["export-gavel", "--workload", "philly-5", "--out", str(out)]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed == [f"wrote 5 jobs to {out}", f"note: created the folder {tmp_path / 'new'}"]
    assert len(out.read_text().splitlines()) == 5
    assert main(["export-gavel", "--workload", "philly-5", "--out", str(out)]) == 0
    assert "created" not in capsys.readouterr().out
