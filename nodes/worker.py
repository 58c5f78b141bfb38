"""The node worker: trains one round of one job (copy) and reports what it did.

    python -m nodes.worker --spec spec.json --steps N --deadline-s SECONDS \
        --checkpoint-out ckpt.pt --result result.json [--checkpoint-in prev.pt] \
        [--speed-factor F] [--device auto|cpu|cuda] [--data-stream K] [--eval] [--threads T] \
        [--rank R --world-size W --local-rank L --master-addr A --master-port P]

Gang and device options default to torchrun's environment variables (RANK, WORLD_SIZE,
LOCAL_RANK, MASTER_ADDR, MASTER_PORT); the coordinator sets those and CUDA_VISIBLE_DEVICES.

Exit codes: 0 done (also after SIGTERM: it stops at the next step boundary and still writes the
checkpoint and the result), 2 bad spec, arguments, data or checkpoint (one line on stderr),
1 unexpected failure. See docs/worker.md for the contracts.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import time
import traceback
from pathlib import Path
from typing import Any, NoReturn

from hadar.core.errors import HadarError, InputError
from hadar.core.io import check_writable, write_json
from hadar.core.safe_paths import real_subfolder


def process_start() -> float:
    """This process's start on the ``time.monotonic()`` clock (Linux ``/proc``; elsewhere: now)."""
    now = time.monotonic()
    try:
        with open("/proc/self/stat") as f:
            start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        age = uptime - start_ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return now
    return now - min(max(age, 0.0), 60.0)


_T0 = process_start()
"""The origin of ``--deadline-s`` and ``wall_seconds``."""

PROG = "hadar-worker"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise InputError(message)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog=PROG, description="Train one round of one job on this node.")
    p.add_argument(
        "--spec", required=True, help="job spec JSON (model, size, data, batch_size, lr, seed)"
    )
    p.add_argument("--steps", required=True, type=int, help="step budget of this round")
    p.add_argument(
        "--deadline-s",
        required=True,
        type=float,
        help="wall seconds from process start by which the result must be written",
    )
    p.add_argument(
        "--checkpoint-out", help="where to write the new checkpoint (required on rank 0)"
    )
    p.add_argument("--result", required=True, help="where to write the result JSON")
    p.add_argument(
        "--checkpoint-in", help="checkpoint to resume from (default: fresh init from the seed)"
    )
    p.add_argument(
        "--speed-factor",
        type=float,
        default=1.0,
        help="0 < F <= 1: emulate a GPU F times as fast as this one",
    )
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    p.add_argument(
        "--data-stream", type=int, default=0, help="data order stream (HadarE copy index)"
    )
    p.add_argument("--eval", action="store_true", help="score the held-out split after training")
    p.add_argument("--threads", type=int, default=0, help="torch CPU threads (0 = torch default)")
    p.add_argument(
        "--measure",
        action="store_true",
        help="elastic rounds: report step and sync times and gradient statistics",
    )
    env = os.environ
    p.add_argument(
        "--rank", type=int, default=_env_int("RANK", 0), help="gang rank (default: $RANK or 0)"
    )
    p.add_argument(
        "--world-size",
        type=int,
        default=_env_int("WORLD_SIZE", 1),
        help="gang size (default: $WORLD_SIZE or 1)",
    )
    p.add_argument(
        "--local-rank",
        type=int,
        default=_env_int("LOCAL_RANK", 0),
        help="this process's CUDA device among the visible ones (default: $LOCAL_RANK or 0)",
    )
    p.add_argument(
        "--master-addr",
        default=env.get("MASTER_ADDR") or None,
        help="rendezvous host of a gang (world size > 1; default: $MASTER_ADDR)",
    )
    p.add_argument(
        "--master-port",
        type=int,
        default=_env_int("MASTER_PORT", None),
        help="rendezvous port of a gang (world size > 1; default: $MASTER_PORT)",
    )
    return p


PINNING_ENV = (
    "CUDA_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER",
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
)
"""The environment that places a worker (torchrun's conventions); recorded in the result."""


def _env_int(name: str, default: int | None) -> int | None:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError:
        raise InputError(f"${name}: not an integer: {raw!r}") from None


