"""Consolidation of forked copies' parameters (pure functions, no I/O).

Rules (see docs/tracker.md for the reasoning):

* **Weights.** ``"steps"``: copy ``i`` gets ``steps_i / sum(steps)``; ``"uniform"``: every copy
  that did at least one step gets ``1 / k``. Copies with 0 steps get weight 0 in both modes; when
  every copy did 0 steps the previous (``base``) parameters are kept.
* **Floating (and complex) tensors** are averaged by accumulating ``sum(w_i * x_i)`` in float64
  (complex128) and casting once to the tensor's dtype. Accumulation runs over fixed-size chunks
  into one small scratch buffer, so the only large allocation is the output itself.
* **BatchNorm counters** (integer tensors whose key ends in ``num_batches_tracked``) become
  ``base + sum_i (v_i - base)``: the batches every copy tracked this round are added to the value
  all copies started from (``base``, or 0 for a freshly initialised model), so the counter keeps
  counting the job's total batches as it would in one uninterrupted run.
* **Other integer and bool tensors, and non-tensor entries**, cannot be averaged meaningfully and
  are taken from the copy with the most steps (the first such copy on ties).
* **Optimizer state** (:func:`average_optimizer_states`): if every contributing copy has an
  optimizer state of identical structure, floating tensors (momentum buffers, Adam moments and
  Adam's float ``step``) are averaged with the same weights and everything else (hyper-parameters
  in ``param_groups``, integer tensors) comes from the copy with the most steps; if the
  structures differ or one is missing, the most-steps copy's optimizer state is used whole.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from tracker.errors import AveragingError, StateDictMismatchError

MODES = ("steps", "uniform")
COUNTER_KEY = "num_batches_tracked"
CHUNK = 1 << 14
"""Elements accumulated at a time: a 128 KiB float64 scratch buffer that stays in cache. It is
below torch's intra-op grain size (32768), so each chunk op runs on the calling thread; fanning
small ops out to OpenMP threads was up to 40x slower on a loaded 2-core machine."""

Signature = dict[str, tuple[Any, str]]


def signature(state_dict: Mapping[str, Any]) -> Signature:
    """``{key: (shape, dtype)}`` of a state dict; non-tensor entries map to ``(None, type name)``."""
    sig: Signature = {}
    for key, value in state_dict.items():
        if isinstance(value, torch.Tensor):
            sig[str(key)] = (list(value.shape), str(value.dtype).removeprefix("torch."))
        else:
            sig[str(key)] = (None, type(value).__name__)
    return sig


def signature_difference(expected: Mapping[str, Any], actual: Mapping[str, Any]) -> str | None:
    """A one-line description of the first difference between two signatures, or None."""
    missing = [k for k in expected if k not in actual]
    if missing:
        return f"missing key {missing[0]!r}" + (
            f" (+{len(missing) - 1} more)" if len(missing) > 1 else ""
        )
    extra = [k for k in actual if k not in expected]
    if extra:
        return f"unexpected key {extra[0]!r}" + (
            f" (+{len(extra) - 1} more)" if len(extra) > 1 else ""
        )
    for key, (shape, dtype) in expected.items():
        a_shape, a_dtype = actual[key]
        if a_shape != shape:
            return f"key {key!r} has shape {a_shape}, expected {shape}"
        if a_dtype != dtype:
            return f"key {key!r} has dtype {a_dtype}, expected {dtype}"
    return None


def copy_weights(steps: Sequence[int], mode: str = "steps") -> list[float]:
    """Averaging weight of each copy (0 for copies with 0 steps); they sum to 1.

    Raises AveragingError for an unknown mode, negative steps, or when no copy did any step.
    """
    if mode not in MODES:
        raise AveragingError(f"averaging mode {mode!r} is not one of {', '.join(MODES)}")
    if any(s < 0 for s in steps):
        raise AveragingError(f"negative steps in {list(steps)}")
    total = sum(steps)
    if total <= 0:
        raise AveragingError("no copy did any step: nothing to average")
    if mode == "steps":
        return [s / total for s in steps]
    k = sum(1 for s in steps if s > 0)
    return [1.0 / k if s > 0 else 0.0 for s in steps]


def _lead(steps: Sequence[int]) -> int:
    """Index of the copy with the most steps (first on ties)."""
    return max(range(len(steps)), key=lambda i: (steps[i], -i))


def weighted_average(tensors: Sequence[torch.Tensor], weights: Sequence[float]) -> torch.Tensor:
    """``sum(w_i * t_i)`` accumulated in float64 (complex128) and cast to the inputs' dtype.

    Zero weights are skipped. Works chunk by chunk, so extra memory is the output plus about 256 KiB.
    """
    pairs = [(t, w) for t, w in zip(tensors, weights, strict=True) if w != 0.0]
    first = tensors[0]
    out = torch.empty(first.shape, dtype=first.dtype)
    flat_out = out.view(-1)
    flats = [(t.reshape(-1), w) for t, w in pairs]
    acc_dtype = torch.complex128 if first.is_complex() else torch.float64
    n = flat_out.numel()
    scratch = torch.empty(min(n, CHUNK), dtype=acc_dtype)
    for start in range(0, n, CHUNK):
        stop = min(n, start + CHUNK)
        acc = scratch[: stop - start]
        acc.zero_()
        for flat, w in flats:
            acc.add_(flat[start:stop].to(acc_dtype), alpha=w)
        flat_out[start:stop].copy_(acc)
    return out


def _is_float(t: torch.Tensor) -> bool:
    return t.is_floating_point() or t.is_complex()


def _check_signatures(
    state_dicts: Sequence[Mapping[str, Any]], base: Mapping[str, Any] | None
) -> None:
    reference = signature(base if base is not None else state_dicts[0])
    for i, sd in enumerate(state_dicts):
        diff = signature_difference(reference, signature(sd))
        if diff:
            against = "the previous parameters" if base is not None else "copy 0"
            raise StateDictMismatchError(f"copy {i}: {diff} (compared with {against})")


def average_state_dicts(
    copies: Sequence[tuple[Mapping[str, Any], int]],
    mode: str = "steps",
    base: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Consolidate ``[(state_dict, steps), ...]`` into one state dict (rules in the module doc).

    ``base`` is the state every copy started the round from (the job's previous consolidated
    parameters; None for a fresh model). Every state dict must have ``base``'s (or the first
    copy's) keys, shapes and dtypes, else StateDictMismatchError. If no copy did any step the
    result is ``base`` (AveragingError when there is none).
    """
    if not copies:
        raise AveragingError("no copies to average")
    if mode not in MODES:
        raise AveragingError(f"averaging mode {mode!r} is not one of {', '.join(MODES)}")
    state_dicts = [sd for sd, _ in copies]
    steps = [int(s) for _, s in copies]
    _check_signatures(state_dicts, base)
    if any(s < 0 for s in steps):
        raise AveragingError(f"negative steps in {steps}")
    if sum(steps) == 0:
        if base is None:
            raise AveragingError(
                "no copy did any step and there are no previous parameters to keep"
            )
        return dict(base)
    weights = copy_weights(steps, mode)
    lead = _lead(steps)
    active = [i for i, s in enumerate(steps) if s > 0]
    result: dict[str, Any] = {}
    for key, lead_value in state_dicts[lead].items():
        values = [sd[key] for sd in state_dicts]
        if isinstance(lead_value, torch.Tensor) and _is_float(lead_value):
            result[key] = weighted_average(values, weights)
        elif (
            isinstance(lead_value, torch.Tensor)
            and str(key).rsplit(".", 1)[-1] == COUNTER_KEY
            and lead_value.dtype != torch.bool
        ):
            start = (
                base[key].to(torch.int64)
                if base is not None
                else torch.zeros_like(lead_value, dtype=torch.int64)
            )
            total = start.clone()
            for i in active:
                total += values[i].to(torch.int64) - start
            result[key] = total.to(lead_value.dtype)
        elif isinstance(lead_value, torch.Tensor):
            result[key] = lead_value.clone()
        else:
            result[key] = lead_value
    return result


