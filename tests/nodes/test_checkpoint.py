"""The hadar-ckpt-1 checkpoint format: round trip, sha256, atomic writes, and clear rejections."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import torch

from hadar.core.errors import InputError
from nodes.checkpoint import FORMAT, load_checkpoint, save_checkpoint, sha256_file
from nodes.models import build_model, get_entry


def trained_ic(steps: int = 2) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(0)
    model = build_model("IC", "tiny")
    opt = get_entry("IC").optimizer(model.parameters(), 0.05)
    for _ in range(steps):
        loss = model(torch.randn(4, 3, 32, 32)).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model, opt


def save_ic(path: Path, **over) -> str:
    model, opt = trained_ic()
    kw = dict(
        model="IC", size="tiny", state_dict=model.state_dict(), optimizer=opt.state_dict(), steps=7
    )
    kw.update(over)
    return save_checkpoint(path, **kw)


def test_round_trip_restores_identical_tensors_and_reports_sha256(tmp_path: Path) -> None:
    model, opt = trained_ic()
    path = tmp_path / "sub" / "c.pt"
    sha = save_checkpoint(
        path,
        model="ic",
        size="tiny",
        state_dict=model.state_dict(),
        optimizer=opt.state_dict(),
        steps=42,
    )
    assert sha == sha256_file(path) == hashlib.sha256(path.read_bytes()).hexdigest()
    assert [p.name for p in path.parent.iterdir()] == ["c.pt"]  # no temporary file left behind

    ck = load_checkpoint(path, "IC", "tiny")
    assert (ck["format"], ck["model"], ck["size"], ck["steps"]) == (FORMAT, "IC", "tiny", 42)
    assert ck["state_dict"].keys() == model.state_dict().keys()
    for k, v in model.state_dict().items():
        assert torch.equal(ck["state_dict"][k], v), k
    fresh = build_model("IC", "tiny")
    fresh.load_state_dict(ck["state_dict"])
    opt2 = get_entry("IC").optimizer(fresh.parameters(), 0.05)
    opt2.load_state_dict(ck["optimizer"])
    bufs = [s["momentum_buffer"] for s in opt.state.values()]
    bufs2 = [s["momentum_buffer"] for s in opt2.state.values()]
    assert len(bufs) == len(bufs2) > 0 and all(
        torch.equal(a, b) for a, b in zip(bufs, bufs2, strict=True)
    )
    # it is a plain torch.save dict that other components can read with torch.load
    raw = torch.load(path, weights_only=True)
    assert set(raw) == {"format", "model", "size", "state_dict", "optimizer", "steps"}


def test_optimizer_may_be_none(tmp_path: Path) -> None:
    model, _ = trained_ic(0)
    save_checkpoint(
        tmp_path / "c.pt",
        model="IC",
        size="tiny",
        state_dict=model.state_dict(),
        optimizer=None,
        steps=0,
    )
    assert load_checkpoint(tmp_path / "c.pt", "ic", "tiny")["optimizer"] is None


def test_a_checkpoint_for_another_model_or_size_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "c.pt"
    save_ic(path)
    with pytest.raises(InputError, match=r"checkpoint is for model 'IC', expected 'LM'$"):
        load_checkpoint(path, "LM", "tiny")
    with pytest.raises(InputError, match=r"checkpoint is for size 'tiny', expected 'small'$"):
        load_checkpoint(path, "IC", "small")


def test_state_dict_mismatches_name_the_first_bad_key(tmp_path: Path) -> None:
    model, _ = trained_ic(0)
    small = build_model("IC", "small").state_dict()
    path = tmp_path / "c.pt"
    # the weights of the small model filed under "tiny": first key's shape is wrong
    save_ic(path, state_dict=small)
    with pytest.raises(InputError) as e:
        load_checkpoint(path, "IC", "tiny")
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(str(path))
    assert (
        "state_dict key 'conv1.weight' has shape (8, 3, 3, 3), IC/tiny expects (4, 3, 3, 3)" in msg
    )

    sd = dict(model.state_dict())
    del sd["linear.bias"]
    save_ic(path, state_dict=sd)
    with pytest.raises(InputError, match="state_dict is missing key 'linear.bias' of IC/tiny$"):
        load_checkpoint(path, "IC", "tiny")

    sd = dict(model.state_dict(), extra=torch.zeros(1))
    save_ic(path, state_dict=sd)
    with pytest.raises(InputError, match="state_dict has unexpected key 'extra' for IC/tiny$"):
        load_checkpoint(path, "IC", "tiny")


def test_foreign_corrupt_and_missing_files_are_rejected(tmp_path: Path) -> None:
    model, _ = trained_ic(0)
    other = tmp_path / "other.pt"
    torch.save({"format": "someone-else", "state_dict": model.state_dict()}, other)
    with pytest.raises(InputError, match="format is 'someone-else', expected 'hadar-ckpt-1'$"):
        load_checkpoint(other, "IC", "tiny")
    plain = tmp_path / "plain.pt"
    torch.save(model.state_dict(), plain)  # a bare state_dict is not a checkpoint either
    with pytest.raises(InputError, match="format is None, expected 'hadar-ckpt-1'$"):
        load_checkpoint(plain, "IC", "tiny")
    good = tmp_path / "good.pt"
    save_ic(good)
    bad = tmp_path / "truncated.pt"
    bad.write_bytes(good.read_bytes()[:500])
    with pytest.raises(InputError, match="not a readable checkpoint"):
        load_checkpoint(bad, "IC", "tiny")
    with pytest.raises(InputError, match="checkpoint file not found$"):
        load_checkpoint(tmp_path / "nope.pt", "IC", "tiny")
    neg = tmp_path / "neg.pt"
    torch.save(dict(torch.load(good, weights_only=True), steps=-1), neg)
    with pytest.raises(InputError, match="'steps' must be a non-negative integer, got -1$"):
        load_checkpoint(neg, "IC", "tiny")
