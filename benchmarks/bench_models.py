"""Per-step training time of each workload model on this machine (synthetic data, CPU or GPU).

    .venv/bin/python benchmarks/bench_models.py [--sizes tiny small] [--steps 20] [--threads 1]

Prints a table: model, size, parameters, batch size, and the median / 10th / 90th percentile
wall time of one training step (forward, backward, optimizer) in milliseconds, after warm-up.
Batch sizes are the demo defaults below unless ``--batch-size`` overrides them.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from nodes.datasets import open_dataset
from nodes.models import MODELS, SIZES, build_model, get_entry, parameter_count

DEMO_BATCH = {"IC": 16, "LM": 20, "LT": 32, "RS": 64, "MM": 32}
DEMO_LR = {"IC": 0.05, "LM": 20.0, "LT": 5e-4, "RS": 0.005, "MM": 1e-3}


def time_steps(
    model_name: str, size: str, steps: int, batch: int, device: torch.device
) -> list[float]:
    """Seconds per training step for ``steps`` steps after 3 warm-up steps."""
    entry = get_entry(model_name)
    torch.manual_seed(0)
    model = build_model(model_name, size).to(device)
    opt = entry.optimizer(model.parameters(), DEMO_LR[model_name])
    data = open_dataset(model_name, size, "synthetic", seed=0, batch_size=batch)
    out = []
    for step in range(steps + 3):
        batch_t = {k: v.to(device) for k, v in data.train_batch(step).items()}
        t0 = time.perf_counter()
        loss = entry.loss(model, batch_t)
        opt.zero_grad(set_to_none=True)
        torch.autograd.backward(loss)  # loss.backward(), which torch leaves unannotated
        if entry.grad_clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), entry.grad_clip)
        opt.step()
        if device.type == "cuda":
            torch.cuda.synchronize()
        if step >= 3:
            out.append(time.perf_counter() - t0)
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", nargs="+", default=["tiny", "small"], choices=SIZES)
    ap.add_argument("--models", nargs="+", default=list(MODELS))
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads (0 = default)")
    ap.add_argument("--batch-size", type=int, default=None, help="override the demo batch sizes")
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    print(
        f"torch {torch.__version__}, device {device}, threads {torch.get_num_threads()}, "
        f"{args.steps} timed steps"
    )
    print(
        f"{'model':<6}{'size':<7}{'params':>11}{'batch':>7}{'median ms':>11}{'p10 ms':>9}{'p90 ms':>9}"
    )
    for size in args.sizes:
        for name in args.models:
            name = name.upper()
            batch = args.batch_size or DEMO_BATCH[name]
            ts = sorted(time_steps(name, size, args.steps, batch, device))
            params = parameter_count(build_model(name, size, "meta"))
            p10, p90 = ts[len(ts) // 10], ts[(len(ts) * 9) // 10 - 1 if len(ts) >= 10 else -1]
            print(
                f"{name:<6}{size:<7}{params:>11,}{batch:>7}{statistics.median(ts) * 1e3:>11.1f}"
                f"{p10 * 1e3:>9.1f}{p90 * 1e3:>9.1f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
