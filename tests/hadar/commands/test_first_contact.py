"""What a new user types first: ``--version``, bare ``hadar``, and typos that get a "did you
mean" naming the closest command, flag, policy, workload or bundled cluster."""

from __future__ import annotations

import pytest

from hadar import __version__
from hadar.cli import main
from hadar.core.cluster_config import bundled_cluster_names
from hadar.policy_options import parse_pairs


def _error(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    assert main(list(argv)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


def test_version_and_bare_hadar(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"hadar {__version__}"
    assert main([]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: hadar") and "simulate" in out and "--version" in out


@pytest.mark.parametrize(
    ("argv", "hint"),
    [
        (["simulat"], "did you mean 'simulate'?"),
        (["nodes", "chek"], "did you mean 'check'?"),
        (["simulate", "--polcy", "hadar"], "did you mean '--policy'"),
        (["simulate", "--policy", "hadr"], "did you mean 'hadar' or 'hadare'?"),
        (["simulate", "--workload", "phily-480"], "did you mean 'philly-480'"),
        (["simulate", "--workload", "M3"], "did you mean 'M-3'"),
        (["simulate", "--workload", "phily-20"], "did you mean 'philly-20'"),
        (["compare", "--policies", "hadar,gavle"], "did you mean 'gavel'"),
        (["experiment", "physical", "--policies", "hadar,gavle"], "did you mean 'gavel'"),
        (["simulate", "--policy-opt", "utilty=sigmoid"], "did you mean 'utility'"),
        (
            ["compare", "--policies", "hadar,gavel", "--policy-opt", "hadar:max_rh=2"],
            "did you mean 'max_rho'",
        ),
    ],
)
def test_typos_name_the_closest_valid_spelling(
    capsys: pytest.CaptureFixture[str], argv: list[str], hint: str
) -> None:
    assert hint in _error(capsys, *argv)


def test_an_unknown_cluster_lists_the_bundled_names(capsys: pytest.CaptureFixture[str]) -> None:
    line = _error(capsys, "simulate", "--cluster", "sim-60gpus", "--workload", "philly-8")
    assert line.startswith(
        "hadar: error: sim-60gpus: cluster file not found; did you mean 'sim-60gpu'"
    )
    names = bundled_cluster_names()
    assert "sim-60gpu" in names and "local-3node" in names
    assert f"(bundled clusters: {', '.join(names)};" in line
    # nothing close: no hint, the list still
    far = _error(capsys, "simulate", "--cluster", "zzzz.yaml", "--workload", "philly-8")
    assert "did you mean" not in far and "bundled clusters: " in far


def test_a_linked_run_json_is_refused_not_followed(
    capsys: pytest.CaptureFixture[str], tmp_path
) -> None:
    """A run never makes a link in its folder: report and resume refuse one, unread."""
    pytest.importorskip("torch")
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text("not json, and not the run's")
    rundir = tmp_path / "run"
    rundir.mkdir()
    (rundir / "run.json").symlink_to(elsewhere)
    want = (
        f"hadar: error: {rundir / 'run.json'}: a symbolic link in run directory {rundir}, which "
        "hadar never creates; remove it (hadar does not follow links in a run directory)"
    )
    assert _error(capsys, "report", str(rundir)) == want
    assert _error(capsys, "run", "--resume", str(rundir)) == want
    assert elsewhere.read_text() == "not json, and not the run's"


def test_report_of_a_missing_run_says_what_a_run_directory_is(
    capsys: pytest.CaptureFixture[str], tmp_path
) -> None:
    pytest.importorskip("torch")
    line = _error(capsys, "report", str(tmp_path / "none"))
    assert "not a run directory (no run.json); give the --out directory of a hadar run" in line
    assert "--resume" not in line


def test_help_gaps_are_filled(capsys: pytest.CaptureFixture[str]) -> None:
    for argv, wanted in (
        (["cluster", "status", "--help"], "List the EC2 instances tagged"),
        (["report", "--help"], "a run directory written by hadar run"),
        (["simulate", "--help"], "Gavel .trace"),
    ):
        assert main(argv) == 0
        assert wanted in " ".join(capsys.readouterr().out.split())


def test_each_command_parses_alone_as_in_the_whole_parser() -> None:
    """``hadar simulate ...`` builds a parser with only its own sub-command (fewer imports):
    :data:`hadar.cli.COMMANDS` names every sub-command, and each lone parser has the same
    options as in the whole one."""
    from hadar.cli import COMMANDS, build_parser, sub_parsers

    whole = {p.prog: p for p in sub_parsers(build_parser())}
    top = {prog.split()[1] for prog in whole}
    assert top == set(COMMANDS)
    for command in COMMANDS:
        for p in sub_parsers(build_parser(command)):
            if p.prog.split()[1] == command:
                mine = sorted(o for a in p._actions for o in a.option_strings)
                assert mine == sorted(o for a in whole[p.prog]._actions for o in a.option_strings)


def test_simulate_without_figures_imports_no_matplotlib(tmp_path) -> None:
    import subprocess
    import sys

    code = (
        "import sys; from hadar.cli import main; "
        f"rc = main(['simulate', '--workload', 'philly-8', '--no-progress', '--out', {str(tmp_path / 'o')!r}]); "
        "print(rc, 'matplotlib' in sys.modules, 'hadar.experiments' in sys.modules)"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.stdout.strip().splitlines()[-1] == "0 False False", res.stderr
    assert not list((tmp_path / "o").glob("*.png"))


def test_a_numbered_workload_typo_keeps_its_number(capsys: pytest.CaptureFixture[str]) -> None:
    line = _error(capsys, "simulate", "--workload", "phily-20")
    assert "philly-480" not in line


def test_simulate_reads_the_policy_prefix_compare_needs(
    capsys: pytest.CaptureFixture[str], tmp_path
) -> None:
    """``--policy-opt hadar:utility=sigmoid`` (as ``hadar compare`` takes it) works in
    ``simulate`` for its policy; another policy's prefix is refused naming both."""
    out = tmp_path / "o"
    argv = ["simulate", "--workload", "philly-4", "--no-progress", "--out", str(out)]
    assert parse_pairs(["hadar:utility=sigmoid", "max_rho=2"], policy="hadar") == {
        "utility": "sigmoid",
        "max_rho": "2",
    }
    assert main([*argv, "--policy-opt", "hadar:utility=sigmoid"]) == 0
    capsys.readouterr()
    assert (out / "summary.json").is_file()
    line = _error(capsys, *argv, "--policy-opt", "gavel:x=1")
    assert line == (
        "hadar: error: --policy-opt: 'gavel:x=1' is for policy 'gavel', but --policy is 'hadar' "
        "(write x=1 or hadar:x=1)"
    )


def test_help_shows_percent_signs_once_and_every_command_says_what_it_does(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from hadar.cli import build_parser, sub_parsers
    from hadar.cli_reference import REFERENCE

    assert main(["node-stream", "generate", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "(58 % under 10 minutes holding 10 % of the idle node-time)" in text
    for p in sub_parsers(build_parser()):
        assert "%%" not in p.format_help(), p.prog
        if not any(a.__class__.__name__ == "_SubParsersAction" for a in p._actions):
            assert p.description, f"{p.prog} has no description"
    assert "%%" not in REFERENCE.read_text()
    assert main(["node-stream", "stats", "--help"]) == 0
    assert "join and leave events per hour" in " ".join(capsys.readouterr().out.split())


def test_status_counts_one_run_as_one_run(capsys: pytest.CaptureFixture[str], tmp_path) -> None:
    (tmp_path / "r1").mkdir()
    (tmp_path / "r1" / "run.json").write_text("{}")
    assert main(["status", str(tmp_path / "r1")]) == 0
    out = capsys.readouterr().out
    assert "1 run\n" in out and "1 runs" not in out
    (tmp_path / "r2").mkdir()
    (tmp_path / "r2" / "run.json").write_text("{}")
    assert main(["status", str(tmp_path / "r1"), str(tmp_path / "r2")]) == 0
    assert "2 runs" in capsys.readouterr().out
