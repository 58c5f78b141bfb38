"""Bad input through the real CLI: one line naming file and field, exit code 2, no traceback."""

import sys
from pathlib import Path

import pytest

from tests.fixtures.processes import run_group

GOOD_CLUSTER = "name: c\nnodes:\n  - {name: a, gpus: {v100: 4}}\n"


def run_cli(*args, cwd=None):
    return run_group([sys.executable, "-m", "hadar", *args], cwd=cwd, timeout=120)


def assert_one_line_error(proc, *needles):
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr
    for n in needles:
        assert n in lines[0], lines[0]


@pytest.mark.parametrize(
    "cluster_yaml, needles",
    [
        ("name: c\nnodes: [\n", ["malformed YAML", "line"]),
        ("name: c\x01\nnodes: []\n", ["malformed YAML", "unacceptable character #x0001"]),
        ("name: c\nnodes:\n  - {name: a}\n", ["nodes[0].gpus", "missing"]),
        (
            "name: c\nnodes:\n  - {name: a, gpus: {v200: 4}}\n",
            ["nodes[0].gpus", "unknown GPU type 'v200'"],
        ),
        ("name: c\nnodes:\n  - {name: a, gpus: {v100: 0}}\n", ["nodes[0].gpus", "positive"]),
        ("name: c\nnodes:\n  - {name: a, gpus: {v100: -2}}\n", ["nodes[0].gpus", "positive"]),
        (
            "name: c\nnodes:\n  - {name: a, count: -1, gpus: {v100: 1}}\n",
            ["nodes[0].count", "positive"],
        ),
        ("nodes:\n  - {name: a, gpus: {v100: 1}}\n", ["name", "missing"]),
        ("name: c\nnodes:\n  - {name: a, gpu: {v100: 1}}\n", ["nodes[0].gpu", "unknown field"]),
        # transport keys: a simulated cluster takes any provider's, checked with its schema
        (
            "name: c\nnodes:\n  - {name: a, gpus: {v100: 1}, adress: h}\n",
            ["nodes[0].adress", "unknown field"],
        ),
        (
            "name: c\nnodes:\n  - {name: a, gpus: {v100: 1}, speedfactor: 0.5}\n",
            ["nodes[0].speedfactor", "unknown field"],
        ),
        (
            "name: c\nnodes:\n  - {name: a, gpus: {v100: 1}, port: 70000}\n",
            ["nodes[a].port", "less than or equal to 65535", "70000"],
        ),
    ],
)
def test_bad_cluster_files(tmp_path: Path, cluster_yaml, needles):
    f = tmp_path / "cluster.yaml"
    f.write_text(cluster_yaml)
    proc = run_cli(
        "simulate", "--cluster", str(f), "--workload", "philly-5", "--out", str(tmp_path / "o")
    )
    assert_one_line_error(proc, str(f), *needles)
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    "jobs_csv, needles",
    [
        (
            "id,type,gpus,steps\n0,ResNet-18 (batch size 64),16,100\n",
            ["job 0", "needs 16 GPUs", "has 4"],
        ),
        ("id,type,gpus,steps\n0,NoSuchNet,1,100\n", ["job 0", "unknown job type 'NoSuchNet'"]),
        ("id,type,gpus,steps\n0,ResNet-18 (batch size 64),0,100\n", ["row[0].gpus"]),
        ("id,type,gpus,steps\n0,ResNet-18 (batch size 64),1,-5\n", ["row[0].steps"]),
        ("id,type,steps\n0,ResNet-18 (batch size 64),5\n", ["header", "gpus"]),
        (
            "id,type,gpus,steps\n0,ResNet-18 (batch size 64),3,100\n",
            ["job 0", "no entry for", "3)"],
        ),
        ("id,type,gpus,steps\n0,CycleGAN,4,100\n", ["job 0", "no entry for ('CycleGAN', 4)"]),
    ],
)
def test_bad_workload_files_are_rejected_up_front(tmp_path: Path, jobs_csv, needles):
    c = tmp_path / "cluster.yaml"
    c.write_text(GOOD_CLUSTER)
    w = tmp_path / "jobs.csv"
    w.write_text(jobs_csv)
    proc = run_cli(
        "simulate", "--cluster", str(c), "--workload", str(w), "--out", str(tmp_path / "o")
    )
    assert_one_line_error(proc, *needles)


