"""Magnitudes a hostile-input fuzz found reaching the maths: GPU figures, job steps and weights,
network bandwidths, GPU counts and ids. Each is refused where the file is read, one line naming
the file and field (exit 2), and the figures at the edges of the accepted ranges still simulate
(docs/inputs.md)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from estimators.pmi import PmiEstimator
from hadar.cli import main
from hadar.clusters import cluster_from_dict
from hadar.core.errors import InputError
from hadar.core.gpu_catalogue import GpuSpec, forget_user_gpus, register_gpu
from hadar.core.jobs import Job
from hadar.scenario import load_scenario
from hadar.workloads.files import load_job_file
from hadar.workloads.gavel_trace import read_trace

R18 = "ResNet-18 (batch size 64)"
YEAR_S = 365 * 86400.0


@pytest.fixture(autouse=True)
def _fresh_catalogue() -> Iterator[None]:
    forget_user_gpus()
    yield
    forget_user_gpus()


def one_error(capsys: pytest.CaptureFixture[str], code: int) -> str:
    """The one stderr line of a refused command (exit 2, no traceback)."""
    captured = capsys.readouterr()
    lines = [ln for ln in captured.err.splitlines() if ln.strip()]
    assert code == 2, captured.err
    assert len(lines) == 1 and "Traceback" not in captured.err, captured.err
    return lines[0]


def simulate(tmp_path: Path, cluster: str, jobs: str, *extra: str) -> int:
    (tmp_path / "c.yaml").write_text(cluster)
    (tmp_path / "jobs.csv").write_text(jobs)
    return main(
        [
            "simulate",
            *("--cluster", str(tmp_path / "c.yaml"), "--workload", str(tmp_path / "jobs.csv")),
            *("--no-progress", "--out", str(tmp_path / "out"), *extra),
        ]
    )


def gpu_cluster(figures: str) -> str:
    return (
        f"name: t\ngpu_types: {{newg: {{{figures}, pcie_gen: 3}}}}\n"
        "nodes:\n  - {name: a, gpus: {newg: 1}}\n  - {name: b, gpus: {v100: 1}}\n"
    )


ONE_JOB = f"id,type,gpus,steps\n0,{R18},1,1000\n"


# -- 1, 2: GPU catalogue figures ---------------------------------------------------------------
@pytest.mark.parametrize(
    ("figures", "expected"),
    [
        ("fp32_tflops: 1.0e-300, memory_gb: 1.0e-300", "fp32_tflops: must be >= 0.01 TFLOPS"),
        ("fp32_tflops: 1.0e+300, memory_gb: 1.0e+300", "fp32_tflops: must be <= 10000 TFLOPS"),
        ("fp32_tflops: 1.0e+200, memory_gb: 16", "fp32_tflops: must be <= 10000 TFLOPS"),
        ("fp32_tflops: 10, memory_gb: 0.05", "memory_gb: must be >= 0.1 GB"),
        ("fp32_tflops: 10, memory_gb: 20000", "memory_gb: must be <= 10000 GB"),
        ("fp32_tflops: 10, memory_gb: 16, tensor_tflops: 1.0e-9", "tensor_tflops: must be 0"),
        ("fp32_tflops: 10, memory_gb: 16, tensor_tflops: 1.0e+6", "tensor_tflops: must be 0"),
    ],
)
def test_gpu_figures_outside_their_range_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], figures: str, expected: str
) -> None:
    line = one_error(capsys, simulate(tmp_path, gpu_cluster(figures), ONE_JOB))
    assert line.startswith(f"hadar: error: {tmp_path / 'c.yaml'}: gpu_types.newg.{expected}"), line
    assert not (tmp_path / "out").exists()


def test_an_empty_gpu_catalogue_name_is_refused_not_read_as_the_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = "name: t\ngpu_types: ''\nnodes: [{name: a, gpus: {v100: 1}}]\n"
    line = one_error(capsys, simulate(tmp_path, cluster, ONE_JOB))
    assert line.endswith(
        "c.yaml: gpu_types: expected a GPU catalogue file name or a mapping (got '')"
    )


@pytest.mark.parametrize("policy", ["hadar", "gavel"])
def test_gpu_figures_at_the_edges_of_their_range_simulate(tmp_path: Path, policy: str) -> None:
    """The slowest and the largest GPU a file may declare, side by side with a V100: the LPs
    solve and the job completes (beyond these edges the fuzz found HiGHS "Model error")."""
    cluster = (
        "name: t\ngpu_types:\n"
        "  tiny: {fp32_tflops: 0.01, memory_gb: 0.1, pcie_gen: 1}\n"
        "  huge: {fp32_tflops: 10000, memory_gb: 10000, tensor_tflops: 100000, pcie_gen: 6}\n"
        "nodes:\n  - {name: a, gpus: {tiny: 1}}\n  - {name: b, gpus: {huge: 1}}\n"
        "  - {name: c, gpus: {v100: 1}}\n"
    )
    jobs = f"id,type,gpus,steps\n0,{R18},1,1000\n1,{R18},1,1000\n2,{R18},1,1000\n"
    assert simulate(tmp_path, cluster, jobs, "--policy", policy) == 0
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["completed"] == 3
    with pytest.raises(InputError, match="must be >= 0.01 TFLOPS"):  # and just below the edge
        cluster_from_dict(
            {
                "name": "t",
                "gpu_types": {"newg": {"fp32_tflops": 0.0099, "memory_gb": 1, "pcie_gen": 3}},
                "nodes": [{"name": "a", "gpus": {"newg": 1}}],
            },
            "c.yaml",
        )


@pytest.mark.parametrize("figure", [1e-300, 1e300])
def test_the_estimator_orders_gpus_without_dividing_by_zero(figure: float) -> None:
    """Declared outside the loader's bounds (registered directly), a GPU's PMI underflows to 0
    or overflows to inf; ordering the anchors by PMI distance must not raise."""
    register_gpu(GpuSpec("newg", "newg", figure, 0.0, figure, 3))
    job = Job(job_id=0, job_type=R18, num_gpus=1, total_steps=1000.0)
    estimate = PmiEstimator.bundled().estimate(job, "newg")
    assert estimate.value >= 0


# -- 3: steps are a whole number of iterations, >= 1, in every job-file format -----------------
@pytest.mark.parametrize("steps", ["1e-30", "0.5", "1.5", "0"])
def test_steps_that_are_not_a_whole_number_of_at_least_one_are_refused(
    tmp_path: Path, steps: str
) -> None:
    csv_file = tmp_path / "jobs.csv"
    csv_file.write_text(f"id,type,gpus,steps\n0,{R18},1,{steps}\n")
    yaml_file = tmp_path / "jobs.yaml"
    yaml_file.write_text(f"jobs:\n  - {{id: 0, type: '{R18}', gpus: 1, steps: {steps}}}\n")
    trace = tmp_path / "jobs.trace"
    trace.write_text("\t".join([R18, "python3 x.py", ".", "--n", "0", steps, "1", "1", "-1", "0"]))
    for path, where in (
        (csv_file, "row[0].steps"),
        (yaml_file, "jobs[0].steps"),
        (trace, "line 1 (job 0): total_steps"),
    ):
        with pytest.raises(InputError) as info:
            load_job_file(path) if path.suffix != ".trace" else read_trace(path)
        expected = "a whole number of steps" if float(steps) > 1 else "an integer >= 1 steps"
        assert str(info.value).startswith(f"{path}: {where}: must be {expected}"), info
    csv_file.write_text(f"id,type,gpus,steps\n0,{R18},1,1\n1,{R18},1,1000.0\n")
    assert [j.total_steps for j in load_job_file(csv_file)] == [1, 1000]


def test_fractional_steps_are_refused_before_a_real_run_writes_anything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    jobs = tmp_path / "jobs.csv"
    jobs.write_text("id,type,gpus,steps\n0,IC,1,0.5\n")
    out = tmp_path / "run"
    code = main(["run", "--workload", str(jobs), "--out", str(out), "--no-live"])
    line = one_error(capsys, code)
    assert line == f"hadar: error: {jobs}: row[0].steps: must be an integer >= 1 steps (got '0.5')"
    assert not out.exists()


# -- 4: weights --------------------------------------------------------------------------------
@pytest.mark.parametrize(("weight", "bound"), [("1e-15", ">= 0.001"), ("1e4", "<= 1000")])
def test_weights_outside_their_range_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], weight: str, bound: str
) -> None:
    jobs = f"id,type,gpus,steps,weight\n0,{R18},1,100,{weight}\n"
    line = one_error(
        capsys,
        simulate(
            tmp_path, "name: c\nnodes:\n  - {name: a, gpus: {v100: 1}}\n", jobs, "--policy", "gavel"
        ),
    )
    assert (
        line
        == f"hadar: error: {tmp_path / 'jobs.csv'}: row[0].weight: must be {bound} (got '{weight}')"
    )
    trace = tmp_path / "jobs.trace"
    trace.write_text(
        "\t".join([R18, "python3 x.py", ".", "--n", "0", "10", "1", weight, "-1", "0"])
    )
    with pytest.raises(InputError, match=r"line 1 \(job 0\): priority_weight: must be "):
        read_trace(trace)


def test_weights_at_the_edges_solve_under_gavel(tmp_path: Path) -> None:
    jobs = f"id,type,gpus,steps,weight\n0,{R18},1,1000,0.001\n1,{R18},1,1000,1000\n"
    cluster = "name: c\nnodes:\n  - {name: a, gpus: {v100: 1}}\n"
    assert simulate(tmp_path, cluster, jobs, "--policy", "gavel") == 0
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["completed"] == 2
    (tmp_path / "jobs.csv").write_text(f"id,type,gpus,steps,weight\n0,{R18},1,1000,0.0009\n")
    with pytest.raises(InputError, match=r"row\[0\]\.weight: must be >= 0\.001"):
        load_job_file(tmp_path / "jobs.csv")


# -- 5: network bandwidths ---------------------------------------------------------------------
TWO_NODES = "name: c\nnodes:\n  - {name: a, gpus: {v100: 2}}\n  - {name: b, gpus: {k80: 2}}\n"


def network(nic: str, uplink: str, link: str = "40") -> str:
    return (
        f"network:\n  nic_gbps: {nic}\n  racks:\n"
        f"    - {{name: r1, nodes: [a], uplink_gbps: {uplink}}}\n"
        f"    - {{name: r2, nodes: [b], uplink_gbps: {uplink}}}\n"
        f"  links: [{{between: [r1, r2], gbps: {link}}}]\n"
    )


@pytest.mark.parametrize(
    ("net", "expected"),
    [
        (network("1.0e-300", "10"), "network.nic_gbps: must be >= 0.01 Gbit/s"),
        (network("25", "0.001"), "network.racks[0].uplink_gbps: must be >= 0.01 Gbit/s"),
        (network("25", "10", "1.0e-300"), "network.links[0].gbps: must be >= 0.01 Gbit/s"),
        (network("1.0e+300", "10"), "network.nic_gbps: must be <= 1e+06 Gbit/s"),
    ],
)
def test_bandwidths_outside_their_range_are_refused(net: str, expected: str) -> None:
    import yaml

    with pytest.raises(InputError) as info:
        cluster_from_dict(yaml.safe_load(TWO_NODES + net), "c.yaml")
    assert str(info.value).startswith(f"c.yaml: {expected}"), info.value


def test_a_gang_only_a_slow_network_can_hold_is_refused_up_front(tmp_path: Path) -> None:
    """A 4-GPU job on two 2-GPU nodes runs across the network: at 0.01 Gbit/s, 2e6 steps of MM
    cannot finish within a year, which the horizon check must see (it used the gang's
    consolidated rate, which no node can give it, and the simulation ran for minutes)."""
    (tmp_path / "c.yaml").write_text(TWO_NODES + network("0.01", "0.01", "0.01"))
    (tmp_path / "jobs.csv").write_text("id,type,gpus,steps\n0,MM,4,2000000\n")
    with pytest.raises(InputError, match="job 0: cannot finish before .* beyond the horizon"):
        load_scenario(tmp_path / "c.yaml", tmp_path / "jobs.csv", horizon_s=YEAR_S)
    (tmp_path / "jobs.csv").write_text("id,type,gpus,steps\n0,MM,4,1000\n")  # this one can
    load_scenario(tmp_path / "c.yaml", tmp_path / "jobs.csv", horizon_s=YEAR_S)


# -- 6: GPU counts -----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("node", "expected"),
    [
        (
            "{name: a, gpus: {v100: '2'}}",
            "nodes[0].gpus: v100: GPU count must be a positive integer (got '2')",
        ),
        (
            "{name: a, gpus: {v100: 2.0}}",
            "nodes[0].gpus: v100: GPU count must be a positive integer (got 2.0)",
        ),
        (
            "{name: a, count: '2', gpus: {v100: 1}}",
            "nodes[0].count: count must be a positive integer (got '2')",
        ),
        (
            "{name: a, gpus: {v100: 1, V100: 2}}",
            "nodes[0].gpus: 'v100' and 'V100' are the same GPU type (v100); give it once",
        ),
        (
            "{name: a, gpus: {v100: 2}, gpu_indices: {v100: [0], Tesla-V100: [1]}}",
            "nodes[0].gpu_indices: 'v100' and 'Tesla-V100' are the same GPU type (v100); give it once",
        ),
    ],
)
def test_gpu_counts_must_be_integers_given_once_per_type(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], node: str, expected: str
) -> None:
    line = one_error(capsys, simulate(tmp_path, f"name: c\nnodes:\n  - {node}\n", ONE_JOB))
    assert line == f"hadar: error: {tmp_path / 'c.yaml'}: {expected}", line


# -- 7: ids ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("fields", "where"),
    [
        ("id: false", "jobs[0].id"),
        ("id: true", "jobs[0].id"),
        ("id: 0, batch_range: [true, 4], min_gpus: 1, max_gpus: 2", "jobs[0].batch_range"),
    ],
)
def test_booleans_are_not_ids(tmp_path: Path, fields: str, where: str) -> None:
    path = tmp_path / "jobs.yaml"
    path.write_text(f"jobs:\n  - {{{fields}, type: '{R18}', gpus: 1, steps: 1000}}\n")
    with pytest.raises(InputError) as info:
        load_job_file(path)
    assert str(info.value).startswith(f"{path}: {where}: must be a whole number, not a boolean")


def test_a_fractional_gpu_count_is_refused_and_a_whole_valued_one_reads_as_its_integer(
    tmp_path: Path,
) -> None:
    csv_file = tmp_path / "jobs.csv"
    csv_file.write_text(f"id,type,gpus,steps\n0,{R18},2.5,10\n")
    with pytest.raises(InputError) as info:
        load_job_file(csv_file)
    assert str(info.value) == f"{csv_file}: row[0].gpus: must be a whole number of GPUs (got '2.5')"
    csv_file.write_text(f"id,type,gpus,steps\n0,{R18},2.0,10\n1,{R18},4,10\n")
    assert [j.num_gpus for j in load_job_file(csv_file)] == [2, 4]


@pytest.mark.parametrize(
    ("field", "text"),
    [("gpus", "1_0"), ("gpus", "\u0661\u0660"), ("steps", "1_000"), ("arrival", "\uff15")],
    ids=["underscore", "arabic-indic digits", "steps underscore", "fullwidth digit"],
)
def test_numbers_written_other_than_with_0_9_are_refused(
    tmp_path: Path, field: str, text: str
) -> None:
    """``1_0`` was read as 10 GPUs and ``١٠`` (Arabic-Indic digits) as 10: a typo or a look-alike
    passed as another number."""
    row = {"id": "0", "type": R18, "gpus": "1", "steps": "10", "arrival": "0"}
    row[field] = text
    csv_file = tmp_path / "jobs.csv"
    csv_file.write_text(",".join(row) + "\n" + ",".join(row.values()) + "\n", encoding="utf-8")
    with pytest.raises(InputError) as info:
        load_job_file(csv_file)
    assert str(info.value).startswith(
        f"{csv_file}: row[0].{field}: not a number written with 0-9 and no '_' (got "
    ), str(info.value)