def _same_structure(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return (
            isinstance(a, torch.Tensor)
            and isinstance(b, torch.Tensor)
            and a.shape == b.shape
            and a.dtype == b.dtype
        )
    if isinstance(a, Mapping) or isinstance(b, Mapping):
        return (
            isinstance(a, Mapping)
            and isinstance(b, Mapping)
            and set(a) == set(b)
            and all(_same_structure(a[k], b[k]) for k in a)
        )
    if isinstance(a, (list, tuple)) or isinstance(b, (list, tuple)):
        return (
            isinstance(a, (list, tuple))
            and isinstance(b, (list, tuple))
            and len(a) == len(b)
            and all(_same_structure(x, y) for x, y in zip(a, b, strict=True))
        )
    return True


def _merge(nodes: Sequence[Any], weights: Sequence[float], lead: int) -> Any:
    head = nodes[lead]
    if isinstance(head, torch.Tensor):
        return weighted_average(nodes, weights) if _is_float(head) else head.clone()
    if isinstance(head, Mapping):
        return {k: _merge([n[k] for n in nodes], weights, lead) for k in head}
    if isinstance(head, (list, tuple)):
        merged = [_merge([n[i] for n in nodes], weights, lead) for i in range(len(head))]
        return type(head)(merged) if isinstance(head, tuple) else merged
    return head


def average_optimizer_states(
    copies: Sequence[tuple[Mapping[str, Any] | None, int]], mode: str = "steps"
) -> dict[str, Any] | None:
    """Consolidate the copies' optimizer ``state_dict``s (rules in the module doc).

    Copies with 0 steps are ignored. Returns None when the most-steps copy has no optimizer state.
    """
    if not copies:
        raise AveragingError("no copies to average")
    steps = [int(s) for _, s in copies]
    weights = copy_weights(steps, mode)
    lead = _lead(steps)
    active = [i for i, s in enumerate(steps) if s > 0]
    states = [copies[i][0] for i in active]
    head = copies[lead][0]
    if head is None:
        return None
    if any(s is None for s in states) or not all(_same_structure(head, s) for s in states):
        return dict(head)
    merged: dict[str, Any] = _merge(states, [weights[i] for i in active], active.index(lead))
    return merged
