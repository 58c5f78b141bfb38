"""Dataset loaders on tiny files in the real on-disk formats, synthetic streams, and data order."""

from __future__ import annotations

import math
import pickle
from pathlib import Path

import numpy as np
import pytest
import torch

from hadar.core.errors import InputError
from nodes.datasets import open_dataset
from nodes.models import build_model, get_entry, model_config
from nodes.models.translation import BOS, EOS, PAD
from tests.nodes import helpers as h


def trains_one_step(name: str, batch: dict[str, torch.Tensor], heldout: list[dict]) -> None:
    """The loader's batches fit the tiny model: a loss, a backward pass and a finite metric."""
    entry = get_entry(name)
    torch.manual_seed(0)
    model = build_model(name, "tiny")
    loss = entry.loss(model, batch)
    loss.backward()
    assert math.isfinite(loss.item())
    model.eval()
    assert math.isfinite(entry.evaluate(model, heldout))


def test_cifar10_python_batches(tmp_path: Path) -> None:
    root = h.write_cifar10(tmp_path / "cifar-10-batches-py", per_batch=8)
    for path in (root, tmp_path):  # the batch folder itself or its parent
        ds = open_dataset("IC", "tiny", str(path), seed=1, batch_size=6)
        assert (ds.n_train, ds.n_heldout) == (40, 8)
        b = ds.train_batch(0)
        assert b["image"].shape == (6, 3, 32, 32) and b["image"].dtype == torch.float32
        assert (
            b["label"].dtype == torch.int64
            and 0 <= int(b["label"].min()) <= int(b["label"].max()) <= 9
        )
    held = list(ds.heldout_batches())
    raw = pickle.loads((root / "test_batch").read_bytes())
    assert [int(x) for b in held for x in b["label"]] == raw[b"labels"]
    # held-out images are normalised but not augmented: pixel (0, 0) of image 0, channel 0
    expected = (raw[b"data"][0, 0] - 0.4914 * 255) / (0.2470 * 255)
    assert held[0]["image"][0, 0, 0, 0].item() == pytest.approx(expected, rel=1e-5)
    trains_one_step("IC", b, held)


def test_cifar10_errors_name_the_data_field(tmp_path: Path) -> None:
    root = h.write_cifar10(tmp_path / "c")
    (root / "test_batch").unlink()
    with pytest.raises(InputError, match=r"^data: missing CIFAR-10 file .*test_batch$"):
        open_dataset("IC", "tiny", str(root))
    h.write_cifar10(root)

    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))

    (root / "data_batch_3").write_bytes(pickle.dumps({b"data": Evil(), b"labels": [1]}))
    with pytest.raises(
        InputError,
        match=r"data_batch_3 is not a CIFAR-10 python batch \(refusing to load builtins.print\)",
    ):
        open_dataset("IC", "tiny", str(root))


def test_wikitext2_tokens(tmp_path: Path) -> None:
    root = h.write_wikitext2(tmp_path / "wikitext-2")
    cfg = model_config("LM", "tiny")
    ds = open_dataset("LM", "tiny", str(root), batch_size=4)
    words = []
    for line in (root / "wiki.train.tokens").read_text().splitlines():
        words += line.split() + ["<eos>"]
    assert ds.n_train == (len(words) - 1) // cfg.bptt
    assert ds.vocab.itos[:2] == ["<unk>", "<eos>"] and ds.vocab.itos[2] == "the"  # most frequent
    idx = ds.train_indices(0)
    b = ds.train_batch(0)
    assert b["tokens"].shape == (4, cfg.bptt + 1)
    start = int(idx[0]) * cfg.bptt
    assert [ds.vocab.itos[i] for i in b["tokens"][0].tolist()] == words[
        start : start + cfg.bptt + 1
    ]
    trains_one_step("LM", b, list(ds.heldout_batches()))
    with pytest.raises(InputError, match=r"^data: missing file .*wiki\.valid\.tokens$"):
        (root / "wiki.valid.tokens").unlink()
        open_dataset("LM", "tiny", str(root))


