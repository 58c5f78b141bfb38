"""Outputs that would replace, or be read as, a command's own inputs; output folders behind a
dangling link; inputs that expand beyond what a command reads. One line, exit 2, nothing
written (docs/security.md, docs/inputs.md)."""

from __future__ import annotations

import csv
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.fixtures.cli import hadar_cli, one_error_line

REPO = Path(__file__).resolve().parents[2]
GAVEL_TABLE = REPO / "estimators" / "data" / "gavel_throughputs.json"
AWS = REPO / "cluster_configs" / "aws-5node.yaml"
CIFAR10 = REPO / "goodput" / "data" / "pollux" / "traces" / "cifar10"


def refused(res: subprocess.CompletedProcess[str]) -> str:
    assert res.returncode == 2, res.stdout + res.stderr
    return one_error_line(res)


def test_experiment_physical_refuses_an_out_holding_a_clusters_file(tmp_path: Path) -> None:
    """A cluster file named like a result (``fig8_cru.png``) was replaced by the figure."""
    out = tmp_path / "out"
    out.mkdir()
    cluster = out / "fig8_cru.png"
    shutil.copyfile(AWS, cluster)
    before = cluster.read_bytes()
    line = refused(
        hadar_cli(
            "experiment", "physical", "--clusters", str(cluster), "--mixes", "M-1",
            "--policies", "hadar", "--rounds", "360", "--workers", "1", "--out", str(out),
            cwd=tmp_path,
        )
    )  # fmt: skip
    assert f"holds the input {cluster}" in line and "--clusters" in line
    assert cluster.read_bytes() == before and sorted(out.iterdir()) == [cluster]


def test_estimate_error_refuses_an_out_holding_its_throughputs(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    table = out / "estimate_error.json"
    shutil.copyfile(GAVEL_TABLE, table)
    before = table.read_bytes()
    line = refused(
        hadar_cli("estimate-error", "--throughputs", str(table), "--out", str(out), cwd=tmp_path)
    )
    assert f"holds the input {table} (--throughputs)" in line
    assert table.read_bytes() == before


def test_export_gavel_refuses_to_write_its_trace_over_an_input(tmp_path: Path) -> None:
    table = tmp_path / "tp.json"
    shutil.copyfile(GAVEL_TABLE, table)
    before = table.read_bytes()
    line = refused(
        hadar_cli(
            "export-gavel", "--workload", "philly-3", "--throughputs", str(table),
            "--out", str(table), cwd=tmp_path,
        )
    )  # fmt: skip
    assert "is the input" in line and "(--throughputs)" in line
    assert table.read_bytes() == before


@pytest.mark.parametrize(
    "argv",
    [
        ["export-gavel", "--workload", "philly-3", "--out", "dang/x.trace"],
        [
            "node-stream",
            "generate",
            "--cluster",
            "aws-5node",
            "--duration",
            "1h",
            "-o",
            "dang/x.csv",
        ],
        ["simulate", "--workload", "philly-3", "--out", "dang/sub"],
    ],
    ids=["export-gavel", "node-stream", "simulate"],
)
def test_an_output_below_a_dangling_link_is_refused_when_parsed(
    tmp_path: Path, argv: list[str]
) -> None:
    """A ``FileExistsError`` traceback from creating the folder (exit 1), or a line after the
    simulation had started."""
    (tmp_path / "dang").symlink_to(tmp_path / "nothere")
    line = refused(hadar_cli(*argv, cwd=tmp_path))
    assert "dang is a dangling symbolic link" in line, line
    assert not (tmp_path / "nothere").exists()


def test_from_slurm_refuses_a_log_that_expands_beyond_what_it_reads(tmp_path: Path) -> None:
    """A 2 kB log of host ranges took 21 s and 2 GB writing a 93 MB stream."""
    rows = ["Timestamp|NodeName|State"]
    rows += [
        f"2024-01-01T00:{minute:02d}:00|n[1-100000]|{'allocated' if minute % 2 else 'idle'}"
        for minute in range(30)
    ]
    (tmp_path / "slurm.log").write_text("\n".join(rows) + "\n")
    line = refused(hadar_cli("node-stream", "from-slurm", "slurm.log", "-o", "s.csv", cwd=tmp_path))
    assert "slurm.log: line 22, field NodeName: the log expands to more than 2,000,000" in line
    assert not (tmp_path / "s.csv").exists()


def test_fit_report_refuses_a_new_csv_inside_its_traces(tmp_path: Path) -> None:
    """A new ``validation-64.csv`` there was written, then read as a trace and refused."""
    shutil.copytree(CIFAR10, tmp_path / "traces" / "cifar10")
    line = refused(
        hadar_cli(
            "fit-report", "--traces", "traces", "--csv", "traces/cifar10/validation-64.csv",
            cwd=tmp_path,
        )
    )  # fmt: skip
    assert "is inside the --traces folder traces" in line
    assert not (tmp_path / "traces" / "cifar10" / "validation-64.csv").exists()


@pytest.mark.parametrize(
    "column, value, problem",
    [
        ("local_bsz", "1e308", "row[2].local_bsz: must be a number > 0 of at most 1e+30 in size"),
        ("placement", "1.5", "row[2].placement: per-node GPU counts 1-9 (got '1.5')"),
    ],
)
def test_fit_report_refuses_trace_values_it_cannot_fit(
    tmp_path: Path, column: str, value: str, problem: str
) -> None:
    """A local batch of 1e308 overflowed into an infinite error; a placement of 1.5 was 1."""
    app = tmp_path / "cifar10"
    shutil.copytree(CIFAR10, app)
    with (app / "placements.csv").open(newline="") as f:
        rows = list(csv.reader(f))
    rows[3][rows[0].index(column)] = value
    with (app / "placements.csv").open("w", newline="") as f:
        csv.writer(f).writerows(rows)
    line = refused(hadar_cli("fit-report", "--traces", str(app), cwd=tmp_path))
    assert problem in line, line


def test_compare_names_an_earlier_comparisons_folders_it_leaves(tmp_path: Path) -> None:
    """``note: replacing the results`` read as if every earlier result was gone."""
    from hadar.commands.compare import earlier_results_note

    out = tmp_path / "D"
    for name in ("hadar", "tiresias", "gavel", "notes"):
        (out / name).mkdir(parents=True)
    (out / "sia").symlink_to(tmp_path)
    note = earlier_results_note(out, ["gavel"])
    assert note == (
        f"note: {out}/hadar/, {out}/tiresias/ hold an earlier comparison's results (policies "
        "not in --policies); they are left as they are"
    )
    assert earlier_results_note(out, ["gavel", "hadar", "tiresias"]) is None
    assert earlier_results_note(tmp_path / "missing", ["gavel"]) is None


@pytest.mark.parametrize(
    "inside", ["goodput/data/pollux/traces/ncf", "estimators/data", "hadar/core/new-folder"]
)
def test_an_out_inside_the_projects_own_packages_is_refused(tmp_path: Path, inside: str) -> None:
    """Results replace files in ``--out``: in the bundled Pollux traces they replaced
    ``placements.csv``, and every later ``fit-report`` and ``reproduce pollux`` failed."""
    import goodput

    root = Path(goodput.__file__).resolve().parent.parent
    target = root / inside
    before = sorted(p.name for p in target.iterdir()) if target.is_dir() else None
    res = hadar_cli("simulate", "--workload", "philly-10", "--out", str(target), cwd=tmp_path)
    line = refused(res)
    assert "inside hadar's own package folder" in line
    after = sorted(p.name for p in target.iterdir()) if target.is_dir() else None
    assert after == before
