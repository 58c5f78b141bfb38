"""The worker end to end as a real subprocess (`python -m nodes.worker`), plus its argument checks."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
import torch

from nodes.checkpoint import load_checkpoint, save_checkpoint, sha256_file
from nodes.models import build_model
from nodes.worker import loss_ends, main
from tests.fixtures.processes import HANG_S
from tests.nodes.helpers import BUDGET_DEADLINE_S, finish, run_worker, start_worker, write_spec

RESULT_FIELDS = {
    "status": str,
    "steps_done": int,
    "wall_seconds": float,
    "train_seconds": float,
    "steps_per_second": float,
    "final_loss": float,
    "start_steps": int,
    "checkpoint": str,
    "sha256": str,
    "device": str,
    "rank": int,
    "world_size": int,
}


def common(
    tmp: Path, name: str, steps: int, deadline: float = BUDGET_DEADLINE_S
) -> list[str | Path]:
    return [
        "--spec",
        tmp / "spec.json",
        "--steps",
        str(steps),
        "--deadline-s",
        str(deadline),
        "--checkpoint-out",
        tmp / f"{name}.pt",
        "--result",
        tmp / f"{name}.json",
    ]


def assert_clean_exit_2(run, needle: str) -> None:
    assert run.returncode == 2, run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in run.stderr, run.stderr
    assert lines[0].startswith("hadar-worker: error: ") and needle in lines[0], lines[0]
    assert run.result == {
        "status": "error",
        "error": lines[0].removeprefix("hadar-worker: error: "),
        "exit_code": 2,
        "wall_seconds": run.result["wall_seconds"],
    }


def test_a_round_honours_the_step_budget_then_the_next_resumes_until_the_deadline(
    tmp_path: Path,
) -> None:
    write_spec(tmp_path / "spec.json", model="IC")
    t = time.monotonic()
    r0 = run_worker(*common(tmp_path, "r0", 6), "--eval", result=tmp_path / "r0.json")
    # what starting and ending a worker process costs outside its own clock on this machine now
    outside_s = time.monotonic() - t - r0.result["wall_seconds"]
    assert r0.returncode == 0, r0.stderr
    res = r0.result
    for key, typ in RESULT_FIELDS.items():
        assert isinstance(res[key], typ), (key, res.get(key))
    assert res["status"] == "ok" and res["stopped_by"] == "steps"
    assert (res["steps_done"], res["start_steps"], res["end_steps"]) == (6, 0, 6)
    # the device the worker must pick: local rank 0's visible GPU when CUDA is usable, else the CPU
    expected = "cuda:0" if torch.cuda.is_available() else "cpu"
    assert (res["device"], res["rank"], res["world_size"], res["precision"]) == (
        expected,
        0,
        1,
        "fp32",
    )
    assert res["sha256"] == sha256_file(tmp_path / "r0.pt")
    assert 0 < res["train_seconds"] < res["wall_seconds"] < BUDGET_DEADLINE_S
    assert res["steps_per_second"] == pytest.approx(6 / res["train_seconds"])
    assert math.isfinite(res["final_loss"]) and res["metric"]["name"] == "accuracy"
    assert 0.0 <= res["metric"]["value"] <= 1.0
    assert f"training IC/tiny on {expected} (fp32) from step 0" in r0.stdout
    ck0 = load_checkpoint(tmp_path / "r0.pt", "IC", "tiny")
    assert ck0["steps"] == 6 and ck0["optimizer"] is not None

    # next round: resume from r0 on another data stream with a budget it cannot finish. The
    # deadline counts from the process start, imports included: r0's wall time (start-up, 6
    # steps, the evaluation and the save) measured what this machine needs now, so twice that
    # leaves time to train on a loaded machine too (14 s on a quiet one)
    deadline = max(14, math.ceil(2 * res["wall_seconds"]))
    t = time.monotonic()
    r1 = run_worker(
        *common(tmp_path, "r1", 10**7, deadline=deadline),
        "--checkpoint-in",
        tmp_path / "r0.pt",
        "--data-stream",
        "1",
        result=tmp_path / "r1.json",
    )
    elapsed = time.monotonic() - t
    assert r1.returncode == 0, r1.stderr
    res1 = r1.result
    assert res1["stopped_by"] == "deadline" and res1["steps_done"] > 0
    # the worker's own clock (from its process start) stopped within the deadline, and the
    # process did not linger after it: 3 s, or more where r0 showed that a process's start and
    # exit alone take longer on this machine now
    assert res1["wall_seconds"] <= deadline
    assert elapsed < deadline + max(3.0, 3 * outside_s), (elapsed, outside_s)
    assert res1["start_steps"] == 6 and res1["end_steps"] == 6 + res1["steps_done"]
    assert res1["data_stream"] == 1 and "metric" not in res1
    ck1 = load_checkpoint(tmp_path / "r1.pt", "IC", "tiny")
    assert ck1["steps"] == res1["end_steps"] and res1["sha256"] != res["sha256"]
    w = "linear.weight"
    assert not torch.equal(ck0["state_dict"][w], ck1["state_dict"][w])


def test_sigterm_stops_at_a_step_boundary_and_still_reports(tmp_path: Path) -> None:
    write_spec(tmp_path / "spec.json", model="RS")
    proc = start_worker(*common(tmp_path, "s", 10**7))
    line = proc.stdout.readline()  # printed when the training loop starts
    assert "training RS/tiny" in line, line
    # half a second of CPU time since then (not of wall time, which a loaded machine may not
    # give it): many steps of a tiny model on any machine, so the stop lands after some
    cpu = cpu_seconds(proc.pid)
    wait_for_cpu(proc, cpu + 0.5)
    proc.send_signal(signal.SIGTERM)
    run = finish(proc, tmp_path / "s.json")
    assert run.returncode == 0 and "Traceback" not in run.stderr, run.stderr
    res = run.result
    assert res["status"] == "ok" and res["stopped_by"] == "signal" and res["steps_done"] > 0
    ck = load_checkpoint(tmp_path / "s.pt", "RS", "tiny")
    assert ck["steps"] == res["steps_done"] and res["sha256"] == sha256_file(tmp_path / "s.pt")


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of process ``pid`` (``/proc/PID/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_for_cpu(proc: subprocess.Popen[str], total_s: float) -> None:
    """Until ``proc`` has used ``total_s`` seconds of CPU (or :data:`HANG_S` passed)."""
    end = time.monotonic() + HANG_S
    while cpu_seconds(proc.pid) < total_s:
        assert proc.poll() is None, "the worker ended before it was stopped"
        assert time.monotonic() < end, "the worker used no CPU"
        time.sleep(0.02)


def test_bad_spec_data_and_checkpoint_exit_2_with_one_line(tmp_path: Path) -> None:
    cases = {}
    for name, spec_kw, extra in [
        ("model", {"model": "IC", "data": "synthetic"}, []),
        ("data", {"model": "IC", "data": str(tmp_path / "no-such-cifar")}, []),
        ("ckpt", {"model": "IC"}, ["--checkpoint-in", tmp_path / "lm.pt"]),
    ]:
        d = tmp_path / name
        d.mkdir()
        write_spec(d / "spec.json", **spec_kw)
        cases[name] = (d, extra)
    raw = json.loads((tmp_path / "model" / "spec.json").read_text())
    (tmp_path / "model" / "spec.json").write_text(json.dumps(dict(raw, model="VGG")))
    torch.manual_seed(0)
    lm = build_model("LM", "tiny")
    save_checkpoint(
        tmp_path / "lm.pt",
        model="LM",
        size="tiny",
        state_dict=lm.state_dict(),
        optimizer=None,
        steps=3,
    )
    procs = {n: start_worker(*common(d, "out", 5), *extra) for n, (d, extra) in cases.items()}
    runs = {n: finish(p, cases[n][0] / "out.json") for n, p in procs.items()}
    assert_clean_exit_2(runs["model"], "model: unknown model 'VGG'")
    assert_clean_exit_2(runs["data"], f"data: path does not exist: {tmp_path / 'no-such-cifar'}")
    assert_clean_exit_2(runs["ckpt"], "checkpoint is for model 'LM', expected 'IC'")
    for d, _ in cases.values():
        assert not (d / "out.pt").exists()


def test_speed_factor_slows_the_measured_step_rate(tmp_path: Path) -> None:
    """F = 0.25 sleeps 3x each step's compute time: steps/s well under 0.7x of F = 1.
    Both time windows last seconds, so one stall of a process cannot decide the ratio."""
    write_spec(tmp_path / "spec.json", model="RS")
    # a deadline no loaded machine reaches: both train every step
    fast = start_worker(*common(tmp_path, "fast", 2000, deadline=BUDGET_DEADLINE_S))
    slow = start_worker(
        *common(tmp_path, "slow", 500, deadline=BUDGET_DEADLINE_S), "--speed-factor", "0.25"
    )
    rf, rs = finish(fast, tmp_path / "fast.json"), finish(slow, tmp_path / "slow.json")
    assert rf.returncode == 0 and rs.returncode == 0, rf.stderr + rs.stderr
    assert rs.result["speed_factor"] == 0.25 and rs.result["steps_done"] == 500
    ratio = rs.result["steps_per_second"] / rf.result["steps_per_second"]
    assert ratio < 0.7, ratio


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--speed-factor", "0"], "--speed-factor: must be in (0, 1], got 0.0"),
        (["--speed-factor", "1.5"], "--speed-factor: must be in (0, 1], got 1.5"),
        (
            ["--rank", "2", "--world-size", "2", "--master-addr", "h", "--master-port", "1"],
            "--rank: must be in [0, 2), got 2",
        ),
        (["--world-size", "2"], "--master-addr/--master-port: required when --world-size > 1"),
        (["--steps", "-1"], "--steps: must be >= 0, got -1"),
        (["--bogus"], "unrecognized arguments: --bogus"),
        (["--device", "tpu"], "argument --device: invalid choice: 'tpu'"),
    ],
)
def test_bad_arguments_exit_2_with_one_line(tmp_path: Path, capsys, args, needle) -> None:
    write_spec(tmp_path / "spec.json")
    base = [
        "--spec",
        str(tmp_path / "spec.json"),
        "--steps",
        "1",
        "--deadline-s",
        "30",
        "--checkpoint-out",
        str(tmp_path / "c.pt"),
        "--result",
        str(tmp_path / "r.json"),
    ]
    assert main(base + args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and needle in err[0], err


def test_bad_specs_exit_2_naming_the_field(tmp_path: Path, capsys) -> None:
    spec = tmp_path / "spec.json"
    argv = [
        "--spec",
        str(spec),
        "--steps",
        "1",
        "--deadline-s",
        "30",
        "--checkpoint-out",
        str(tmp_path / "c.pt"),
        "--result",
        str(tmp_path / "r.json"),
    ]
    good = {"model": "IC", "size": "tiny", "data": "synthetic", "batch_size": 4, "lr": 0.1}
    for raw, needle in [
        (dict(good, epochs=3), "epochs: unknown field"),
        ({k: v for k, v in good.items() if k != "lr"}, "lr: missing required field"),
        (
            dict(good, size="large"),
            "size: Input should be 'tiny', 'small' or 'paper' (got 'large')",
        ),
        (dict(good, batch_size=0), "batch_size: Input should be greater than 0 (got 0)"),
        (dict(good, batch_size="8"), "batch_size: Input should be a valid integer (got '8')"),
    ]:
        spec.write_text(json.dumps(raw))
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert err == [f"hadar-worker: error: {spec}: {needle}"], err
    spec.write_text("{not json")
    assert main(argv) == 2
    assert "malformed JSON" in capsys.readouterr().err
    assert main(["--spec", str(tmp_path / "none.json")] + argv[2:]) == 2
    assert "spec file not found" in capsys.readouterr().err


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA GPU")
def test_cuda_requested_without_a_gpu_exits_2(tmp_path: Path, capsys) -> None:
    write_spec(tmp_path / "spec.json")
    argv = [
        "--spec",
        str(tmp_path / "spec.json"),
        "--steps",
        "1",
        "--deadline-s",
        "30",
        "--checkpoint-out",
        str(tmp_path / "c.pt"),
        "--result",
        str(tmp_path / "r.json"),
        "--device",
        "cuda",
    ]
    assert main(argv) == 2
    assert capsys.readouterr().err.strip() == (
        "hadar-worker: error: --device: cuda requested but no CUDA GPU is available"
    )
    assert json.loads((tmp_path / "r.json").read_text())["status"] == "error"


def test_first_and_final_loss_average_the_ends_of_the_round() -> None:
    assert loss_ends([]) == (None, None)
    assert loss_ends([3.0]) == (3.0, 3.0)
    assert loss_ends([4.0, 3.0, 2.0, 1.0]) == (3.5, 1.5)
    assert loss_ends([float(i) for i in range(30)]) == (4.5, 24.5)