def test_multi30k_parallel_text(tmp_path: Path) -> None:
    root = h.write_multi30k(tmp_path / "multi30k")
    ds = open_dataset("LT", "tiny", str(root), batch_size=5)
    assert (ds.n_train, ds.n_heldout) == (40, 10)
    b = ds.train_batch(3)
    src, tgt = b["src"], b["tgt"]
    assert src.shape[0] == tgt.shape[0] == 5
    assert (tgt[:, 0] == BOS).all()
    for row in range(5):  # each source ends in <eos> before its padding; so does each target
        s, t = src[row][src[row] != PAD].tolist(), tgt[row][tgt[row] != PAD].tolist()
        assert s[-1] == EOS and t[-1] == EOS and len(t) == len(s) + 1  # word-for-word files
    first_de = (root / "val.de").read_text().splitlines()[0].lower().replace(".", " .").split()
    first = next(iter(ds.heldout_batches()))["src"][0]
    assert [ds.src_vocab.itos[i] for i in first.tolist() if i != PAD][:-1] == first_de
    trains_one_step("LT", b, list(ds.heldout_batches()))
    (root / "val.en").write_text("only one line\n")
    with pytest.raises(InputError, match=r"val\.de has 10 lines but val\.en has 1$"):
        open_dataset("LT", "tiny", str(root))


def test_movielens_ratings_csv(tmp_path: Path) -> None:
    root = h.write_movielens(tmp_path / "ml-20m", users=60, movies=300)
    n_items = model_config("RS", "tiny").n_items
    for path in (root, root / "ratings.csv"):
        ds = open_dataset("RS", "tiny", str(path), batch_size=8)
    import pandas as pd

    df = pd.read_csv(root / "ratings.csv")
    top = (
        df.groupby("movieId")
        .size()
        .reset_index(name="n")
        .sort_values(["n", "movieId"], ascending=[False, True])["movieId"]
        .to_numpy()[:n_items]
    )
    kept = df[df.movieId.isin(top)]
    b = ds.train_batch(0)
    assert b["ratings"].shape == (8, n_items)
    n_train, n_held = len(ds.train_rows.items), len(ds.held_rows.items)
    assert n_train + n_held == len(kept)  # every rating of a kept movie lands in one split
    assert 0.04 < n_held / len(kept) < 0.2  # about a tenth held out
    dense = ds.make_batch(np.arange(ds.n_train), True, None)["ratings"]
    assert int((dense != 0).sum()) == n_train
    held = list(ds.heldout_batches())
    for hb in held:  # held-out ratings never appear in the same user's input
        assert not ((hb["ratings"] != 0) & (hb["target"] != 0)).any()
    vals = b["ratings"][b["ratings"] != 0]
    assert set((vals * 2).round().tolist()) <= set(range(1, 11))
    trains_one_step("RS", b, held)
    bad = tmp_path / "bad.csv"
    bad.write_text("user,item\n1,2\n")
    with pytest.raises(InputError, match=r"^data: .*bad\.csv: not a MovieLens ratings\.csv"):
        open_dataset("RS", "tiny", str(bad))