def check_args(a: argparse.Namespace) -> None:
    if a.steps < 0:
        raise InputError(f"--steps: must be >= 0, got {a.steps}")
    if not a.deadline_s > 0:
        raise InputError(f"--deadline-s: must be > 0, got {a.deadline_s}")
    if not 0 < a.speed_factor <= 1:
        raise InputError(f"--speed-factor: must be in (0, 1], got {a.speed_factor}")
    if a.data_stream < 0:
        raise InputError(f"--data-stream: must be >= 0, got {a.data_stream}")
    if a.threads < 0:
        raise InputError(f"--threads: must be >= 0, got {a.threads}")
    if a.world_size < 1:
        raise InputError(f"--world-size: must be >= 1, got {a.world_size}")
    if not 0 <= a.rank < a.world_size:
        raise InputError(f"--rank: must be in [0, {a.world_size}), got {a.rank}")
    if a.local_rank < 0:
        raise InputError(f"--local-rank: must be >= 0, got {a.local_rank}")
    if a.world_size > 1 and (not a.master_addr or a.master_port is None):
        raise InputError("--master-addr/--master-port: required when --world-size > 1")
    if a.master_port is not None and not 0 < a.master_port < 65536:
        raise InputError(f"--master-port: not a TCP port: {a.master_port}")
    if a.rank == 0 and not a.checkpoint_out:
        raise InputError("--checkpoint-out: required on rank 0")


class _StopFlag:
    def __init__(self) -> None:
        self.set = False

    def __call__(self, signum: int, frame: object) -> None:
        self.set = True


def select_device(choice: str, local_rank: int = 0) -> Any:
    """``auto``: the visible CUDA device of this local rank if there is a GPU, else the CPU;
    ``cuda`` without a GPU, or a local rank without a visible device, is bad input."""
    import torch

    if choice == "cuda" and not torch.cuda.is_available():
        raise InputError("--device: cuda requested but no CUDA GPU is available")
    if choice == "cpu" or not torch.cuda.is_available():
        return torch.device("cpu")
    visible = torch.cuda.device_count()
    if local_rank >= visible:
        shown = os.environ.get("CUDA_VISIBLE_DEVICES")
        raise InputError(
            f"--local-rank: {local_rank} needs {local_rank + 1} visible CUDA devices, this process "
            f"sees {visible} (CUDA_VISIBLE_DEVICES={shown if shown is not None else 'unset'})"
        )
    torch.cuda.set_device(local_rank)
    return torch.device("cuda", local_rank)


def gpu_identity(device: Any) -> dict[str, Any] | None:
    """Which physical GPU a CUDA device is (name and UUID, as ``nvidia-smi`` shows them) and how
    many devices this process sees; None on the CPU."""
    if device.type != "cuda":
        return None
    import torch

    props = torch.cuda.get_device_properties(device)
    uuid = getattr(props, "uuid", None)
    text = str(uuid) if uuid is not None else None
    return {
        "name": props.name,
        "uuid": f"GPU-{text}" if text and not text.startswith("GPU-") else text,
        "visible": torch.cuda.device_count(),
    }


def effective_precision(requested: str, device: Any) -> str:
    """The precision a round trains in: the spec's, except ``fp16`` on the CPU, which trains in
    ``fp32`` (CPU autocast supports bfloat16 well, float16 poorly). Reported in the result."""
    return "fp32" if requested == "fp16" and device.type != "cuda" else requested


def restore(
    spec: Any, ckpt: dict[str, Any] | None, ckpt_path: str | None, device: Any
) -> tuple[Any, Any]:
    """The model (fresh from the spec's seed, or the checkpoint's weights) on ``device`` and its
    optimizer (with the checkpoint's state if any; the learning rate always from the spec)."""
    import torch

    from nodes.models import build_model, get_entry

    torch.manual_seed(spec.seed)
    model = build_model(spec.model, spec.size)
    if ckpt:
        model.load_state_dict(ckpt["state_dict"])
    model.to(device)
    optimizer = get_entry(spec.model).optimizer(model.parameters(), spec.lr)
    if ckpt and ckpt.get("optimizer") is not None:
        try:
            optimizer.load_state_dict(ckpt["optimizer"])
        except (ValueError, KeyError, RuntimeError) as exc:
            msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            raise InputError(
                f"{ckpt_path}: optimizer state does not match {spec.model}/{spec.size} ({msg})"
            ) from None
    for group in optimizer.param_groups:
        group["lr"] = spec.lr
    return model, optimizer


