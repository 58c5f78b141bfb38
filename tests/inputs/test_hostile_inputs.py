"""Bad input found by the hostile-user campaign (issue 28, "Inputs"): each is one line naming the
file, row and field (exit 2, no traceback) and changes nothing saved; a UTF-8 BOM is accepted.
Commands run as users run them (subprocesses); the AWS endpoint that answers garbage is a real
HTTP server."""

from __future__ import annotations

import http.server
import json
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.fixtures.cli import hadar_cli, one_error_line

REPO = Path(__file__).resolve().parents[2]
LOCAL_3 = str(REPO / "cluster_configs" / "local-3node.yaml")


def hadar(*args: str, cwd: Path, env: dict[str, str] | None = None, module: str = "hadar"):
    return hadar_cli(
        *args, cwd=cwd, env={"COLUMNS": "200", **(env or {})}, timeout=300, module=module
    )


def refused(res: subprocess.CompletedProcess[str], code: int = 2) -> str:
    assert res.returncode == code, res.stdout + res.stderr
    return one_error_line(res)


def cluster_file(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


SIM = ["simulate", "--workload", "M-1", "--no-progress", "--out", "out"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "name: c\nprovider: simulated\nnodes:\n  - {name: a, gpus: {v100: true}}\n",
            "c.yaml: nodes[0].gpus: v100: GPU count must be a positive integer (got True)",
        ),
        (
            "name: c\nprovider: simulated\nnodes:\n  - {name: a, count: true, gpus: {v100: 1}}\n",
            "c.yaml: nodes[0].count: count must be a positive integer (got True)",
        ),
        (
            "name: c\nprovider: simulated\nnodes:\n  - {name: a, gpus: {v100: 1, v100: 4}}\n",
            "c.yaml: malformed YAML at line 4, column 31: duplicate key 'v100'",
        ),
    ],
    ids=["gpu-count-true", "node-count-true", "duplicate-key"],
)
def test_cluster_values_yaml_would_bend_are_refused(tmp_path: Path, text: str, expected: str):
    cfg = cluster_file(tmp_path / "c.yaml", text)
    line = refused(hadar(*SIM, "--cluster", str(cfg), cwd=tmp_path))
    assert line == f"hadar: error: {tmp_path}/{expected}", line
    assert not (tmp_path / "out").exists()


def test_a_cluster_file_too_large_to_parse_quickly_is_refused_by_its_size(tmp_path: Path):
    cfg = tmp_path / "big.yaml"
    node = "  - {name: n%d, gpus: {v100: 1}}\n"
    with cfg.open("w") as f:
        f.write("name: c\nprovider: simulated\nnodes:\n")
        for i in range(200_000):  # ~6 MiB: PyYAML would take several seconds
            f.write(node % i)
    line = refused(hadar(*SIM, "--cluster", str(cfg), cwd=tmp_path))
    assert line.startswith(f"hadar: error: {cfg}: cluster file is ") and line.endswith(
        "MiB; at most 4.0 MiB is read"
    )


def test_a_job_type_with_a_newline_is_refused_naming_the_row(tmp_path: Path):
    jobs = tmp_path / "jobs.csv"
    jobs.write_text('id,type,gpus,steps\n0,"A3C\nX",1,100\n')
    line = refused(hadar("simulate", "--workload", str(jobs), "--out", "out", cwd=tmp_path))
    assert line == (
        f"hadar: error: {jobs}: row[0].type: a job type is one line of printable characters "
        "(no newline or tab) (got 'A3C\\nX')"
    ), line