def test_mima_csv(tmp_path: Path) -> None:
    path = h.write_mima(tmp_path / "mima.csv", rows=200)
    cfg = model_config("MM", "tiny")
    ds = open_dataset("MM", "tiny", str(path), batch_size=4)
    assert ds.n_train == 160 - (cfg.t_in + cfg.t_out) + 1
    assert ds.n_heldout == 40 - (cfg.t_in + cfg.t_out) + 1
    b = ds.make_batch(np.array([0, 5]), True, None)
    assert b["micro"].shape == (2, cfg.t_in, 6) and b["macro"].shape == (2, cfg.t_in + cfg.t_out, 6)
    assert b["target"].shape == (2, cfg.t_out, 6)
    # the target continues the micro window; z-scored with the training part's statistics
    assert torch.equal(b["target"][1, 0], ds.micro[5 + cfg.t_in])
    assert ds.micro[:160].mean(0).abs().max() < 1e-4
    trains_one_step("MM", ds.train_batch(0), list(ds.heldout_batches()))
    # rows in any order are sorted by time
    lines = path.read_text().splitlines()
    shuffled = tmp_path / "shuffled.csv"
    shuffled.write_text("\n".join([lines[0]] + lines[1:][::-1]) + "\n")
    ds2 = open_dataset("MM", "tiny", str(shuffled), batch_size=4)
    assert torch.allclose(ds2.micro, ds.micro)
    cols = tmp_path / "cols.csv"
    cols.write_text("timestamp,micro_a,macro_b\n2021-01-01,1,2\n")
    with pytest.raises(
        InputError, match="expected 6 micro_\\* and 6 macro_\\* columns, found 1 and 1$"
    ):
        open_dataset("MM", "tiny", str(cols))
    short = h.write_mima(tmp_path / "short.csv", rows=30)
    with pytest.raises(InputError, match="30 rows is too short"):
        open_dataset("MM", "tiny", str(short))


def test_a_missing_path_names_data() -> None:
    for name in ("IC", "LM", "LT", "RS", "MM"):
        with pytest.raises(InputError, match=r"^data: path does not exist: /no/such/dataset$"):
            open_dataset(name, "tiny", "/no/such/dataset")


def test_data_order_depends_on_seed_stream_and_step(tmp_path: Path) -> None:
    ds = open_dataset(
        "IC", "tiny", str(h.write_cifar10(tmp_path / "c", per_batch=8)), seed=3, batch_size=8
    )
    # one epoch of 40 items = 5 steps; every item exactly once, and a new order next epoch
    epoch0 = np.concatenate([ds.train_indices(s) for s in range(5)])
    epoch1 = np.concatenate([ds.train_indices(s) for s in range(5, 10)])
    assert sorted(epoch0) == sorted(epoch1) == list(range(40))
    assert not np.array_equal(epoch0, epoch1)
    # a gang of 2 shares the epoch: ranks take disjoint items
    gang = np.concatenate([ds.train_indices(s, r, 2) for s in range(2) for r in range(2)])
    assert len(set(gang.tolist())) == 32
    # same (seed, stream, step) -> same batch, augmentation included; another stream -> another
    again = open_dataset("IC", "tiny", str(tmp_path / "c"), seed=3, batch_size=8)
    assert torch.equal(ds.train_batch(7)["image"], again.train_batch(7)["image"])
    copy = open_dataset("IC", "tiny", str(tmp_path / "c"), seed=3, stream=1, batch_size=8)
    assert not np.array_equal(ds.train_indices(0), copy.train_indices(0))


@pytest.mark.parametrize("name", ["IC", "LM", "LT", "RS", "MM"])
def test_synthetic_streams(name: str) -> None:
    a = open_dataset(name, "tiny", "synthetic", seed=5, batch_size=4)
    b = open_dataset(name, "tiny", "synthetic", seed=5, batch_size=4)
    c = open_dataset(name, "tiny", "synthetic", seed=5, stream=1, batch_size=4)

    def same(x: dict, y: dict) -> bool:
        return x.keys() == y.keys() and all(
            x[k].shape == y[k].shape and torch.equal(x[k], y[k]) for k in x
        )

    assert same(a.train_batch(2), b.train_batch(2))  # deterministic from the seed
    assert not same(a.train_batch(2), a.train_batch(3))  # consecutive steps differ
    assert not same(a.train_batch(2), c.train_batch(2))  # another copy's stream differs
    assert not same(a.train_batch(2, 0, 2), a.train_batch(2, 1, 2))  # gang ranks differ
    held = list(a.heldout_batches())
    assert sum(len(next(iter(x.values()))) for x in held) == 256  # EVAL_SAMPLES["tiny"]
    assert all(same(x, y) for x, y in zip(held, c.heldout_batches(), strict=True))  # fixed split
    trains_one_step(name, a.train_batch(0), held)
