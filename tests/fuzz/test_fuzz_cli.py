"""Fuzz the CLI's input boundary: generated files and argument vectors, valid and broken, run
through ``hadar.cli.main`` in this process. Whatever the input: exit code 0, 2 or 3 (compare
also 7, some policies failed); on non-zero one stderr line and no traceback; no hang (see
cli_case.py). Profiles: conftest.py."""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path

from hypothesis import assume, given
from hypothesis import strategies as st

from tests.fuzz import strategies as fz
from tests.fuzz.cli_case import fuzz_settings, run_cli

SMALL_CLUSTER = (
    "name: fuzz\nnodes:\n  - {name: a, gpus: {v100: 2, k80: 2}}\n  - {name: b, gpus: {p100: 4}}\n"
)
SMALL_JOBS = "id,type,gpus,steps\n0,ResNet-18 (batch size 64),1,5000\n1,LM (batch size 20),2,3000\n"
POLICIES = ("hadar", "hadare", "gavel", "tiresias", "yarn-cs")


class Scratch:
    """A temporary directory with the small valid cluster and job list written in it."""

    def __init__(self) -> None:
        self._dir = tempfile.TemporaryDirectory(prefix="hadar-fuzz-")
        self.path = Path(self._dir.name)
        self.cluster = self.write("cluster.yaml", SMALL_CLUSTER.encode())
        self.jobs = self.write("jobs.csv", SMALL_JOBS.encode())
        self.out = str(self.path / "out")

    def write(self, name: str, data: bytes) -> str:
        p = self.path / name
        p.write_bytes(data)
        return str(p)

    def __enter__(self) -> Scratch:
        return self

    def __exit__(self, *exc: object) -> None:
        self._dir.cleanup()


def simulate(s: Scratch, *extra: str, policy: str = "hadar") -> list[str]:
    return [
        "simulate",
        "--cluster",
        s.cluster,
        "--workload",
        s.jobs,
        "--policy",
        policy,
        "--out",
        s.out,
        "--no-progress",
        *extra,
    ]


@fuzz_settings()
@given(data=fz.cluster_file(), policy=st.sampled_from(POLICIES))
def test_cluster_files(data: bytes, policy: str) -> None:
    with Scratch() as s:
        s.cluster = s.write("c.yaml", data)
        outcome = run_cli(simulate(s, policy=policy))
        if outcome.code == 0:
            assert json.loads((Path(s.out) / "summary.json").read_text())["completed"] == 2


@fuzz_settings()
@given(suffixed=fz.job_list_file(), policy=st.sampled_from(POLICIES))
def test_job_lists(suffixed: tuple[str, bytes], policy: str) -> None:
    suffix, data = suffixed
    with Scratch() as s:
        s.jobs = s.write("jobs" + suffix, data)
        outcome = run_cli(simulate(s, policy=policy))
        if outcome.code == 0:
            summary = json.loads((Path(s.out) / "summary.json").read_text())
            assert summary["completed"] == summary["jobs"] > 0


@fuzz_settings()
@given(data=fz.gavel_trace_file(), export=st.booleans())
def test_gavel_traces(data: bytes, export: bool) -> None:
    with Scratch() as s:
        trace = s.write("jobs.trace", data)
        if export:
            target = str(s.path / "again.trace")
            outcome = run_cli(["export-gavel", "--workload", trace, "--out", target])
            if outcome.code == 0:  # what was read is written back line for line
                assert len(Path(target).read_text().splitlines()) == len(
                    [ln for ln in data.decode().splitlines() if ln.strip()]
                )
        else:
            s.jobs = trace
            run_cli(simulate(s))


@fuzz_settings()
@given(data=fz.throughput_file(), command=st.sampled_from(["simulate", "estimate-error"]))
def test_throughput_tables(data: bytes, command: str) -> None:
    with Scratch() as s:
        table = s.write("tp.json", data)
        if command == "simulate":
            run_cli(simulate(s, "--throughputs", table))
        else:
            run_cli(["estimate-error", "--throughputs", table, "--holdout", "job"])


@fuzz_settings()
@given(
    flag=st.sampled_from(fz.SECONDS_FLAGS),
    value=fz.seconds_value(),
    seed=fz.number_text(st.integers(0, 5)),
    policy=st.sampled_from(POLICIES),
)
def test_simulate_numbers(flag: str, value: str, seed: str, policy: str) -> None:
    with Scratch() as s:
        run_cli(simulate(s, f"{flag}={value}", f"--seed={seed}", policy=policy))


OUT_TARGETS = ("existing-file", "file-as-parent", "missing-parents", "dir", "empty", "proc")


def _out_path(s: Scratch, kind: str) -> str:
    if kind == "existing-file":
        return s.cluster
    if kind == "file-as-parent":
        return s.cluster + "/sub/out"
    if kind == "missing-parents":
        return str(s.path / "a" / "b" / "c")
    if kind == "dir":
        return str(s.path)
    if kind == "proc":
        return "/proc/hadar-fuzz/out"
    return ""


