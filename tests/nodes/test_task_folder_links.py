"""A node's task folder (``rNNNN-aK/jJ-cC`` below its working directory) swapped for a symbolic
link: the worker, the clean-up of fetched checkpoints and the verified receive of a file never
write, read or delete through it (docs/security.md, "writes and deletes through planted links")."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hadar.core.integrity import sha256_file
from hadar.core.safe_paths import PathEscapeError
from hadar.providers.transfer import receive_verified
from nodes import cleanup
from nodes.worker import enter_task_folder
from tests.nodes.helpers import REPO, write_cifar10, write_spec


def _victim(tmp_path: Path) -> Path:
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "in.pt").write_text("keep me")
    (victim / "out.pt").write_text("keep me too")
    return victim


def _listing(folder: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(folder.iterdir())}


def test_the_worker_keeps_writing_into_its_own_folder_when_the_folder_is_swapped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    node = tmp_path / "node"
    (node / "r0002-a0" / "j0-c0").mkdir(parents=True)
    victim = _victim(tmp_path)
    before = _listing(victim)
    monkeypatch.chdir(node)
    args = argparse.Namespace(
        spec="r0002-a0/j0-c0/spec.json",
        result="r0002-a0/j0-c0/result-0.json",
        checkpoint_out="r0002-a0/j0-c0/out.pt",
        checkpoint_in=None,
    )
    held = enter_task_folder(args)
    assert held is not None
    try:
        assert args.result == f"/proc/self/fd/{held}/result-0.json"
        assert Path.cwd() == node  # a spec's relative data path stays the node's
        # the folder is swapped for a link to the victim while the worker trains
        os.rename(node / "r0002-a0" / "j0-c0", node / "r0002-a0" / "j0-c0.moved")
        os.symlink(victim, node / "r0002-a0" / "j0-c0")
        atomic_write = Path(args.result).with_name(".result.tmp")
        atomic_write.write_text("{}")
        os.replace(atomic_write, args.result)  # as hadar.core.io writes: a temporary, renamed
        Path(args.checkpoint_out).write_text("weights")
    finally:
        os.close(held)
    assert _listing(victim) == before
    moved = node / "r0002-a0" / "j0-c0.moved"
    assert _listing(moved) == {"out.pt": "weights", "result-0.json": "{}"}


def test_paths_given_absolute_or_in_several_folders_are_used_as_given(tmp_path: Path) -> None:
    apart = argparse.Namespace(
        spec="a/spec.json", result="b/result.json", checkpoint_out=None, checkpoint_in=None
    )
    absolute = argparse.Namespace(
        spec=str(tmp_path / "spec.json"),
        result=str(tmp_path / "r.json"),
        checkpoint_out=None,
        checkpoint_in=None,
    )
    assert enter_task_folder(apart) is None and enter_task_folder(absolute) is None
    assert apart.result == "b/result.json" and absolute.result == str(tmp_path / "r.json")


def test_a_worker_whose_task_folder_is_a_planted_link_refuses_with_one_line(
    tmp_path: Path,
) -> None:
    node = tmp_path / "node"
    (node / "r0000-a0").mkdir(parents=True)
    victim = _victim(tmp_path)
    write_spec(victim / "spec.json")
    before = _listing(victim)
    os.symlink(victim, node / "r0000-a0" / "j0-c0")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "nodes.worker",
            "--spec",
            "r0000-a0/j0-c0/spec.json",
            "--steps",
            "2",
            "--deadline-s",
            "60",
            "--checkpoint-out",
            "r0000-a0/j0-c0/out.pt",
            "--result",
            "r0000-a0/j0-c0/result-0.json",
        ],
        cwd=node,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 2, run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and "symbolic link" in lines[0] and "j0-c0" in lines[0], run.stderr
    assert _listing(victim) == before


def test_the_cleanup_never_deletes_through_a_swapped_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    node = tmp_path / "node"
    task = node / "r0001-a0" / "j0-c0"
    task.mkdir(parents=True)
    (task / "in.pt").write_text("x")
    (task / "out.pt").write_text("y")
    (task / "result-0.json").write_text("{}")
    victim = _victim(tmp_path)
    before = _listing(victim)
    monkeypatch.chdir(node)
    assert cleanup.main(["r0001-a0/j0-c0", "in.pt", "out.pt"]) == 0
    assert _listing(task) == {"result-0.json": "{}"}
    # a link named like a checkpoint is removed itself, its target kept
    os.symlink(victim / "in.pt", task / "in.pt")
    assert cleanup.main(["r0001-a0/j0-c0", "in.pt"]) == 0
    assert not (task / "in.pt").is_symlink() and _listing(victim) == before
    # the folder swapped for a link: nothing deleted, exit 2
    os.rename(task, node / "r0001-a0" / "moved")
    os.symlink(victim, task)
    assert cleanup.main(["r0001-a0/j0-c0", "in.pt", "out.pt"]) == 2
    assert _listing(victim) == before
    # a missing folder is nothing to do; a path as a name, or an absolute folder, is refused
    assert cleanup.main(["r0009-a0/j0-c0", "in.pt"]) == 0
    assert cleanup.main(["r0001-a0/moved", "../x"]) == 2
    assert cleanup.main([str(node), "in.pt"]) == 2


def test_a_received_file_lands_in_the_real_folder_even_if_it_is_swapped_during_the_fetch(
    tmp_path: Path,
) -> None:
    incoming = tmp_path / "run" / "incoming" / "r0000-a0"
    incoming.mkdir(parents=True)
    victim = _victim(tmp_path)
    before = _listing(victim)
    source = tmp_path / "source.pt"
    source.write_text("checkpoint bytes")

    def fetch_while_swapped(tmp: Path) -> None:
        os.rename(incoming, incoming.with_name("moved"))
        os.symlink(victim, incoming)
        tmp.write_text(source.read_text())

    dst = incoming / "j0-c0-out.pt"
    receive_verified(dst, fetch_while_swapped, sha256_file(source), "copy", "source")
    assert _listing(victim) == before
    assert _listing(incoming.with_name("moved")) == {"j0-c0-out.pt": "checkpoint bytes"}
    # with the link in place, the next receive is refused and writes nothing
    with pytest.raises(PathEscapeError, match="r0000-a0"):
        receive_verified(
            dst, lambda tmp: tmp.write_text("x"), sha256_file(source), "copy", "source"
        )
    assert _listing(victim) == before


def test_a_relative_data_path_is_still_the_nodes_not_the_task_folders(tmp_path: Path) -> None:
    """The task folder is held by descriptor, not entered: a spec's relative ``data`` path is
    relative to the node's working directory (docs/inputs.md)."""
    node = tmp_path / "node"
    task = node / "r0000-a0" / "j0-c0"
    task.mkdir(parents=True)
    write_cifar10(node / "data" / "cifar")
    write_spec(task / "spec.json", model="IC", data="data/cifar")
    run = subprocess.run(
        [
            sys.executable, "-m", "nodes.worker", "--spec", "r0000-a0/j0-c0/spec.json",
            "--steps", "2", "--deadline-s", "120", "--checkpoint-out", "r0000-a0/j0-c0/out.pt",
            "--result", "r0000-a0/j0-c0/result-0.json",
        ],
        cwd=node, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    result = json.loads((task / "result-0.json").read_text())
    assert result["status"] == "ok" and result["steps_done"] == 2
    assert result["checkpoint"] == "r0000-a0/j0-c0/out.pt" and (task / "out.pt").is_file()