def loss_ends(losses: list[float]) -> tuple[float | None, float | None]:
    """Mean loss of the first and of the last ``k = min(10, max(1, n // 2))`` steps."""
    if not losses:
        return None, None
    k = min(10, max(1, len(losses) // 2))
    return sum(losses[:k]) / k, sum(losses[-k:]) / k


def run(a: argparse.Namespace, stop: _StopFlag, t0: float) -> dict[str, Any]:
    """Train one round as described by the parsed arguments; returns the result record."""
    check_args(a)
    import torch  # heavy imports only after the arguments are known to be sane
    import torch.distributed as dist

    from nodes.checkpoint import load_checkpoint, save_checkpoint
    from nodes.datasets import open_dataset
    from nodes.datasets.base import derive_seed
    from nodes.models import get_entry
    from nodes.spec import load_spec
    from nodes.trainer import average_buffers, join_gang, to_device, train_round, wrap_ddp

    spec = load_spec(a.spec)
    if a.threads:
        torch.set_num_threads(a.threads)
    device = select_device(a.device, a.local_rank)
    ckpt = load_checkpoint(a.checkpoint_in, spec.model, spec.size) if a.checkpoint_in else None
    start_steps = ckpt["steps"] if ckpt else 0
    entry = get_entry(spec.model)
    data = open_dataset(
        spec.model,
        spec.size,
        spec.data,
        seed=spec.seed,
        stream=a.data_stream,
        batch_size=spec.batch_size,
    )
    model, optimizer = restore(spec, ckpt, a.checkpoint_in, device)
    torch.manual_seed(derive_seed(spec.seed, a.data_stream, start_steps, a.rank, 7))  # dropout

    deadline = t0 + a.deadline_s
    gang = a.world_size > 1
    if gang:
        try:
            join_gang(
                a.rank,
                a.world_size,
                a.master_addr,
                a.master_port,
                device,
                timeout_s=max(10.0, deadline - time.monotonic()),
            )
        except (RuntimeError, ValueError, OSError) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise RuntimeError(
                f"rank {a.rank}: could not join the gang at tcp://{a.master_addr}:"
                f"{a.master_port}: {first}"
            ) from None
    precision = effective_precision(spec.precision, device)
    print(
        f"{PROG}: rank {a.rank}/{a.world_size} training {spec.model}/{spec.size} on {device} "
        f"({precision}) from step {start_steps} (budget {a.steps} steps, deadline {a.deadline_s:g} s)",
        flush=True,
    )
    meter = None
    trained = wrap_ddp(model, device) if gang else model
    if a.measure:
        from nodes.gradstats import GradMeter

        meter = GradMeter(a.world_size)
        if gang:
            meter.attach(trained)
    outcome = train_round(
        entry=entry,
        model=trained,
        optimizer=optimizer,
        data=data,
        device=device,
        start_steps=start_steps,
        max_steps=a.steps,
        deadline=deadline,
        speed_factor=a.speed_factor,
        stop_requested=lambda: stop.set,
        rank=a.rank,
        world_size=a.world_size,
        precision=precision,
        meter=meter,
    )
    if gang:
        average_buffers(model)
    measured = None
    if meter is not None:
        measured = {
            "local_bsz": spec.batch_size,
            "step_time": outcome.train_seconds / outcome.steps_done if outcome.steps_done else 0.0,
            **meter.summary(device),
        }

    end_steps = start_steps + outcome.steps_done
    ckpt_out, sha = None, None
    if a.checkpoint_out:
        ckpt_out = str(Path(a.checkpoint_out))
        sha = save_checkpoint(
            ckpt_out,
            model=spec.model,
            size=spec.size,
            state_dict=model.state_dict(),
            optimizer=optimizer.state_dict(),
            steps=end_steps,
        )
    metric = None
    if a.eval:
        model.eval()
        value = entry.evaluate(model, (to_device(b, device) for b in data.heldout_batches()))
        metric = {"name": entry.metric, "value": value}
    if gang:
        # the DDP wrapper (its reducer and any comm hook) goes before the process group it uses:
        # torn down after it, at this function's return, it could hang a rank
        del trained
        dist.destroy_process_group()

    first_loss, final_loss = loss_ends(outcome.losses)
    result: dict[str, Any] = {
        "status": "ok",
        "model": spec.model,
        "size": spec.size,
        "steps_done": outcome.steps_done,
        "start_steps": start_steps,
        "end_steps": end_steps,
        "stopped_by": outcome.stopped_by,
        "wall_seconds": 0.0,  # set just before the result is written
        "train_seconds": outcome.train_seconds,
        "steps_per_second": (
            outcome.steps_done / outcome.train_seconds if outcome.train_seconds > 0 else 0.0
        ),
        "first_loss": first_loss,
        "final_loss": final_loss,
        "checkpoint": None if ckpt_out is None else shown(a, "checkpoint_out"),
        "sha256": sha,
        "device": str(device),
        "precision": precision,
        "gpu": gpu_identity(device),
        "env": {k: os.environ[k] for k in PINNING_ENV if k in os.environ},
        "speed_factor": a.speed_factor,
        "data_stream": a.data_stream,
        "rank": a.rank,
        "world_size": a.world_size,
    }
    if metric is not None:
        result["metric"] = metric
    if measured is not None:
        result["elastic"] = measured
    return result


def main(argv: list[str] | None = None) -> int:
    """Run the worker; returns the exit code.

    As a program (``argv`` None) the deadline counts from the process start and the worker ends
    with ``os._exit`` once its files are written and output flushed, skipping the interpreter's
    1-2 s torch teardown. Called with ``argv`` (tests, embedding) it counts from the call and
    returns normally, restoring the signal handlers it installed.
    """
    if argv is None:
        code = _main(None, _T0)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return _main(argv, time.monotonic())


def check_result_path(path: str) -> None:
    """One-line InputError (exit 2) unless the result file can be written: its folder exists or
    can be created and is writable, and the path is no device, FIFO, socket or folder."""
    p = Path(path)
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(
            f"--result {path}: cannot create its folder: {exc.strerror or exc}"
        ) from None
    if not os.access(p.parent, os.W_OK):
        raise InputError(f"--result {path}: its folder is not writable")
    check_writable(p)


_TASK_FILES = ("spec", "result", "checkpoint_out", "checkpoint_in")
"""The arguments naming the task's files, which the coordinator puts in one task folder."""


def enter_task_folder(args: argparse.Namespace) -> int | None:
    """Hold the folder the task's files share (the coordinator's ``rNNNN-aK/jJ-cC``, relative to
    the node's working directory), opened one component at a time without following a link
    (created when missing; ``safe_paths.real_subfolder``), and name the files through that
    descriptor (``/proc/self/fd/N/<name>``): a folder swapped for a link while the worker runs
    is never read or written through, nor is one planted before it starts (exit 2). The working
    directory stays the node's (a spec's relative ``data`` path is relative to it). Returns the
    descriptor to close at the end, None where the files are given as absolute paths or not in
    one folder (used as given). Mutates ``args``."""
    given = {name: getattr(args, name) for name in _TASK_FILES if getattr(args, name, None)}
    folders = {Path(path).parent for path in given.values()}
    if len(folders) != 1:
        return None
    folder = folders.pop()
    if folder.is_absolute() or folder == Path():
        return None
    try:
        with real_subfolder(folder, create=True) as fd:
            held = os.dup(fd)
    except OSError as exc:
        raise InputError(f"{folder}: cannot open the task folder: {exc.strerror or exc}") from None
    for name, path in given.items():
        setattr(args, name, f"/proc/self/fd/{held}/{Path(path).name}")
    args.given_paths = given  # what results and messages name
    return held


def shown(args: argparse.Namespace, name: str) -> str:
    """The path of task file ``name`` as the command line gave it."""
    given: dict[str, str] = getattr(args, "given_paths", {})
    return str(given.get(name, getattr(args, name)))


def _main(argv: list[str] | None, t0: float) -> int:
    held: list[int] = []
    try:
        return _main_in_folder(argv, t0, held)
    finally:
        for fd in held:
            os.close(fd)


def _main_in_folder(argv: list[str] | None, t0: float, held: list[int]) -> int:
    stop = _StopFlag()
    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGINT)}
    result_path = None
    try:
        args = build_parser().parse_args(argv)
        folder = enter_task_folder(args)
        if folder is not None:
            held.append(folder)
        check_result_path(args.result)  # before any training: a round's work needs somewhere to go
        result_path = args.result
        result = run(args, stop, t0)
        result["wall_seconds"] = time.monotonic() - t0
        try:
            write_json(args.result, result)
        except OSError as exc:
            raise InputError(
                f"--result {shown(args, 'result')}: cannot write: {exc.strerror or exc}"
            ) from None
        return 0
    except HadarError as exc:
        msg, code = str(exc), exc.exit_code
        print(f"{PROG}: error: {msg}", file=sys.stderr)
    except Exception as exc:  # noqa: BLE001 - report any failure as exit 1 with a summary line
        traceback.print_exc()
        msg, code = f"{type(exc).__name__}: {exc}".splitlines()[0], 1
        print(f"{PROG}: unexpected failure: {msg}", file=sys.stderr)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if result_path:
        with contextlib.suppress(OSError):
            write_json(
                result_path,
                {
                    "status": "error",
                    "error": msg,
                    "exit_code": code,
                    "wall_seconds": time.monotonic() - t0,
                },
            )
    return code


if __name__ == "__main__":
    sys.exit(main())