def test_a_csv_with_a_utf8_byte_order_mark_is_read(tmp_path: Path):
    jobs = tmp_path / "jobs.csv"
    jobs.write_bytes(b"\xef\xbb\xbfid,type,gpus,steps\n0,A3C,1,100\n")
    res = hadar("simulate", "--workload", str(jobs), "--no-progress", "--out", "out", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["completed"] == 1


def test_a_deprecated_flag_is_said_inside_the_one_error_line(tmp_path: Path):
    res = hadar("compare", "--jobs", "2", "--workload", str(tmp_path / "none.csv"), cwd=tmp_path)
    line = refused(res)
    assert line.endswith("(note: --jobs is deprecated, use --workers)"), line
    assert "not found" in line


def test_the_worker_refuses_a_result_path_it_cannot_write_before_training(tmp_path: Path):
    spec = tmp_path / "spec.json"
    spec.write_text(
        json.dumps({"model": "LT", "size": "tiny", "data": "synthetic", "batch_size": 4, "lr": 0.1})
    )
    res = hadar(
        *("--spec", str(spec), "--steps", "1", "--deadline-s", "60"),
        *("--checkpoint-out", str(tmp_path / "c.pt"), "--result", "/proc/nope/x.json"),
        cwd=tmp_path,
        module="nodes.worker",
    )
    line = refused(res)
    assert line.startswith("hadar-worker: error: --result /proc/nope/x.json: cannot create")
    assert not (tmp_path / "c.pt").exists()  # refused before training


def test_resume_of_a_binary_run_json_is_one_line(tmp_path: Path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_bytes(b"\x89PNG\r\n\x1a\n\x00\xff")
    line = refused(hadar("run", "--resume", str(run), "--no-live", cwd=tmp_path))
    assert line == f"hadar: error: {run / 'run.json'}: not a UTF-8 text file (byte 0 is 0x89)"


def _jobs(tmp_path: Path, **change: object) -> Path:
    job = {
        "id": 0,
        "type": "LT",
        "gpus": 1,
        "steps": 20,
        "spec": {"model": "LT", "size": "tiny", "data": "synthetic", "batch_size": 8, "lr": 0.01},
    }
    spec_change = change.pop("spec", {})
    job.update(change)
    job["spec"].update(spec_change)  # type: ignore[union-attr]
    path = tmp_path / "jobs.yaml"
    path.write_text(yaml.safe_dump({"jobs": [job]}))
    return path


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            {"arrival": 1e8},
            "jobs[0].arrival: 1e+08 s is beyond a real run's horizon of 604,800 s (7 days; "
            "hadar run waits for arrivals in real time)",
        ),
        ({"id": 5000}, "jobs[0].id: 5000 is more than a real run tracks (job ids 0-999)"),
        (
            {"spec": {"batch_size": 100_000}},  # a total batch a simulation takes
            "job 0: spec: batch_size: Input should be less than or equal to 16384",
        ),
    ],
    ids=["arrival", "job-id", "batch-size"],
)
def test_a_job_a_real_run_cannot_take_is_refused_before_anything_is_saved(
    tmp_path: Path, change: dict, expected: str
):
    jobs = _jobs(tmp_path, **change)
    res = hadar(
        *("run", "--cluster", LOCAL_3, "--workload", str(jobs), "--no-live", "--out", "run"),
        cwd=tmp_path,
    )
    line = refused(res)
    assert line.startswith(f"hadar: error: {jobs}: ") and expected in line, line
    assert not (tmp_path / "run").exists()


class _Garbage(http.server.BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 - the http.server interface
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200)
        self.send_header("Content-Type", "text/xml")
        self.end_headers()
        self.wfile.write(b"<<<not EC2&&&")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def garbage_endpoint() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Garbage)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_cluster_status_against_an_endpoint_answering_garbage(tmp_path: Path, garbage_endpoint):
    env = {
        "HADAR_AWS_ENDPOINT_URL": garbage_endpoint,
        "AWS_ACCESS_KEY_ID": "x",
        "AWS_SECRET_ACCESS_KEY": "y",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_MAX_ATTEMPTS": "1",
    }
    res = hadar(
        "cluster",
        "status",
        "--cluster",
        str(REPO / "cluster_configs" / "aws-5node.yaml"),
        cwd=tmp_path,
        env=env,
    )
    line = refused(res, code=1)
    assert "the endpoint's answer is not an EC2 response" in line, line
