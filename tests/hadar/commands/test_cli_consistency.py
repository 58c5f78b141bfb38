"""One flag and one default per concept across sub-commands, the old spellings still working,
defaults in --help, --policy choices, fresh output directories, --debug/--log-level, and the
CLI reference (docs/cli.md, the README's commands) checked against the parser."""

from __future__ import annotations

import argparse
import json
import logging
import re
from pathlib import Path

import pytest

from hadar.cli import build_parser, main, sub_parsers
from hadar.cli_reference import REFERENCE, render, unknown_flags, visible_options
from hadar.commands.options import output_dir, shows_default
from hadar.policy import POLICY_REGISTRY

ROOT = Path(__file__).resolve().parents[3]
PARSER = build_parser()


def _command(*path: str) -> argparse.ArgumentParser:
    return next(p for p in sub_parsers(PARSER) if p.prog == " ".join(("hadar", *path)))


def _option(parser: argparse.ArgumentParser, flag: str) -> argparse.Action:
    return next(a for a in parser._actions if flag in a.option_strings)


def _visible_flags(parser: argparse.ArgumentParser) -> set[str]:
    return {s for a in visible_options(parser) for s in a.option_strings}


def test_docs_cli_md_is_generated_from_the_parser():
    assert REFERENCE.read_text() == render(), (
        "docs/cli.md is stale: run python -m hadar.cli_reference --write"
    )
    assert "| `--round` `SECONDS` | `360.0` |" in REFERENCE.read_text()


