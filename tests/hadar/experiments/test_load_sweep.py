"""``hadar experiment load-sweep``: Poisson arrivals from the paper's generator, JCT over a window,
saturation, and identical numbers whether cells run one by one, in a process pool or on Ray."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import pytest

from estimators.throughput import GavelThroughputTable
from hadar.cli import main
from hadar.experiments.load_sweep import poisson_arrivals, window_stats
from hadar.simulator.records import JobRecord
from hadar.workloads.philly import PhillyOptions, generate
from tests.fixtures.processes import HANG_S

ARGS = [
    "experiment",
    "load-sweep",
    "--policies",
    "hadar,gavel",
    "--rates",
    "20,60",
    "--num-jobs",
    "40",
    "--window",
    "10:30",
]
DETERMINISTIC = [
    "policy",
    "rate",
    "seed",
    "avg_jct_s",
    "median_jct_s",
    "p99_jct_s",
    "max_jct_s",
    "avg_queueing_s",
    "backlog_growth",
    "saturated",
    "ttd_s",
    "work_efficiency",
    "rho_mean",
    "restarts_per_job",
    "all_avg_jct_s",
    "all_p99_jct_s",
    "all_max_jct_s",
]


def _rows(out: Path) -> pd.DataFrame:
    return pd.read_csv(out / "load_sweep.csv")[DETERMINISTIC]


@pytest.fixture(scope="module")
def serial(tmp_path_factory):
    out = tmp_path_factory.mktemp("sweep") / "serial"
    assert main([*ARGS, "--workers", "1", "--out", str(out)]) == 0
    return out


def test_writes_csv_json_and_plot(serial):
    rows = _rows(serial)
    assert sorted(set(rows.policy)) == ["gavel", "hadar"] and sorted(set(rows.rate)) == [20.0, 60.0]
    assert (rows.avg_jct_s > 0).all()
    # the whole run's statistics (warm-up and drain included) beside the window's
    assert (rows.all_max_jct_s >= rows.max_jct_s).all()
    assert (rows.all_p99_jct_s <= rows.all_max_jct_s).all() and (rows.all_p99_jct_s > 0).all()
    meta = json.loads((serial / "load_sweep.json").read_text())
    assert meta["window"] == [10, 30] and set(meta["saturates_at"]) == {"hadar", "gavel"}
    assert (serial / "load_sweep.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_process_pool_gives_identical_numbers(serial, tmp_path):
    assert main([*ARGS, "--workers", "2", "--out", str(tmp_path / "pool")]) == 0
    pd.testing.assert_frame_equal(_rows(serial), _rows(tmp_path / "pool"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


RAY_SLOW_START = "timed out during startup"
"""``ray start``'s error when its raylet did not register within Ray's own 30 s (fixed in Ray's
code): a loaded machine, not a fault of the cluster or of hadar."""


def _start_ray_head(ray_cli: str, port: int, temp_dir: str) -> None:
    """``ray start --head`` on ``port``, tried again after Ray's own start-up deadline passed
    (a loaded machine) until it starts or :data:`HANG_S` has gone; any other failure fails."""
    argv = [ray_cli, "start", "--head", f"--port={port}", "--num-cpus=2"]
    argv += ["--include-dashboard=false", "--disable-usage-stats", f"--temp-dir={temp_dir}"]
    end = time.monotonic() + HANG_S
    while True:
        start = subprocess.run(argv, capture_output=True, text=True, timeout=HANG_S)
        output = start.stdout + start.stderr
        if start.returncode == 0:
            return
        assert RAY_SLOW_START in output and time.monotonic() < end, output
        subprocess.run([ray_cli, "stop", "--force"], capture_output=True, timeout=HANG_S)


def test_a_local_ray_cluster_gives_identical_numbers(serial, tmp_path):
    pytest.importorskip("ray")
    ray_cli = shutil.which("ray", path=str(Path(sys.executable).parent))
    assert ray_cli, "the ray extra installs the ray command next to python"
    port = _free_port()
    # Ray's session folder (its Unix sockets) in a short private folder: under TMPDIR, Ray's
    # default, a long TMPDIR puts the socket paths past the 107 bytes a Unix socket's path holds
    ray_tmp = tempfile.mkdtemp(prefix="hadar-ray-", dir="/tmp")
    try:
        _start_ray_head(ray_cli, port, ray_tmp)
        out = tmp_path / "ray"
        assert main([*ARGS, "--ray-address", f"127.0.0.1:{port}", "--out", str(out)]) == 0
    finally:
        subprocess.run([ray_cli, "stop", "--force"], capture_output=True, timeout=HANG_S)
        shutil.rmtree(ray_tmp, ignore_errors=True)
    pd.testing.assert_frame_equal(_rows(serial), _rows(tmp_path / "ray"))


def test_an_unreachable_ray_address_is_exit_3_in_one_line(tmp_path, capsys):
    pytest.importorskip("ray")
    code = main([*ARGS, "--ray-address", f"127.0.0.1:{_free_port()}", "--out", str(tmp_path / "x")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 3 and len(err) == 1 and "--ray-address" in err[0]


def test_every_rate_replays_the_same_jobs_time_scaled():
    jobs = generate(GavelThroughputTable.bundled(), PhillyOptions(num_jobs=30, seed=4))
    slow, fast = poisson_arrivals(jobs, 10.0, 4), poisson_arrivals(jobs, 40.0, 4)
    assert [j.job_id for j in slow] == [j.job_id for j in fast] == [j.job_id for j in jobs]
    assert slow[0].arrival == 0.0
    assert [4 * f.arrival for f in fast] == pytest.approx([s.arrival for s in slow])
    assert all(b.arrival >= a.arrival for a, b in zip(slow, slow[1:], strict=False))
    assert poisson_arrivals(jobs, 10.0, 5)[5].arrival != slow[5].arrival  # the seed matters


def _rec(i, arrival, finish):
    return JobRecord(i, "t", 1, arrival, arrival, finish, 0)


def test_window_statistics_and_saturation_by_hand():
    # jobs arrive every 10 s; each takes 5 s: the backlog never grows
    stable = [_rec(i, 10.0 * i, 10.0 * i + 5.0) for i in range(10)]
    s = window_stats(stable, (2, 8))
    assert s["window_jobs"] == 6 and s["avg_jct_s"] == 5.0 and not s["saturated"]
    # each takes 30 s while they arrive every 10 s: 2 more unfinished jobs at the window's end
    growing = [_rec(i, 10.0 * i, 40.0 * i + 30.0) for i in range(10)]
    g = window_stats(growing, (2, 8))
    assert g["saturated"] and g["backlog_growth"] > 0.2


@pytest.mark.parametrize(
    "bad",
    [
        ["--window", "30:10"],
        ["--window", "0:999"],
        ["--rates", "0,10"],
        ["--rates", "ten"],
        ["--seeds", "x"],
        ["--policies", "nope"],
        ["--policy-opt", "hadar:beam=0"],
    ],
)
def test_bad_arguments_are_one_line_errors(bad, tmp_path, capsys):
    code = main([*ARGS, *bad, "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("policy", ["hadar", "gavel"])
def test_gavel_compatible_cells_run_the_mode_hadar_simulate_runs(policy: str) -> None:
    """``--gavel-compatible`` in the sweep is ``hadar simulate --gavel-compatible`` on the same
    Poisson trace (no restart penalty, longest-job rounds, consolidated rates, Gavel's 1,920 s
    reallocation interval), and it is not the normal mode."""
    from hadar import api
    from hadar.experiments.load_sweep import SweepCell, run_cell
    from hadar.scenario import load_table

    cell = SweepCell(policy, 48.0, 3, "sim-60gpu", 40, (0, 40), gavel_compatible=True)
    jobs = poisson_arrivals(generate(load_table(None), PhillyOptions(num_jobs=40, seed=3)), 48.0, 3)
    sim = api.simulate("sim-60gpu", jobs, policy, gavel_compatible=True)
    row = run_cell(cell)
    assert row["avg_jct_s"] == pytest.approx(sim.summary["avg_jct_s"], rel=1e-12)
    assert row["ttd_s"] == pytest.approx(sim.summary["ttd_s"], rel=1e-12)
    normal = run_cell(SweepCell(policy, 48.0, 3, "sim-60gpu", 40, (0, 40)))
    assert normal["avg_jct_s"] != pytest.approx(row["avg_jct_s"], rel=1e-6)
