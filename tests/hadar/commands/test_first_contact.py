"""What a new user types first: ``--version``, bare ``hadar``, and typos that get a "did you
mean" naming the closest command, flag, policy, workload or bundled cluster."""

from __future__ import annotations

import pytest

from hadar import __version__
from hadar.cli import main
from hadar.core.cluster_config import bundled_cluster_names


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
