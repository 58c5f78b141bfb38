"""Model quality of HadarE's forking + averaging, with real training on real data.

scikit-learn's bundled digits (no download), a small MLP with BatchNorm, SGD with momentum,
the same total number of steps (a) as one copy and (b) forked into 3 copies trained on disjoint
shards with a 3:2:1 step split per round (as HadarE splits by throughput), their checkpoints
consolidated by the real Job Tracker each round. (b) must be within 2 points of (a) or better.
"""

from __future__ import annotations

import torch
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from tracker_testlib import write_ckpt

from tracker import JobTracker

TOTAL_STEPS = 600
ROUNDS = 20
SHARES = (3, 2, 1)  # copies' step shares per round (fast, medium, slow node)
BATCH = 32
LR = 0.05


def _data() -> tuple[torch.Tensor, ...]:
    X, y = load_digits(return_X_y=True)
    X = torch.tensor(X / 16.0, dtype=torch.float32)
    y = torch.tensor(y)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.3, random_state=0, stratify=y)
    return Xtr, Xte, ytr, yte


def _net() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(64, 64), torch.nn.BatchNorm1d(64), torch.nn.ReLU(), torch.nn.Linear(64, 10)
    )


def _optimizer(net: torch.nn.Module) -> torch.optim.Optimizer:
    return torch.optim.SGD(net.parameters(), lr=LR, momentum=0.9)


def _train(net, opt, X, y, steps: int, gen: torch.Generator) -> None:
    net.train()
    for _ in range(steps):
        idx = torch.randint(len(X), (BATCH,), generator=gen)
        opt.zero_grad()
        torch.nn.functional.cross_entropy(net(X[idx]), y[idx]).backward()
        opt.step()


def _accuracy(net, X, y) -> float:
    net.eval()
    with torch.no_grad():
        return (net(X).argmax(1) == y).float().mean().item()


def test_forked_copies_averaged_by_tracker_match_single_copy(
    tmp_path, capsys, single_thread
) -> None:
    Xtr, Xte, ytr, yte = _data()

    # (a) one copy, TOTAL_STEPS steps
    single = _net()
    _train(single, _optimizer(single), Xtr, ytr, TOTAL_STEPS, torch.Generator().manual_seed(1))
    acc_single = _accuracy(single, Xte, yte)

    # (b) three copies, consolidated by the Job Tracker after every round
    init = tmp_path / "init.pt"
    t = JobTracker.open(
        tmp_path / "tracker.sqlite", tmp_path / "ckpt", max_job_count=100, averaging="steps"
    )
    t.register_job(
        7,
        TOTAL_STEPS,
        model="IC",
        size="tiny",
        initial_checkpoint=init,
        initial_sha256=write_ckpt(init, _net().state_dict()),
    )
    copies = t.register_copies(7, len(SHARES))
    perm = torch.randperm(len(Xtr), generator=torch.Generator().manual_seed(2))
    shards = [perm[i :: len(SHARES)] for i in range(len(SHARES))]
    gens = [torch.Generator().manual_seed(10 + i) for i in range(len(SHARES))]
    per_round = TOTAL_STEPS // ROUNDS
    for r in range(ROUNDS):
        t.open_round(r)
        start = torch.load(t.latest_checkpoint(7).path, weights_only=True)
        for i, cid in enumerate(copies):
            steps = per_round * SHARES[i] // sum(SHARES)
            net, opt = _net(), None
            net.load_state_dict(start["state_dict"])
            opt = _optimizer(net)
            if start["optimizer"] is not None:
                opt.load_state_dict(start["optimizer"])
            _train(net, opt, Xtr[shards[i]], ytr[shards[i]], steps, gens[i])
            path = tmp_path / "reports" / f"r{r}-c{cid}.pt"
            sha = write_ckpt(path, net.state_dict(), opt.state_dict(), steps=steps)
            t.report(r, cid, f"node{i}", steps, 0.1, path, sha)
        summary = t.close_round(r)
        assert summary.jobs[7].steps_added == per_round
    assert t.is_complete(7) and t.progress() == {7: TOTAL_STEPS}
    final = torch.load(t.latest_checkpoint(7).path, weights_only=True)
    t.close()
    forked = _net()
    forked.load_state_dict(final["state_dict"])
    acc_forked = _accuracy(forked, Xte, yte)
    assert int(final["state_dict"]["1.num_batches_tracked"]) == TOTAL_STEPS

    with capsys.disabled():
        print(
            f"\n[model quality] digits held-out accuracy: (a) single copy {acc_single:.4f}, "
            f"(b) 3 forked copies averaged by the tracker {acc_forked:.4f} ({TOTAL_STEPS} steps in total each)"
        )
    assert acc_single > 0.9, "the single-copy baseline did not learn; the comparison would be empty"
    assert acc_forked >= acc_single - 0.02