@fuzz_settings()
@given(
    kind=st.sampled_from(OUT_TARGETS),
    command=st.sampled_from(["simulate", "export-gavel", "estimate-error"]),
)
def test_out_paths_are_checked_before_any_work(kind: str, command: str) -> None:
    with Scratch() as s:
        out = _out_path(s, kind)
        argv = {
            "simulate": simulate(s)[:-3] + ["--out", out, "--no-progress"],
            "export-gavel": ["export-gavel", "--workload", s.jobs, "--out", out],
            "estimate-error": ["estimate-error", "--holdout", "job", "--out", out],
        }[command]
        outcome = run_cli(argv)
        wants_file = command == "export-gavel"
        bad = (
            kind in ("file-as-parent", "empty", "proc")
            or kind == ("dir" if wants_file else "existing-file")
            # the scratch folder holds simulate's inputs, which its results would replace
            or (kind == "dir" and command == "simulate")
        )
        assert (outcome.code == 2) == bad, outcome
        if bad:
            assert "--out" in outcome.stderr


# Flags whose values are numbers, per command (the run/nodes/cluster commands are only given
# vectors that must fail while parsing: a valid one would train, probe hosts or call AWS).
NUMBER_FLAGS = {
    "run": (
        "--round",
        "--grace",
        "--seed",
        "--threads",
        "--restart-penalty",
        "--aggregation-overhead",
    ),
    "nodes check": ("--timeout",),
    "cluster up": ("--ssh-wait-timeout",),
    "compare": ("--round", "--restart-penalty", "--horizon", "--seed", "--workers", "--jobs"),
    "experiment load-sweep": ("--round", "--restart-penalty", "--num-jobs", "--workers"),
    "simulate": ("--round", "--restart-penalty", "--horizon", "--seed"),
    "export-gavel": ("--seed",),
}
BROKEN_NUMBERS = st.sampled_from(
    fz.NON_FINITE + ("1e30", "-1", "x", "", "10000000000000000000000", "0x1", "1,5")
)
"""Values every flag of NUMBER_FLAGS refuses (each has a finite range and a lower bound >= 0)."""


@fuzz_settings()
@given(command=st.sampled_from(sorted(NUMBER_FLAGS)), data=st.data())
def test_broken_numbers_fail_while_parsing(command: str, data: st.DataObject) -> None:
    flag = data.draw(st.sampled_from(NUMBER_FLAGS[command]))
    value = data.draw(BROKEN_NUMBERS)
    with Scratch() as s:
        required = {
            "nodes check": ["--cluster", s.cluster],
            "cluster up": ["--config", s.cluster],
            "export-gavel": ["--out", str(s.path / "t.trace")],
        }.get(command, [])
        outcome = run_cli([*command.split(), f"{flag}={value}", *required])
        assert outcome.code == 2, outcome
        # argparse names an option by all its spellings: "argument --workers/--jobs: must be ..."
        assert re.search(rf"argument (--[\w-]+/)*{flag}(/--[\w-]+)*: must be", outcome.stderr), (
            outcome
        )
        assert not Path(s.out).exists()


TOKENS = (
    "--round",
    "--restart-penalty",
    "--horizon",
    "--seed",
    "--policy",
    "--workload",
    "--cluster",
    "--out",
    "--no-progress",
    "--gavel-compatible",
    "--throughputs",
    "--policies",
    "--workers",
    "--decision-sizes",
    "--bogus",
    "-h",
    "-",
    "--",
    "=",
    "360",
    "0",
    "nan",
    "inf",
    "-1",
    "1e30",
    "hadar",
    "gavel",
    "philly-3",
    "M-1",
    "M-99",
    "philly-999999999",
    "x",
    "",
    "\x00",
    "é",
    "--round=",
    "--seed=1.5",
)


@fuzz_settings()
@given(
    command=st.sampled_from(
        [
            "simulate",
            "compare",
            "export-gavel",
            "estimate-error",
            "report",
            "nodes",
            "cluster",
            "experiment",
            "bogus",
            "",
        ]
    ),
    tokens=st.lists(st.sampled_from(TOKENS) | st.text(max_size=6), max_size=8),
)
def test_random_argument_vectors(command: str, tokens: list[str]) -> None:
    """Any vector: the contract holds. Work a valid vector would start is kept small: the small
    cluster and job list come first (later tokens may override them with small workloads only),
    compare runs in this process on tiny decision sizes."""
    with Scratch() as s:
        if command in ("simulate", "compare"):
            head = [command, "--cluster", s.cluster, "--workload", s.jobs, "--out", s.out]
            head += (
                ["--workers", "1", "--decision-sizes", "2", "--policies", "hadar,yarn-cs"]
                if command == "compare"
                else ["--no-progress"]
            )
        elif command == "export-gavel":
            head = [command, "--workload", s.jobs, "--out", str(s.path / "t.trace")]
        elif command == "experiment":
            head = [
                command,
                "physical",
                "--clusters",
                "nosuch",
            ]  # fails on its inputs, before simulating
        elif command in ("nodes", "cluster"):
            head = [command]  # no action: always a usage error
        else:
            head = [command] if command else []
        argv = head + tokens
        # keep a valid vector from starting heavy work: no parallel processes, no node actions
        assume(
            command not in ("nodes", "cluster")
            or not tokens
            or tokens[0] not in ("check", "up", "down", "status")
        )
        assume("--workers" not in tokens)
        if command == "report":
            argv = ["report", str(s.path / "no-run"), *tokens]
        run_cli(argv)
