"""Hostile input found by fuzzing the CLI (eighth session of issue 27): each is refused up front
with one line and exit 2, and nothing is written outside ``--out`` or over an input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hadar.core.errors import InputError
from nodes.spec import parse_spec
from tests.fixtures.cli import hadar_cli, one_error_line

CLUSTER = "name: c\nnodes:\n  - {name: a, gpus: {v100: 2}}\n  - {name: b, gpus: {k80: 2}}\n"
R = "ResNet-18 (batch size 64)"
JOBS = f"id,type,gpus,steps,arrival\n0,{R},1,1000,0\n1,{R},2,1000,10\n"


def _inputs(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text(CLUSTER)
    (tmp_path / "jobs.csv").write_text(JOBS)


def test_an_out_holding_an_input_is_refused_and_the_input_kept(tmp_path):
    _inputs(tmp_path)
    res = hadar_cli(
        "simulate", "--cluster", "c.yaml", "--workload", "jobs.csv", "--out", ".", cwd=tmp_path
    )
    assert res.returncode == 2
    assert "--out .: holds the input" in one_error_line(res)
    assert (tmp_path / "jobs.csv").read_text() == JOBS  # not replaced by the results' jobs.csv
    assert not (tmp_path / "summary.json").exists()


def test_compare_never_writes_through_a_link_planted_in_out(tmp_path):
    _inputs(tmp_path)
    victim = tmp_path / "victim"
    victim.mkdir()
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "hadar").symlink_to(victim)
    res = hadar_cli(
        "compare",
        *("--cluster", "c.yaml", "--workload", "jobs.csv", "--policies", "hadar,gavel"),
        *("--out", "out"),
        cwd=tmp_path,
    )
    assert res.returncode == 2, res.stderr
    assert "resolves to" in res.stderr.strip().splitlines()[-1]
    assert "Traceback" not in res.stderr
    assert list(victim.iterdir()) == []


@pytest.mark.parametrize(
    "gavel, field",
    [
        ("{foo: 1}", "spec.gavel.command"),
        ("5", "spec.gavel: expected a mapping"),
        (
            "{command: c, working_dir: w, num_steps_arg: n, needs_data_dir: 1, SLO: abc}",
            "spec.gavel.SLO",
        ),
        (
            '{command: "a\\rb", working_dir: w, num_steps_arg: n, needs_data_dir: 1}',
            "line break",
        ),
    ],
)
def test_export_gavel_refuses_a_malformed_kept_command(tmp_path, gavel, field):
    (tmp_path / "g.yaml").write_text(
        f"jobs: [{{id: 0, type: '{R}', gpus: 1, steps: 1000, spec: {{gavel: {gavel}}}}}]\n"
    )
    res = hadar_cli("export-gavel", "--workload", "g.yaml", "--out", "x.trace", cwd=tmp_path)
    assert res.returncode == 2
    assert field in one_error_line(res)
    assert not (tmp_path / "x.trace").exists()


def test_an_unbalanced_quote_in_python_is_refused_before_a_run_writes(tmp_path):
    (tmp_path / "q.yaml").write_text(
        "name: q\nprovider: local\nlocal: {python: 'a \"b'}\nnodes: [{name: a, gpus: {v100: 1}}]\n"
    )
    res = hadar_cli("nodes", "check", "--cluster", "q.yaml", cwd=tmp_path)
    assert res.returncode == 2
    assert "q.yaml: local.python: not a command line" in one_error_line(res)
    (tmp_path / "jobs.yaml").write_text(
        "jobs: [{id: 0, type: MM, gpus: 1, steps: 10, spec: {model: MM, size: tiny, "
        "data: synthetic, batch_size: 8, lr: 0.01}}]\n"
    )
    res = hadar_cli(
        "run", "--cluster", "q.yaml", "--workload", "jobs.yaml", "--out", "r", cwd=tmp_path
    )
    assert res.returncode == 2
    assert "local.python" in one_error_line(res)
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(
    "args, needle",
    [
        (("--rates", "8", "--seeds", "-1"), "--seeds: each seed must be in 0.."),
        (("--rates", "1e-3"), "--rates: at 0.001 jobs/h the 20 jobs arrive over"),
        (("--rates", "8,1e308"), "--rates: at most 1,000,000 jobs/hour"),
    ],
)
def test_load_sweep_refuses_bad_seeds_and_rates_up_front(tmp_path, args, needle):
    _inputs(tmp_path)
    res = hadar_cli(
        *("experiment", "load-sweep", "--cluster", "c.yaml", "--policies", "hadar"),
        *("--num-jobs", "20", "--window", "0:10", *args, "--out", "o"),
        cwd=tmp_path,
    )
    assert res.returncode == 2
    line = one_error_line(res)
    assert needle in line and "--horizon" not in line
    assert not (tmp_path / "o").exists()


def test_physical_refuses_a_restart_penalty_as_long_as_a_round(tmp_path):
    res = hadar_cli(
        *("experiment", "physical", "--restart-penalty", "86400", "--rounds", "90"),
        *("--out", "o"),
        cwd=tmp_path,
    )
    assert res.returncode == 2
    assert "--restart-penalty: 86400 s must be shorter than a round" in one_error_line(res)


def test_decision_sizes_beyond_what_gavels_lp_solves_in_time_are_refused(tmp_path):
    _inputs(tmp_path)
    res = hadar_cli(
        *("compare", "--cluster", "c.yaml", "--workload", "jobs.csv", "--policies", "hadar"),
        *("--decision-sizes", "100000", "--out", "o"),
        cwd=tmp_path,
    )
    assert res.returncode == 2
    assert "--decision-sizes: sizes must be whole numbers of jobs in [1, 16384]" in (
        one_error_line(res)
    )


def test_a_worker_seed_beyond_torchs_range_is_refused_with_the_spec():
    base = {"model": "MM", "size": "tiny", "data": "synthetic", "batch_size": 8, "lr": 0.01}
    assert parse_spec({**base, "seed": 2**63 - 1}).seed == 2**63 - 1
    with pytest.raises(InputError, match="seed: Input should be less than or equal"):
        parse_spec({**base, "seed": 10**23})


@pytest.mark.parametrize("lr", [float("inf"), 1e309, float("nan")])
def test_a_learning_rate_that_is_not_a_finite_number_is_refused_with_the_spec(lr):
    # lr .inf trained every step to a NaN loss, and the run reported the job completed
    base = {"model": "MM", "size": "tiny", "data": "synthetic", "batch_size": 8}
    with pytest.raises(InputError, match="spec: lr: Input should be"):
        parse_spec({**base, "lr": lr})


def test_a_philly_workload_on_a_table_missing_its_models_is_one_line(tmp_path):
    _inputs(tmp_path)
    row = {"null": 10.0}
    table = {t: {f"('{R}', 1)": row, f"('{R}', 2)": row} for t in ("v100", "k80")}
    (tmp_path / "t.json").write_text(json.dumps(table))
    res = hadar_cli(
        *("simulate", "--cluster", "c.yaml", "--workload", "philly-10"),
        *("--throughputs", "t.json", "--out", "o"),
        cwd=tmp_path,
    )
    assert res.returncode == 2
    assert "t.json: the Philly workloads need" in one_error_line(res)


def test_a_missing_absolute_data_path_is_refused_before_any_round_on_local_nodes(tmp_path):
    # the workers failed on it every round until the run gave up after five
    missing = tmp_path / "no-such-dataset"
    spec = f"{{model: IC, size: tiny, data: '{missing}', batch_size: 8, lr: 0.01}}"
    (tmp_path / "jobs.yaml").write_text(
        f"jobs:\n  - {{id: 0, type: IC, gpus: 1, steps: 20, spec: {spec}}}\n"
    )
    res = hadar_cli(
        *("run", "--cluster", "local-3node", "--workload", "jobs.yaml", "--policy", "hadar"),
        *("--round", "5", "--out", "r"),
        cwd=tmp_path,
    )
    assert res.returncode == 2
    assert one_error_line(res).endswith(
        f"jobs.yaml: job 0: spec: data: path does not exist: {missing} "
        "(the local nodes read this machine's files)"
    )
    assert not (tmp_path / "r").exists()
