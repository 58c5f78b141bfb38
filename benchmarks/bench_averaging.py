"""Benchmark: consolidating 5 copies of an 11.7M-parameter model (ResNet-18 shapes).

Targets (issue 4): step-weighted averaging <= 0.5 s and <= 2 model copies of peak extra memory.

    .venv/bin/python benchmarks/bench_averaging.py [--copies 5] [--repeats 5] [--no-tracker]

Rows: tracker.averaging.average_state_dicts in "steps" and "uniform" mode; a naive
``torch.stack``-then-sum average as a yardstick (it shows the memory method sees allocations);
and, unless --no-tracker, a full ``JobTracker.close_round`` on 5 real checkpoint files (sha256
verification, memory-mapped loading, averaging, fsynced write).

Memory method: torch's CPU tensors live outside Python's allocator, so tracemalloc cannot see
them. Instead, before each measured call we free what we can (``gc.collect`` and glibc's
``malloc_trim(0)``, so freed-but-cached heap pages do not hide new allocations), reset the
kernel's resident-set high-water mark (``echo 5 > /proc/self/clear_refs``), read VmRSS, run
the call while keeping its result alive, and report ``VmHWM - VmRSS_before`` from
``/proc/self/status``: the peak resident memory the call added, output included. For
close_round the files' pages are memory-mapped, so page-cache pages of the inputs that the call
touches count as resident too; that row therefore overstates the anonymous memory used.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from hadar.core.integrity import sha256_file  # noqa: E402
from tracker import JobTracker  # noqa: E402
from tracker.averaging import average_state_dicts  # noqa: E402
from tracker.checkpoints import make_payload  # noqa: E402


def resnet18_shapes(num_classes: int = 1000) -> list[tuple[str, tuple[int, ...], torch.dtype]]:
    """State-dict keys, shapes and dtypes of torchvision's ResNet-18, written out by hand."""
    out: list[tuple[str, tuple[int, ...], torch.dtype]] = []

    def bn(prefix: str, c: int) -> None:
        for name in ("weight", "bias", "running_mean", "running_var"):
            out.append((f"{prefix}.{name}", (c,), torch.float32))
        out.append((f"{prefix}.num_batches_tracked", (), torch.int64))

    out.append(("conv1.weight", (64, 3, 7, 7), torch.float32))
    bn("bn1", 64)
    c_in = 64
    for layer, c in enumerate((64, 128, 256, 512), start=1):
        for block in range(2):
            p = f"layer{layer}.{block}"
            stride2 = block == 0 and layer > 1
            out.append((f"{p}.conv1.weight", (c, c_in, 3, 3), torch.float32))
            bn(f"{p}.bn1", c)
            out.append((f"{p}.conv2.weight", (c, c, 3, 3), torch.float32))
            bn(f"{p}.bn2", c)
            if stride2:
                out.append((f"{p}.downsample.0.weight", (c, c_in, 1, 1), torch.float32))
                bn(f"{p}.downsample.1", c)
            c_in = c
    out.append(("fc.weight", (num_classes, 512), torch.float32))
    out.append(("fc.bias", (num_classes,), torch.float32))
    return out


def make_copy(
    seed: int, shapes: list[tuple[str, tuple[int, ...], torch.dtype]]
) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    sd = {}
    for key, shape, dtype in shapes:
        if dtype.is_floating_point:
            sd[key] = torch.randn(shape, generator=g, dtype=dtype)
        else:
            sd[key] = torch.tensor(1000 + seed, dtype=dtype)
    return sd


