"""Each class of hostile input issue 14 lists: one line naming file, row and field (or the flag),
exit code 2, no traceback, nothing written."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from estimators.throughput import GavelThroughputTable
from hadar import api
from hadar.cli import main
from hadar.clusters import cluster_from_dict
from hadar.commands import argtypes
from hadar.core.errors import InputError
from hadar.policy import make_policy
from hadar.simulator import SimConfig, simulate
from hadar.simulator.engine import SimulationLimitError
from hadar.workloads.files import jobs_from_records

CLUSTER = "name: c\nnodes:\n  - {name: a, gpus: {v100: 4}}\n"
R18 = "ResNet-18 (batch size 64)"


@pytest.fixture
def scene(tmp_path: Path):
    (tmp_path / "c.yaml").write_text(CLUSTER)
    return tmp_path


def one_line_error(capsys, code: int, *needles: str) -> str:
    assert code == 2
    captured = capsys.readouterr()
    lines = [ln for ln in captured.err.splitlines() if ln.strip()]
    assert len(lines) == 1, captured.err
    assert lines[0].startswith("hadar: error: ") and "Traceback" not in captured.err
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


def simulate_argv(d: Path, *extra: str, workload: str | None = None) -> list[str]:
    return [
        "simulate",
        "--cluster",
        str(d / "c.yaml"),
        "--workload",
        workload or "philly-3",
        "--out",
        str(d / "o"),
        "--no-progress",
        *extra,
    ]


def test_a_cluster_file_that_is_not_text(scene, capsys):
    (scene / "c.yaml").write_bytes(b"name: c\n\x96\xff\x00garbage")
    one_line_error(
        capsys, main(simulate_argv(scene)), "c.yaml: not a UTF-8 text file", "byte 8 is 0x96"
    )
    assert not (scene / "o").exists()


@pytest.mark.parametrize(
    "steps, needles",
    [
        ("inf", ["row[0].steps", "not a finite number", "'inf'"]),
        ("nan", ["row[0].steps", "not a finite number"]),
        ("1e30", ["row[0].steps", "must be an integer <= 1e+12 steps"]),
        ("1e11", ["job 0: cannot finish before", "beyond the horizon of 365.0 days (--horizon)"]),
    ],
)
def test_non_finite_and_absurd_steps(scene, capsys, steps, needles):
    (scene / "jobs.csv").write_text(f"id,type,gpus,steps\n0,{R18},1,{steps}\n")
    one_line_error(capsys, main(simulate_argv(scene, workload=str(scene / "jobs.csv"))), *needles)
    assert not (scene / "o").exists()


@pytest.mark.parametrize(
    "job, needles",
    [
        (f"type: '{R18}', spec: {{batch_size: -5}}", ["jobs[0].spec.batch_size", "(got -5)"]),
        (f"type: '{R18}', spec: {{batch_size: abc}}", ["jobs[0].spec.batch_size", "'abc'"]),
        (f"type: '{R18}', spec: {{batch_size: true}}", ["jobs[0].spec.batch_size", "True"]),
        (f"type: '{R18}', spec: {{batch_size: 1e40}}", ["jobs[0].spec.batch_size"]),
        (f"type: '{R18}', spec: {{batchsize: 64}}", ["jobs[0].spec.batchsize", "unknown field"]),
        (f"type: '{R18}', spec: {{weight_class: huge}}", ["jobs[0].spec.weight_class", "'huge'"]),
        (f"type: '{R18}', spec: {{dataset_class: XXL}}", ["jobs[0].spec.dataset_class", "'XXL'"]),
        ("type: foo, spec: {application: foo}", ["jobs[0].spec.application", "'imagenet'"]),
        (f"type: '{R18}', spec: 5", ["jobs[0].spec: expected a mapping"]),
        (
            f"type: '{R18}', spec: {{application: imagenet}}",
            ["jobs[0].spec.application", "must be the job's type"],
        ),
    ],
)
def test_a_yaml_jobs_spec_keys_the_simulator_reads_are_checked_when_loaded(
    scene, capsys, job, needles
):
    (scene / "jobs.yaml").write_text(f"jobs:\n  - {{id: 0, gpus: 1, steps: 100, {job}}}\n")
    argv = simulate_argv(scene, workload=str(scene / "jobs.yaml"))
    one_line_error(capsys, main(argv), str(scene / "jobs.yaml"), *needles)
    assert not (scene / "o").exists()


def test_every_key_of_a_real_runs_training_spec_loads_for_a_simulation():
    from nodes.spec import JobSpec

    spec = {name: f"value of {name}" for name in JobSpec.model_fields}
    spec["batch_size"] = 64
    job = jobs_from_records([{"id": 0, "type": R18, "gpus": 1, "steps": 10, "spec": spec}], "j")[0]
    assert dict(job.spec) == spec  # kept as written, for `hadar run` to validate


def test_a_job_id_beyond_64_bits(scene, capsys):
    (scene / "jobs.csv").write_text(f"id,type,gpus,steps\n{10**22},{R18},1,100\n")
    one_line_error(
        capsys,
        main(simulate_argv(scene, workload=str(scene / "jobs.csv"))),
        "row[0].id",
        "less than or equal to 9223372036854775807",
    )


def test_a_node_with_a_billion_gpus(scene, capsys):
    (scene / "c.yaml").write_text("name: c\nnodes:\n  - {name: a, gpus: {v100: 1000000000}}\n")
    one_line_error(
        capsys, main(simulate_argv(scene)), "nodes[0].gpus", "at most 1024 GPUs of a type per node"
    )


@pytest.mark.parametrize(
    "yaml_text, needles",
    [
        (
            "name: c\nnodes:\n  - {name: a, count: 1000001, gpus: {v100: 1}}\n",
            ["nodes[0].count", "100,000"],
        ),
        (
            "name: c\nnodes:\n  - {name: a, gpus: {v100: 1}, speed_factor: .nan}\n",
            ["speed_factor", "finite"],
        ),
        (
            "name: c\nnodes:\n  - {name: ../etc, gpus: {v100: 1}}\n",
            ["nodes[0].name", "letters, digits"],
        ),
        ("name: c\nnodes: " + "[" * 5000 + "]" * 5000 + "\n", ["c.yaml"]),
    ],
)
def test_other_cluster_magnitudes(scene, capsys, yaml_text, needles):
    (scene / "c.yaml").write_text(yaml_text)
    one_line_error(capsys, main(simulate_argv(scene)), *needles)


def test_a_nan_throughput(scene, capsys):
    (scene / "tp.json").write_text('{"v100": {"(\'' + R18 + '\', 1)": {"null": NaN}}}')
    one_line_error(
        capsys,
        main(simulate_argv(scene, "--throughputs", str(scene / "tp.json"))),
        "tp.json: v100: ('ResNet-18 (batch size 64)', 1): throughput must be finite",
    )


def test_a_denormal_throughput_is_refused():
    with pytest.raises(Exception, match=r"0 or within \[1e-06, 1e\+09\] steps/s"):
        GavelThroughputTable.from_json({"v100": {f"('{R18}', 1)": {"null": 5e-324}}}, "t.json")


@pytest.mark.parametrize(
    "flag, value, needle",
    [
        (
            "--round",
            "nan",
            "argument --round: must be a finite number of seconds in [1, 604800] (got 'nan')",
        ),
        (
            "--restart-penalty",
            "inf",
            "argument --restart-penalty: must be a finite number of seconds in [0, 86400]",
        ),
        (
            "--seed",
            "-1",
            "argument --seed: must be a whole number in [0, 9223372036854775807] (got '-1')",
        ),
        ("--horizon", "1e400d", "argument --horizon: must be a finite number of seconds"),
    ],
)
def test_non_finite_flags_fail_while_parsing(scene, capsys, flag, value, needle):
    one_line_error(capsys, main(simulate_argv(scene, f"{flag}={value}")), "simulate: ", needle)
    assert not (scene / "o").exists()


def test_restart_penalty_must_be_shorter_than_a_round(scene, capsys):
    one_line_error(
        capsys,
        main(simulate_argv(scene, "--round", "60", "--restart-penalty", "60")),
        "--restart-penalty: 60 s must be shorter than a round (--round 60 s)",
    )


def test_gavel_compatible_mode_ignores_the_restart_penalty_as_documented(scene, capsys):
    argv = simulate_argv(scene, "--round", "60", "--restart-penalty", "60", "--gavel-compatible")
    assert main(argv) == 0, capsys.readouterr().err
    summary = json.loads((scene / "o" / "summary.json").read_text())
    assert summary["completed"] == summary["jobs"] == 3
    assert summary["config"]["restart_penalty_s"] == 0


def test_usage_errors_are_one_line(capsys):
    line = one_line_error(capsys, main(["simulate", "--bogus"]), "unrecognized arguments: --bogus")
    assert line.endswith("(see: hadar simulate --help)")
    # bare `hadar` prints the help (tests/hadar/commands/test_first_contact.py)
    assert main([]) == 0
    assert capsys.readouterr().out.startswith("usage: hadar")
    one_line_error(capsys, main(["nodes"]), "nodes: the following arguments are required: ACTION")
    one_line_error(
        capsys, main(["simulate", "--round\n"]), "--round\\n"
    )  # a control character, escaped


@pytest.mark.parametrize(
    "target, needle",
    [
        ("file", "is an existing file, not a directory"),
        ("under-file", "is a file, not a directory"),
        ("proc", "cannot create /proc/hadar-test/out"),
    ],
)
def test_out_is_checked_before_any_work(scene, capsys, target, needle):
    out = {
        "file": str(scene / "c.yaml"),
        "under-file": str(scene / "c.yaml" / "o"),
        "proc": "/proc/hadar-test/out",
    }[target]
    argv = simulate_argv(scene)
    argv[argv.index("--out") + 1] = out
    one_line_error(capsys, main(argv), "argument --out", needle)
    assert (scene / "c.yaml").read_text() == CLUSTER


def test_out_file_for_export_gavel(scene, capsys):
    one_line_error(
        capsys,
        main(["export-gavel", "--workload", "philly-3", "--out", str(scene)]),
        "argument --out",
        "is a directory, not a file",
    )
    assert (
        main(["export-gavel", "--workload", "philly-3", "--out", str(scene / "new" / "t.trace")])
        == 0
    )
    assert len((scene / "new" / "t.trace").read_text().splitlines()) == 3


def test_out_probe_leaves_nothing_behind(tmp_path):
    assert argtypes.out_dir(str(tmp_path / "a" / "b")) == str(tmp_path / "a" / "b")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "text, seconds",
    [
        ("3600", 3600.0),
        ("90m", 5400.0),
        ("36h", 129600.0),
        ("30d", 2592000.0),
        ("1.5h", 5400.0),
        ("2e3 s", 2000.0),
    ],
)
def test_horizon_units(text, seconds):
    assert argtypes.seconds(1, 1e9, units=True)(text) == seconds


@pytest.mark.parametrize("text", ["nan", "inf", "-1d", "0", "1e400", "d", "5x", "", "1e9d"])
def test_horizon_refusals(text):
    with pytest.raises(argparse.ArgumentTypeError, match="finite number of seconds"):
        argtypes.seconds(1, 1e9, units=True)(text)


def test_a_workload_beyond_the_horizon_in_total(scene, capsys):
    rows = "".join(f"{i},{R18},4,2000000\n" for i in range(40))
    (scene / "jobs.csv").write_text("id,type,gpus,steps\n" + rows)
    one_line_error(
        capsys,
        main(simulate_argv(scene, "--horizon", "7d", workload=str(scene / "jobs.csv"))),
        "the 40 jobs need at least",
        "GPU-hours",
        "within the horizon of 7.0 days (--horizon)",
    )


def test_the_python_api_checks_the_horizon_and_the_round_too(scene):
    rows = "".join(f"{i},{R18},4,2000000\n" for i in range(40))
    (scene / "jobs.csv").write_text("id,type,gpus,steps\n" + rows)
    with pytest.raises(InputError, match=r"within the horizon of 7\.0 days"):
        api.simulate(scene / "c.yaml", scene / "jobs.csv", horizon_s=7 * 86400)
    with pytest.raises(InputError, match="must be shorter than a round"):
        api.simulate(scene / "c.yaml", "philly-3", round_s=60, restart_penalty_s=60)
    run = api.simulate(scene / "c.yaml", "philly-3", horizon_s=30 * 86400)
    assert run.summary["completed"] == 3 and run.records.config["horizon_s"] == 30 * 86400


def test_the_round_loop_stops_at_the_horizon():
    """A simulation that reaches its horizon stops with an InputError, not an endless loop."""
    cluster = cluster_from_dict({"name": "c", "nodes": [{"name": "a", "gpus": {"v100": 1}}]})
    jobs = jobs_from_records(
        [{"id": i, "type": R18, "gpus": 1, "steps": 50_000} for i in range(3)], "jobs"
    )
    table = GavelThroughputTable.bundled()
    with pytest.raises(
        SimulationLimitError,
        match=r"stopped at 1\.00 h: 2 of 3 jobs unfinished after the horizon of 1\.00 h",
    ):
        simulate(cluster, jobs, make_policy("hadar"), table, SimConfig(horizon_s=3600))
    result = simulate(cluster, jobs, make_policy("hadar"), table, SimConfig())
    assert all(j.finish is not None for j in result.jobs)
    assert json.loads(json.dumps(result.config))["horizon_s"] == 365 * 86400


def test_a_policy_that_can_never_place_a_job_is_a_one_line_error(scene, capsys):
    """Found by the fuzz suite: a 2-GPU job on a node with one V100 and one P100 fits Hadar (mixed
    types) but never Gavel (one GPU type per job); the simulation stops with exit 2, not 1."""
    (scene / "c.yaml").write_text("name: c\nnodes:\n  - {name: a, gpus: {v100: 1, p100: 1}}\n")
    (scene / "jobs.csv").write_text(
        f"id,type,gpus,steps\n0,{R18},1,5000\n1,LM (batch size 20),2,3000\n"
    )
    argv = simulate_argv(scene, workload=str(scene / "jobs.csv"))
    one_line_error(
        capsys,
        main([*argv, "--policy", "gavel"]),
        "policy gavel cannot place job(s) 1 on cluster c",
    )
    assert main([*argv, "--policy", "hadar"]) == 0


def test_a_gang_the_node_streams_last_pool_cannot_hold_is_one_line_naming_that_pool(scene, capsys):
    """A 4-GPU gang arrives after one of the two 2-GPU nodes has left for good: no rigid policy
    can place it, and the error says what the stream left (not only that the cluster is idle)."""
    (scene / "c.yaml").write_text(
        "name: c\nnodes:\n  - {name: a, gpus: {v100: 2}}\n  - {name: b, gpus: {v100: 2}}\n"
    )
    (scene / "jobs.csv").write_text(f"id,type,gpus,steps,arrival\n0,{R18},4,5000,3600\n")
    (scene / "stream.csv").write_text("time,node,event\n0,a,join\n0,b,join\n600,b,leave\n")
    argv = simulate_argv(scene, workload=str(scene / "jobs.csv"))
    one_line_error(
        capsys,
        main([*argv, "--node-stream", str(scene / "stream.csv"), "--policy", "hadar"]),
        "policy hadar cannot place job(s) 0 on cluster c",
        "the node stream ended with 2 of 4 GPUs present",
    )
    assert main([*argv, "--policy", "hadar"]) == 0  # all four GPUs: it runs


# -- knobs, per-job restarts and exported traces that the code could not use -------------------
@pytest.mark.parametrize(
    "policy, knob, needle",
    [
        ("bftrainer", "t_fwd=1e308", "t_fwd <= 3.1536e+08"),
        ("malletrain", "t_fwd=1e308", "t_fwd <= 3.1536e+08"),
        ("afs-p", "quantum=1e-310", "quantum must be from 0.001 s"),
    ],
)
def test_a_knob_the_solver_cannot_take_is_one_line(scene, capsys, policy, knob, needle):
    """An infinite MILP objective (ValueError) or an infinite count of quanta (OverflowError)
    ended in a traceback."""
    code = main(simulate_argv(scene, "--policy", policy, "--policy-opt", knob))
    one_line_error(capsys, code, "--policy-opt", needle)
    assert not (scene / "o").exists()


def test_a_huge_window_factor_is_the_largest_window(scene):
    """``ceil(1e308 x free GPUs)`` overflowed; any factor past the window's cap is the cap."""
    huge = api.simulate(
        str(scene / "c.yaml"), "philly-3", "hadar", policy_options={"window_factor": "1e308"}
    )
    capped = api.simulate(
        str(scene / "c.yaml"), "philly-3", "hadar", policy_options={"window_factor": "1e6"}
    )
    assert huge.jobs.equals(capped.jobs)


