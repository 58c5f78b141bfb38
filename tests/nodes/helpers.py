"""Shared helpers for the runtime tests: tiny dataset files in the real on-disk formats and a
runner for the worker as a real subprocess."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tests.fixtures.processes import HANG_S

REPO = Path(__file__).resolve().parents[2]

LR = {"IC": 0.05, "LM": 20.0, "LT": 2e-3, "RS": 0.01, "MM": 3e-3}


def spec(model: str = "IC", data: str = "synthetic", **over: Any) -> dict[str, Any]:
    out = {
        "model": model,
        "size": "tiny",
        "data": data,
        "batch_size": 8,
        "lr": LR[model.upper()],
        "seed": 0,
    }
    out.update(over)
    return out


def write_spec(path: Path, **kw: Any) -> Path:
    path.write_text(json.dumps(spec(**kw)))
    return path


# --- real-format files -------------------------------------------------------------------------


def write_cifar10(root: Path, per_batch: int = 8, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    root.mkdir(parents=True, exist_ok=True)
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        labels = rng.integers(0, 10, per_batch)
        data = rng.integers(0, 256, (per_batch, 3072), dtype=np.uint8)
        with (root / name).open("wb") as f:
            pickle.dump(
                {
                    b"batch_label": name.encode(),
                    b"labels": labels.tolist(),
                    b"data": data,
                    b"filenames": [b"x.png"] * per_batch,
                },
                f,
            )
    return root


WORDS = [
    "the",
    "cat",
    "sat",
    "on",
    "a",
    "mat",
    "and",
    "the",
    "dog",
    "ran",
    "to",
    "the",
    "park",
    "with",
    "a",
    "red",
    "ball",
]


def write_wikitext2(root: Path, lines: int = 60, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    root.mkdir(parents=True, exist_ok=True)
    for name, n in (("wiki.train.tokens", lines), ("wiki.valid.tokens", lines // 3)):
        text = [" = Heading = ", ""]
        text += [" ".join(rng.choice(WORDS, rng.integers(5, 12))) + " ." for _ in range(n)]
        (root / name).write_text("\n".join(text) + "\n", encoding="utf-8")
    return root


DE = {
    "der": "the",
    "hund": "dog",
    "katze": "cat",
    "läuft": "runs",
    "schläft": "sleeps",
    "im": "in",
    "park": "park",
    "garten": "garden",
    "ein": "a",
    "rote": "red",
}


def write_multi30k(root: Path, train: int = 40, val: int = 10, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    root.mkdir(parents=True, exist_ok=True)
    keys = list(DE)
    for split, n in (("train", train), ("val", val)):
        de, en = [], []
        for _ in range(n):
            words = list(rng.choice(keys, rng.integers(3, 9)))
            de.append(" ".join(words).capitalize() + ".")
            en.append(" ".join(DE[w] for w in words).capitalize() + ".")
        (root / f"{split}.de").write_text("\n".join(de) + "\n", encoding="utf-8")
        (root / f"{split}.en").write_text("\n".join(en) + "\n", encoding="utf-8")
    return root


def write_movielens(root: Path, users: int = 60, movies: int = 300, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    root.mkdir(parents=True, exist_ok=True)
    rows = ["userId,movieId,rating,timestamp"]
    for u in range(1, users + 1):
        for m in sorted(
            rng.choice(np.arange(1, movies + 1) * 7, rng.integers(10, 40), replace=False)
        ):
            rows.append(
                f"{u},{m},{rng.integers(1, 11) / 2:.1f},{1100000000 + int(rng.integers(0, 10**8))}"
            )
    (root / "ratings.csv").write_text("\n".join(rows) + "\n")
    return root


MICRO = [
    "micro_temp_2m",
    "micro_rh",
    "micro_wind_speed",
    "micro_wind_dir",
    "micro_pressure",
    "micro_solar_rad",
]
MACRO = ["macro_t850", "macro_rh700", "macro_u850", "macro_v850", "macro_z500", "macro_pwat"]


def write_mima(path: Path, rows: int = 200, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    t = np.arange(rows)
    lines = [",".join(["timestamp", *MICRO, *MACRO])]
    for i in t:
        stamp = np.datetime64("2021-06-01T00:00") + np.timedelta64(5 * int(i), "m")
        vals = [10 + 5 * np.sin(2 * np.pi * i / 288 + k) + rng.normal() for k in range(12)]
        lines.append(",".join([str(stamp)] + [f"{v:.3f}" for v in vals]))
    path.write_text("\n".join(lines) + "\n")
    return path


# --- running the worker -----------------------------------------------------------------------


@dataclass
class WorkerRun:
    returncode: int
    stdout: str
    stderr: str
    result: dict[str, Any] | None


def worker_cmd(*args: str | Path) -> list[str]:
    return [sys.executable, "-m", "nodes.worker", "--threads", "1", *map(str, args)]


def start_worker(
    *args: str | Path,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    module: str = "nodes.worker",
) -> subprocess.Popen[str]:
    """Start ``python -m nodes.worker`` (or ``module``, e.g. ``nodes.warm run --``) with this
    process's environment plus ``env``."""
    full = dict(
        os.environ,
        PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""),
        **(env or {}),
    )
    argv = worker_cmd(*args)
    argv[2:3] = module.split()
    return subprocess.Popen(
        argv, cwd=cwd or REPO, env=full, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )


def finish(proc: subprocess.Popen[str], result: Path | None, timeout: float = HANG_S) -> WorkerRun:
    out, err = proc.communicate(timeout=timeout)
    res = json.loads(result.read_text()) if result is not None and result.exists() else None
    return WorkerRun(proc.returncode, out, err, res)


def run_worker(
    *args: str | Path,
    result: Path | None = None,
    timeout: float = HANG_S,
    env: dict[str, str] | None = None,
) -> WorkerRun:
    return finish(start_worker(*args, env=env), result, timeout)


BUDGET_DEADLINE_S = HANG_S - 60
"""The deadline of a round that must train its whole step budget: no loaded machine reaches it
(a fixed 120 s is a speed a machine starting two torch processes under load can miss), and the
worker still ends before a test counts it as hung."""


def round_args(tmp: Path, name: str, steps: int = 4, *extra: str | Path) -> list[str | Path]:
    """Worker arguments for one round: spec ``tmp/spec.json``, checkpoint and result ``tmp/name.*``."""
    return [
        "--spec",
        tmp / "spec.json",
        "--steps",
        str(steps),
        "--deadline-s",
        f"{BUDGET_DEADLINE_S:g}",
        "--checkpoint-out",
        tmp / f"{name}.pt",
        "--result",
        tmp / f"{name}.json",
        *extra,
    ]


def stop_warm_server(cwd: Path) -> None:
    """Let the warm server of ``cwd`` exit (``python -m nodes.warm stop``)."""
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    done = subprocess.run(
        [sys.executable, "-m", "nodes.warm", "stop"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=HANG_S,
    )
    assert done.returncode == 0, done.stderr