def test_yaml_workload_and_unknown_policy(tmp_path: Path):
    c = tmp_path / "cluster.yaml"
    c.write_text(GOOD_CLUSTER)
    w = tmp_path / "jobs.yaml"
    w.write_text(
        "jobs:\n  - {id: 1, type: ResNet-18 (batch size 64), gpus: 1, steps: 100, arrval: 3}\n"
    )
    assert_one_line_error(
        run_cli("simulate", "--cluster", str(c), "--workload", str(w)),
        "jobs[0].arrval",
        "unknown field",
    )
    assert_one_line_error(
        run_cli("simulate", "--cluster", str(c), "--policy", "nope"), "--policy", "nope"
    )
    missing = run_cli("simulate", "--cluster", str(tmp_path / "absent.yaml"))
    assert_one_line_error(missing, "absent.yaml", "not found")


def test_a_good_hand_written_workload_runs_and_writes_outputs(tmp_path: Path):
    import json

    c = tmp_path / "cluster.yaml"
    c.write_text(GOOD_CLUSTER)
    w = tmp_path / "jobs.yaml"
    w.write_text(
        "jobs:\n"
        "  - {id: 1, type: ResNet-18 (batch size 64), gpus: 1, steps: 20000}\n"
        "  - {id: 2, type: LM (batch size 20), gpus: 4, steps: 50000, arrival: 100}\n"
    )
    out = tmp_path / "o"
    proc = run_cli(
        "simulate", "--cluster", str(c), "--workload", str(w), "--out", str(out), "--no-progress"
    )
    assert proc.returncode == 0, proc.stderr
    summary = json.loads((out / "summary.json").read_text())
    for key in (
        "policy",
        "jobs",
        "completed",
        "ttd_s",
        "avg_jct_s",
        "median_jct_s",
        "p99_jct_s",
        "max_jct_s",
        "rho_max",
        "gru",
        "avg_decision_s",
        "max_decision_s",
    ):
        assert key in summary
    assert summary["completed"] == 2
    header = (out / "jobs.csv").read_text().splitlines()[0]
    assert header.startswith("id,type,gpus,arrival,start,finish,jct")
    assert (
        (out / "rounds.csv").read_text().splitlines()[0].startswith("round,time,duration,busy_gpus")
    )


@pytest.mark.parametrize(
    "args, needles",
    [
        (["--policy", "p" * 5000], ["argument --policy: invalid choice: 'ppp", "...'"]),
        (["--policy-opt", "k" * 5000 + "=1"], ["--policy-opt: unknown option 'kkk", "...'"]),
        (["--no-such-flag", "v" * 5000], ["unrecognized arguments: --no-such-flag vvv", "..."]),
        (["--policy-opt", "beam=" + "x" * 5000], ["beam: expected an integer (got 'xxx", "...'"]),
        (["--policy-opt", "x" * 5000 + ":beam=1"], ["is for policy 'xxx", "...'"]),
        (["--policy-opt", "y" * 5000], ["--policy-opt: expected KEY=VALUE (got 'yyy", "...'"]),
    ],
    ids=["choice", "policy option", "unrecognized", "option value", "option policy", "no equals"],
)
def test_a_5000_character_value_is_echoed_cut(tmp_path: Path, args, needles):
    proc = run_cli("simulate", "--workload", "philly-5", *args, "--out", str(tmp_path / "o"))
    assert_one_line_error(proc, *needles)
    assert len(proc.stderr) < 1000, proc.stderr
    assert not (tmp_path / "o").exists()


def test_a_dashed_value_after_a_flag_gets_the_equals_hint():
    """argparse reads ``--window -1:5`` as two options: the error says how to write the value."""
    from hadar.cli import UsageError, build_parser

    with pytest.raises(UsageError) as dashed:
        build_parser().parse_args(["experiment", "load-sweep", "--window", "-1:5"])
    assert (
        "argument --window: expected one argument (a value that starts with '-' is written "
        "--window=VALUE)" in str(dashed.value)
    )
    with pytest.raises(UsageError) as missing:  # nothing after the flag: no hint
        build_parser().parse_args(["simulate", "--policy"])
    assert str(missing.value).endswith(
        "argument --policy: expected one argument (see: hadar simulate --help)"
    )


def test_a_5000_character_policy_list_is_echoed_cut(tmp_path: Path):
    proc = run_cli(
        "compare", "--workload", "philly-5", "--policies", "q" * 5000, "--out", str(tmp_path / "o")
    )
    assert_one_line_error(proc, "--policies: unknown policy 'qqq", "...'")
    assert len(proc.stderr) < 1000, proc.stderr