@pytest.mark.parametrize(
    "doc", ["README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))]
)
def test_commands_quoted_in_the_docs_use_flags_the_parser_knows(doc):
    assert unknown_flags((ROOT / doc).read_text(), PARSER) == []


def test_the_docs_check_catches_a_stale_or_unknown_flag():
    text = "Run `hadar run --slot 30 --out R` or\n```\nhadar compare --jobs 2 --bogus\nhadar simulate --round 60\n```\n"
    assert unknown_flags(text, PARSER) == [
        "line 1: hadar run: --slot",
        "line 3: hadar compare: --jobs",
        "line 3: hadar compare: --bogus",
    ]
    assert unknown_flags("`hadar cluster up/down --config C -y`", PARSER) == []
    assert unknown_flags("`hadar cluster up/status --yes`", PARSER) == [
        "line 1: hadar cluster up/status: --yes"
    ]


ROUND_COMMANDS = [("simulate",), ("compare",), ("run",), ("experiment", "load-sweep")]
SIMULATED = [("simulate",), ("compare",), ("experiment", "load-sweep"), ("experiment", "physical")]


@pytest.mark.parametrize("path", ROUND_COMMANDS)
def test_round_length_is_round_everywhere(path):
    parser = _command(*path)
    assert _option(parser, "--round").dest == "round_s"
    assert not {"--slot", "--slots", "--round-length"} & _visible_flags(parser)


def test_simulated_commands_share_round_restart_penalty_and_size_defaults():
    assert {_option(_command(*p), "--round").default for p in ROUND_COMMANDS if p != ("run",)} == {
        360.0
    }
    assert {_option(_command(*p), "--restart-penalty").default for p in SIMULATED} == {10.0}
    assert {_option(_command(*p), "--size").default for p in [("simulate",), ("compare",)]} == {
        "paper"
    }
    # real training keeps its own defaults, and says so next to the simulator's
    run = _command("run")
    assert (_option(run, "--round").default, _option(run, "--size").default) == (30.0, "tiny")
    assert (
        "360" in _option(run, "--round").help
        and "simulator" in _option(run, "--restart-penalty").help
    )


@pytest.mark.parametrize(
    "path", [("compare",), ("experiment", "physical"), ("experiment", "load-sweep")]
)
def test_process_counts_are_workers(path):
    parser = _command(*path)
    assert "--workers" in _visible_flags(parser) and "--jobs" not in _visible_flags(parser)


@pytest.mark.parametrize(
    ("argv", "dest", "value", "new"),
    [
        (["run", "--slot", "12"], "round_s", 12.0, "--round"),
        (["compare", "--jobs", "2"], "workers", 2, "--workers"),
        (["experiment", "physical", "--jobs", "3"], "workers", 3, "--workers"),
        (["experiment", "physical", "--slots", "180,360"], "rounds", "180,360", "--rounds"),
        (["experiment", "physical", "--main-slot", "180"], "main_round", "180", "--main-round"),
    ],
)
def test_old_spellings_still_work_and_say_what_replaces_them(argv, dest, value, new, capsys):
    args = build_parser().parse_args(argv)
    assert getattr(args, dest) == value
    # said once the command ran (hadar.cli), or inside its one error line
    assert args.deprecated == [f"{argv[-2]} is deprecated, use {new}"]
    assert capsys.readouterr().err == ""


def test_old_spellings_are_hidden_from_help():
    assert "--slot " not in _command("run").format_help()
    assert "--jobs" not in _command("compare").format_help()


def test_every_option_has_help_and_shows_its_default():
    for parser in sub_parsers(PARSER):
        text = re.sub(
            r"-\s+", "-", " ".join(parser.format_help().split())
        )  # undo wrapping at hyphens
        for action in parser._actions:
            if not action.option_strings or action.help == argparse.SUPPRESS:
                continue
            assert action.help, f"{parser.prog} {action.option_strings[0]}: no help"
            if shows_default(action):
                assert f"default: {action.default}" in text, (
                    f"{parser.prog} {action.option_strings[0]}"
                )


@pytest.mark.parametrize("path", [("simulate",), ("run",)])
def test_policy_lists_its_choices_and_rejects_others_in_one_line(path, capsys):
    # Whitespace dropped: argparse may wrap the list at a hyphen ("gavel-" / "makespan").
    help_text = "".join(_command(*path).format_help().split())
    names = sorted(POLICY_REGISTRY)
    assert {"gavel", "hadar", "hadare", "tiresias", "yarn-cs"} <= set(names)
    assert "oneof" + ",".join(names) in help_text
    assert main([*path, "--policy", "slurm"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "invalid choice: 'slurm'" in err[0] and "'hadare'" in err[0]


def test_usage_errors_are_one_line(capsys):
    assert main(["simulate", "--round", "-5"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "hadar: error: simulate: argument --round: must be a finite number of seconds in [1, 604800] "
        "(got '-5') (see: hadar simulate --help)"
    ]


def test_output_dir_is_fresh_unless_given(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    first, note = output_dir(None, "simulate", now=0)
    assert note is None and first.parent == Path("out") and first.name.startswith("simulate-")
    first.mkdir(parents=True)
    second, _ = output_dir(None, "simulate", now=0)
    assert second == first.with_name(first.name + "-2")
    given, note = output_dir(str(first), "simulate")
    assert given == first and note is None  # empty: nothing replaced
    (first / "summary.json").write_text("{}")
    assert output_dir(str(first), "simulate")[1] == f"note: replacing the results in {first}/"


def test_simulate_never_lands_on_an_earlier_run(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    argv = ["simulate", "--workload", "philly-6", "--no-progress"]
    assert main(argv) == 0 and main([*argv, "--seed", "1"]) == 0
    runs = sorted((tmp_path / "out").iterdir())
    assert len(runs) == 2 and all(r.name.startswith("simulate-") for r in runs)
    assert [json.loads((r / "summary.json").read_text())["jobs"] for r in runs] == [6, 6]
    capsys.readouterr()
    assert main([*argv, "--out", str(runs[0])]) == 0
    assert f"note: replacing the results in {runs[0]}/" in capsys.readouterr().err


def test_debug_shows_the_traceback_behind_a_one_line_error(tmp_path, capsys):
    argv = ["simulate", "--cluster", str(tmp_path / "nosuch.yaml"), "--out", str(tmp_path / "o")]
    assert main(argv) == 2
    plain = capsys.readouterr().err.strip().splitlines()
    assert len(plain) == 1 and "nosuch.yaml" in plain[0]
    for debug_argv in ([*argv, "--debug"], ["--debug", *argv]):
        assert main(debug_argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert err[0] == "Traceback (most recent call last):" and err[-1] == plain[0]


def test_log_level_sets_the_root_logger(tmp_path):
    argv = ["simulate", "--workload", "philly-4", "--no-progress", "--out", str(tmp_path / "o")]
    try:
        assert main([*argv, "--log-level", "INFO"]) == 0
        assert logging.getLogger().level == logging.INFO
        assert main(argv) == 0
        assert logging.getLogger().level == logging.WARNING
    finally:
        logging.getLogger().setLevel(logging.WARNING)
