"""One training round of one job (copy) on one device, optionally as a rank of a DDP gang.

The loop stops at the step budget, before a step that would overrun the deadline (keeping a
reserve for writing the checkpoint), or at the first step boundary after a stop request
(SIGTERM). In a gang the ranks agree on stopping each step (an all-reduce of the stop flags)
so they always run the same number of steps.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from nodes.datasets import Batch, Dataset
from nodes.gradstats import GradMeter
from nodes.models import ModelEntry

SAVE_BYTES_PER_SECOND = 100e6
"""Conservative write speed used to reserve time for the checkpoint before the deadline."""


@dataclass
class RoundOutcome:
    steps_done: int = 0
    train_seconds: float = 0.0
    losses: list[float] = field(default_factory=list)
    stopped_by: str = "steps"  # steps | deadline | signal


def to_device(batch: Batch, device: torch.device) -> Batch:
    return {k: v.to(device, non_blocking=True) for k, v in batch.items()}


def state_bytes(model: nn.Module, optimizer: torch.optim.Optimizer) -> int:
    n: int = sum(t.numel() * t.element_size() for t in model.state_dict().values())
    for st in optimizer.state.values():
        n += sum(v.numel() * v.element_size() for v in st.values() if isinstance(v, torch.Tensor))
    return n


def save_reserve_seconds(model: nn.Module, optimizer: torch.optim.Optimizer) -> float:
    """Time kept free before the deadline for writing the checkpoint (and the result)."""
    return 0.25 + 3 * state_bytes(model, optimizer) / SAVE_BYTES_PER_SECOND


def join_gang(
    rank: int, world_size: int, addr: str, port: int, device: torch.device, timeout_s: float
) -> None:
    """Join the job's process group (NCCL on CUDA, gloo otherwise) via ``tcp://addr:port``."""
    backend = "nccl" if device.type == "cuda" else "gloo"
    dist.init_process_group(
        backend,
        init_method=f"tcp://{addr}:{port}",
        rank=rank,
        world_size=world_size,
        timeout=timedelta(seconds=timeout_s),
    )


def wrap_ddp(model: nn.Module, device: torch.device) -> nn.Module:
    ids = (
        [device.index if device.index is not None else torch.cuda.current_device()]
        if device.type == "cuda"
        else None
    )
    return DistributedDataParallel(model, device_ids=ids)


def any_rank(flag: bool, device: torch.device) -> bool:
    """True on every rank if ``flag`` is true on any rank (a MAX all-reduce)."""
    t = torch.tensor([1.0 if flag else 0.0], device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return bool(t.item() > 0)


def average_buffers(model: nn.Module) -> None:
    """Average floating-point buffers (BatchNorm running statistics) over the gang, so every
    rank ends the round with an identical state_dict."""
    world = dist.get_world_size()
    for buf in model.buffers():
        if buf.is_floating_point():
            dist.all_reduce(buf, op=dist.ReduceOp.SUM)
            buf.div_(world)


def mixed_precision(precision: str, device: torch.device) -> tuple[Callable[[], Any], Any]:
    """The autocast context factory and gradient scaler of a precision: ``fp32`` neither,
    ``bf16`` autocast to bfloat16, ``fp16`` autocast to float16 with a gradient scaler (a
    disabled scaler is a no-op pass-through)."""
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
    enabled = dtype is not None
    scaler = torch.amp.GradScaler(device.type, enabled=precision == "fp16")
    return (lambda: torch.autocast(device.type, dtype=dtype, enabled=enabled)), scaler


def train_round(
    *,
    entry: ModelEntry,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    data: Dataset,
    device: torch.device,
    start_steps: int,
    max_steps: int,
    deadline: float,
    speed_factor: float,
    stop_requested: Callable[[], bool],
    rank: int = 0,
    world_size: int = 1,
    clock: Callable[[], float] = time.monotonic,
    precision: str = "fp32",
    meter: GradMeter | None = None,
) -> RoundOutcome:
    """Train ``model`` (wrapped in DDP when ``world_size > 1``) for up to ``max_steps`` steps.

    ``deadline`` is an absolute ``clock()`` time. After each step the worker sleeps
    ``(1/speed_factor - 1)`` times that step's compute time (forward, backward and optimizer
    step, excluding batch preparation) to emulate a slower GPU. ``train_seconds`` runs from the
    first step's start to the last step's end, so in a gang it includes waiting for slower ranks.
    ``meter`` (elastic rounds) reads each step's gradients after the backward pass.
    """
    out = RoundOutcome()
    autocast, scaler = mixed_precision(precision, device)
    reserve = save_reserve_seconds(model, optimizer)
    gang = world_size > 1
    period = 0.0  # duration of the last iteration, consensus waits included
    first_start: float | None = None
    prev_end = 0.0  # end of the previous iteration; set to the first one's start
    model.train()
    while True:
        reason = None
        if out.steps_done >= max_steps:
            reason = "steps"
        elif stop_requested():
            reason = "signal"
        elif clock() + period + reserve > deadline:
            reason = "deadline"
        stop = reason is not None
        if gang:
            stop = any_rank(stop, device)
            if stop and reason is None:
                reason = "signal" if stop_requested() else "peer"
        if stop:
            out.stopped_by = reason or "steps"
            break
        step_start = clock()
        if first_start is None:
            first_start = prev_end = step_start
        batch = to_device(data.train_batch(start_steps + out.steps_done, rank, world_size), device)
        compute_start = clock()
        with autocast():
            loss = entry.loss(model, batch)
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        if meter is not None:
            meter.after_backward(model, float(scaler.get_scale()) if scaler.is_enabled() else 1.0)
        if entry.grad_clip:
            scaler.unscale_(optimizer)
            nn.utils.clip_grad_norm_(model.parameters(), entry.grad_clip)
        scaler.step(optimizer)
        scaler.update()
        out.losses.append(float(loss.detach()))
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        compute = clock() - compute_start
        if speed_factor < 1.0:
            time.sleep((1.0 / speed_factor - 1.0) * compute)
        end = clock()
        period, prev_end = end - prev_end, end
        out.steps_done += 1
        out.train_seconds = end - first_start
    return out
