"""What a worker measures of an elastic job's round (``hadar-worker --measure``): the time each
step spends in the gradient all-reduce, and the gradient statistics behind Pollux's noise-scale
estimate (Pollux §3.1 and its appendix; McCandlish et al. 2018, App. A.1).

* **Gangs (K >= 2 replicas).** A DDP communication hook (:meth:`GradMeter.attach`) sees each
  gradient bucket *before* it is averaged: it adds the bucket's squared norm to this replica's
  local |g_k|^2, then all-reduces the bucket synchronously and times it (the step's sync time;
  DDP's usual overlap of the all-reduce with the backward pass is given up while measuring, so
  compute and synchronisation are measured apart). After the backward pass the averaged
  gradient's |g|^2 is read from the parameters. At the end of the round the replicas' mean
  |g_k|^2 are gathered, so rank 0 reports every replica's.
* **One replica.** Successive steps stand in for replicas (Pollux's fallback): the mean of
  |g_t - g_(t-1)|^2 and of g_t . g_(t-1) over consecutive steps.

Norms are taken before gradient clipping and with the fp16 loss scale divided out.
"""

from __future__ import annotations

import time
from typing import Any

import torch
import torch.distributed as dist
from torch import nn


class GradMeter:
    """Accumulates one round's per-step measurements (module docstring)."""

    def __init__(self, world_size: int) -> None:
        self.world_size = world_size
        self.sync_seconds = 0.0
        self.steps = 0
        self._local = 0.0  # this step's local squared norm (hook), loss-scaled
        self._local_sum = 0.0
        self._mean_sum = 0.0
        self._prev: torch.Tensor | None = None
        self._diff_sum = 0.0
        self._dot_sum = 0.0
        self._pairs = 0

    def attach(self, ddp: nn.Module) -> None:
        """Install the measuring all-reduce on a DistributedDataParallel model."""
        # torch checks the hook's annotations against its own classes; a lambda has none
        ddp.register_comm_hook(None, lambda state, bucket: self._hook(state, bucket))  # type: ignore[operator]

    def _hook(self, _state: object, bucket: Any) -> torch.futures.Future[torch.Tensor]:
        buf: torch.Tensor = bucket.buffer()
        self._local += float(buf.double().pow(2).sum())
        t0 = time.perf_counter()
        dist.all_reduce(buf)
        buf.div_(self.world_size)
        self.sync_seconds += time.perf_counter() - t0
        fut: torch.futures.Future[torch.Tensor] = torch.futures.Future()
        fut.set_result(buf)
        return fut

    def after_backward(self, model: nn.Module, loss_scale: float = 1.0) -> None:
        """Read this step's gradients (after the backward pass, before clipping)."""
        grads = [p.grad.detach().reshape(-1) for p in model.parameters() if p.grad is not None]
        if not grads:
            return
        flat = torch.cat(grads).double() / loss_scale
        self.steps += 1
        if self.world_size > 1:
            self._mean_sum += float(flat.pow(2).sum())
            self._local_sum += self._local / loss_scale**2
            self._local = 0.0
            return
        if self._prev is not None:
            self._diff_sum += float((flat - self._prev).pow(2).sum())
            self._dot_sum += float(torch.dot(flat, self._prev))
            self._pairs += 1
        self._prev = flat.clone()

    def summary(self, device: torch.device) -> dict[str, Any]:
        """The round's means (collective in a gang: every rank must call it; ``device`` is the
        one the gang's collectives run on)."""
        n = max(self.steps, 1)
        out: dict[str, Any] = {"sync_time": self.sync_seconds / n, "measured_steps": self.steps}
        if self.world_size > 1:
            mine = torch.tensor([self._local_sum / n], dtype=torch.float64, device=device)
            every = [torch.zeros_like(mine) for _ in range(self.world_size)]
            dist.all_gather(every, mine)
            out["replica_sqnorms"] = [float(t.item()) for t in every]
            out["mean_sqnorm"] = self._mean_sum / n
        elif self._pairs:
            out["diff_sqnorm"] = self._diff_sum / self._pairs
            out["dot"] = self._dot_sum / self._pairs
        return out