def _status(field: str) -> int:
    """A ``kB`` field of /proc/self/status, in bytes."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(field)


_libc = ctypes.CDLL("libc.so.6")


def measure(call: Callable[[], Any]) -> tuple[float, int]:
    """(seconds, peak extra resident bytes) of one call; see the module docstring."""
    gc.collect()
    _libc.malloc_trim(0)
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    before = _status("VmRSS")
    start = time.perf_counter()
    result = call()
    seconds = time.perf_counter() - start
    peak = _status("VmHWM") - before
    del result
    return seconds, peak


def naive_average(copies: list[tuple[dict[str, torch.Tensor], int]]) -> dict[str, torch.Tensor]:
    total = sum(s for _, s in copies)
    w = torch.tensor([s / total for _, s in copies], dtype=torch.float64)
    out = {}
    for key, v in copies[0][0].items():
        if v.is_floating_point():
            stacked = torch.stack([sd[key].double() for sd, _ in copies])
            out[key] = (stacked * w.view(-1, *[1] * v.dim())).sum(0).to(v.dtype)
        else:
            out[key] = v.clone()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--no-tracker", action="store_true", help="skip the close_round row")
    args = parser.parse_args(argv)

    shapes = resnet18_shapes()
    copies_sd = [make_copy(i, shapes) for i in range(args.copies)]
    steps = [120 - 17 * i for i in range(args.copies)]
    copies = list(zip(copies_sd, steps, strict=True))
    params = sum(v.numel() for k, v in copies_sd[0].items() if v.is_floating_point())
    model_bytes = sum(v.numel() * v.element_size() for v in copies_sd[0].values())
    print(
        f"model: ResNet-18 shapes, {params / 1e6:.2f}M floating elements, {model_bytes / 2**20:.1f} MiB; "
        f"{args.copies} copies, steps {steps}; torch {torch.__version__}, {torch.get_num_threads()} threads"
    )

    rows: list[tuple[str, list[float], list[int]]] = []

    def bench(name: str, call: Callable[[], Any], repeats: int) -> None:
        call()  # warm-up
        results = [measure(call) for _ in range(repeats)]
        rows.append((name, [s for s, _ in results], [p for _, p in results]))

    bench("average_state_dicts steps", lambda: average_state_dicts(copies, "steps"), args.repeats)
    bench(
        "average_state_dicts uniform", lambda: average_state_dicts(copies, "uniform"), args.repeats
    )
    bench("naive stack (yardstick)", lambda: naive_average(copies), max(1, args.repeats // 2))

    if not args.no_tracker:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            paths = []
            for i, sd in enumerate(copies_sd):
                p = root / f"copy{i}.pt"
                torch.save(make_payload(sd, None, steps[i], "IC", "paper"), p)
                paths.append((p, sha256_file(p)))
            counter = iter(range(10**6))

            def close_round() -> Any:
                r = next(counter)
                t = JobTracker.open(root / f"t{r}.sqlite", root / f"ckpt{r}", max_job_count=10)
                t.register_job(1, 10**9, "IC", "paper")
                cids = t.register_copies(1, args.copies)
                t.open_round(0)
                for cid, (p, sha), s in zip(cids, paths, steps, strict=True):
                    t.report(0, cid, "n", s, 1.0, p, sha)
                start = time.perf_counter()
                summary = t.close_round(0)
                close_round.seconds = time.perf_counter() - start  # type: ignore[attr-defined]
                t.close()
                return summary

            results = []
            close_round()
            for _ in range(max(1, args.repeats // 2)):
                _, peak = measure(close_round)
                results.append((close_round.seconds, peak))  # type: ignore[attr-defined]
            rows.append(
                (
                    "JobTracker.close_round (5 files)",
                    [s for s, _ in results],
                    [p for _, p in results],
                )
            )

    print()
    print(
        f"{'operation':34} {'time median':>12} {'time max':>9} {'peak extra':>11} {'model copies':>13}  target"
    )
    for name, secs, peaks in rows:
        med, worst, peak = statistics.median(secs), max(secs), max(peaks)
        copies_x = peak / model_bytes
        target = ""
        if name.startswith("average_state_dicts"):
            ok = worst <= 0.5 and copies_x <= 2.0
            target = f"{'PASS' if ok else 'FAIL'} (<= 0.5 s, <= 2 copies)"
        print(
            f"{name:34} {med:10.3f} s {worst:7.3f} s {peak / 2**20:7.1f} MiB {copies_x:12.2f}x  {target}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