def test_a_job_restart_as_long_as_a_round_is_refused(scene, capsys):
    """A one-day ``restart_s`` was cut to the 60 s round: the same JCT as a 60 s restart."""
    (scene / "pw.csv").write_text(
        "name,time,application,num_replicas,batch_size,restart_s\na,0,cifar10,2,256,86400\n"
    )
    argv = simulate_argv(scene, "--policy", "pollux", workload=str(scene / "pw.csv"))
    argv[argv.index("--cluster") + 1] = "pollux-64t4"
    one_line_error(
        capsys, main(argv), "pw.csv: job 0: restart_s: 86400 s must be shorter than a round (60 s)"
    )
    assert not (scene / "o").exists()


@pytest.mark.parametrize("slo, needle", [("-5", "must be >= -1 s"), ("1.0e+9", "SLO")])
def test_export_gavel_writes_only_lines_its_reader_accepts(scene, capsys, slo, needle):
    """An SLO of -5 was exported, then refused when the trace was read back."""
    (scene / "jobs.yaml").write_text(
        "jobs:\n  - {id: 0, type: 'ResNet-18 (batch size 64)', gpus: 1, steps: 100, spec: "
        "{gavel: {command: c, working_dir: d, num_steps_arg: --n, needs_data_dir: 0, SLO: "
        f"{slo}}}}}}}\n"
    )
    code = main(
        ["export-gavel", "--workload", str(scene / "jobs.yaml"), "--out", str(scene / "t.trace")]
    )
    one_line_error(capsys, code, "jobs.yaml: job 0: as a Gavel trace line: SLO", needle)
    assert not (scene / "t.trace").exists()


def test_spaces_around_a_job_type_are_stripped_as_around_the_other_fields(scene):
    """``LM (batch size 20) `` was an unknown type whose throughput was estimated."""
    spaced = scene / "spaced.csv"
    spaced.write_text("id,type,gpus,steps\n1, LM (batch size 20) ,2,100\n")
    plain = scene / "plain.csv"
    plain.write_text("id,type,gpus,steps\n1,LM (batch size 20),2,100\n")
    a = api.simulate("sim-60gpu", str(spaced), "hadar")
    b = api.simulate("sim-60gpu", str(plain), "hadar")
    assert a.jobs.equals(b.jobs) and a.jobs["type"].tolist() == ["LM (batch size 20)"]


def test_a_bad_batch_size_in_a_job_type_names_the_file_and_row(scene, capsys):
    (scene / "b0.csv").write_text("id,type,gpus,steps\n1,LM (batch size 0),1,100\n")
    code = main(simulate_argv(scene, workload=str(scene / "b0.csv")))
    one_line_error(capsys, code, "b0.csv: row[0]: job 1: batch size must be an integer >= 1")
