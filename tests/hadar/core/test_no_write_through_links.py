"""No write or delete through a planted symbolic link, and no writer turns a device, a FIFO or a
socket into a regular file (issue 28, items 2-4). Real files, real links, a real FIFO and a real
Unix socket; the commands run as users run them (subprocesses)."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
from pathlib import Path

import pytest

from hadar.core.errors import InputError
from hadar.core.io import open_append, write_bytes, write_figure, write_json
from hadar.core.safe_paths import PathEscapeError, refuse_links, regular_files
from tests.fixtures.cli import hadar_cli, one_error_line


def hadar(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return hadar_cli(*args, cwd=cwd)


# -- the central helpers ---------------------------------------------------------------------
def test_appending_never_follows_a_link(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("mine\n")
    (tmp_path / "events.jsonl").symlink_to(outside)
    with pytest.raises(InputError, match=r"events.jsonl: is a symbolic link"):
        open_append(tmp_path / "events.jsonl")
    assert outside.read_text() == "mine\n"
    with open_append(tmp_path / "new.jsonl") as f:  # a plain file is created and appended to
        f.write("a\n")
    with open_append(tmp_path / "new.jsonl") as f:
        f.write("b\n")
    assert (tmp_path / "new.jsonl").read_text() == "a\nb\n"


def test_appending_to_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    with pytest.raises(InputError, match="pipe: is a FIFO, not a regular file"):
        open_append(tmp_path / "pipe")


def test_a_figure_replaces_a_link_instead_of_writing_its_target(tmp_path: Path) -> None:
    from matplotlib.figure import Figure

    outside = tmp_path / "outside.png"
    outside.write_bytes(b"not yours")
    (tmp_path / "completion.png").symlink_to(outside)
    fig = Figure()
    fig.add_subplot().plot([0, 1], [0, 1])
    write_figure(tmp_path / "completion.png", fig)
    assert outside.read_bytes() == b"not yours"
    assert not (tmp_path / "completion.png").is_symlink()
    assert (tmp_path / "completion.png").read_bytes().startswith(b"\x89PNG")


@pytest.mark.parametrize("kind", ["fifo", "socket", "folder", "link-to-fifo"])
def test_writers_refuse_a_path_that_is_not_a_regular_file(tmp_path: Path, kind: str) -> None:
    target = tmp_path / "out"
    server = None
    if kind == "fifo":
        os.mkfifo(target)
    elif kind == "socket":
        server = socket.socket(socket.AF_UNIX)
        # bound by a short name from its folder: a Unix socket's path holds 107 bytes at most,
        # which a long temporary folder exceeds
        here = os.getcwd()
        os.chdir(tmp_path)
        try:
            server.bind("out")
        finally:
            os.chdir(here)
    elif kind == "folder":
        target.mkdir()
    else:
        os.mkfifo(tmp_path / "pipe")
        target.symlink_to(tmp_path / "pipe")
    before = os.lstat(target).st_mode
    try:
        with pytest.raises(InputError, match=r"out: is a (FIFO|socket|folder), not a regular file"):
            write_json(target, {"x": 1})
        with pytest.raises(InputError, match="not a regular file"):
            write_bytes(target, b"x")
    finally:
        if server is not None:
            server.close()
    assert os.lstat(target).st_mode == before
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["out"] + (["pipe"] if kind == "link-to-fifo" else [])
    )  # no temporary file left behind


def test_a_run_directory_with_a_planted_link_is_refused(tmp_path: Path) -> None:
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / "summary.json").write_text("{}")
    refuse_links(run, "the run directory")  # none: fine
    refuse_links(tmp_path / "missing", "the run directory")
    (run / "checkpoints" / "job-77").symlink_to(tmp_path)
    with pytest.raises(PathEscapeError, match=r"checkpoints/job-77: a symbolic link in"):
        refuse_links(run, "the run directory")


def test_regular_files_never_lists_through_a_link(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (real / "a.pt").write_bytes(b"a")
    (real / "sub").mkdir()
    os.mkfifo(real / "pipe")
    (real / "link.pt").symlink_to(real / "a.pt")
    assert [p.name for p in regular_files(real)] == ["a.pt"]
    (tmp_path / "job-77").symlink_to(real)
    assert list(regular_files(tmp_path / "job-77")) == []
    assert list(regular_files(tmp_path / "missing")) == []


# -- the commands ------------------------------------------------------------------------------
def test_export_gavel_refuses_a_fifo_and_leaves_it_one(tmp_path: Path) -> None:
    """The issue's /dev/null case (a character device, as root) on a FIFO anyone can make."""
    pipe = tmp_path / "trace.txt"
    os.mkfifo(pipe)
    res = hadar("export-gavel", "--workload", "M-1", "--out", str(pipe), cwd=tmp_path)
    assert res.returncode == 2, res.stderr
    assert "trace.txt exists and is not a regular file" in one_error_line(res)
    assert stat.S_ISFIFO(os.lstat(pipe).st_mode)


def test_out_a_dangling_link_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "out").symlink_to(tmp_path / "nowhere")
    res = hadar(
        "simulate", "--workload", "M-1", "--cluster", "sim-60gpu", "--out", "out", cwd=tmp_path
    )
    assert res.returncode == 2, res.stderr
    assert "out is a dangling symbolic link" in one_error_line(res)
    assert not (tmp_path / "nowhere").exists()


def test_simulate_does_not_write_its_figures_through_a_planted_link(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    victim = tmp_path / "victim.png"
    victim.write_bytes(b"keep me")
    (out / "completion.png").symlink_to(victim)
    res = hadar(
        "simulate",
        "--workload",
        "M-1",
        "--cluster",
        "sim-60gpu",
        "--no-progress",
        "--figures",
        "--out",
        str(out),
        cwd=tmp_path,
    )
    assert res.returncode == 0, res.stderr
    assert victim.read_bytes() == b"keep me"
    assert (out / "completion.png").read_bytes().startswith(b"\x89PNG")


# -- links planted mid-run: every component of a real path (issue 46) -------------------------
def _swap_for_link(folder: Path, outside: Path) -> None:
    """Move ``folder`` to ``outside`` and leave a link to it in its place."""
    folder.rename(outside)
    folder.symlink_to(outside, target_is_directory=True)


def test_real_folder_refuses_a_link_at_any_component_and_creates_what_is_missing(
    tmp_path: Path,
) -> None:
    from hadar.core.safe_paths import real_folder

    run = tmp_path.resolve() / "run"
    with real_folder(run / "checkpoints" / "job-0", create=True) as fd:
        assert os.path.samestat(os.fstat(fd), os.stat(run / "checkpoints" / "job-0"))
    _swap_for_link(run / "checkpoints", tmp_path / "elsewhere")
    with (
        pytest.raises(PathEscapeError, match=r"run/checkpoints: a symbolic link"),
        real_folder(run / "checkpoints" / "job-0"),
    ):
        pass
    with pytest.raises(PathEscapeError), real_folder(run / "checkpoints" / "job-1", create=True):
        pass
    assert sorted(p.name for p in (tmp_path / "elsewhere").iterdir()) == ["job-0"]


def test_prune_and_remove_tree_never_reach_through_a_swapped_folder(tmp_path: Path) -> None:
    from hadar.core.safe_paths import prune_files, remove_tree

    run = tmp_path.resolve() / "run"
    job = run / "checkpoints" / "job-0"
    job.mkdir(parents=True)
    for name in ("round-1.pt", "round-2.pt", "keep.txt"):
        (job / name).write_bytes(b"x")
    (job / "round-9.pt").symlink_to(tmp_path / "victim.pt")
    (tmp_path / "victim.pt").write_bytes(b"mine")
    assert prune_files(job, lambda n: n.startswith("round-")) == ["round-1.pt", "round-2.pt"]
    assert sorted(p.name for p in job.iterdir()) == ["keep.txt", "round-9.pt"]
    assert (tmp_path / "victim.pt").read_bytes() == b"mine"  # a link is never followed
    assert prune_files(run / "missing", lambda n: True) == []

    outside = tmp_path / "outside"
    _swap_for_link(run / "checkpoints", outside)
    with pytest.raises(PathEscapeError):
        prune_files(job, lambda n: True)
    with pytest.raises(PathEscapeError):
        remove_tree(job)
    assert sorted(p.name for p in (outside / "job-0").iterdir()) == ["keep.txt", "round-9.pt"]

    (run / "checkpoints").unlink()
    outside.rename(run / "checkpoints")
    remove_tree(run / "checkpoints")  # a link inside is removed itself, its target kept
    assert not (run / "checkpoints").exists()
    assert (tmp_path / "victim.pt").read_bytes() == b"mine"
    (run / "nodes" / "a" / "b").mkdir(parents=True)
    (run / "nodes" / "c").mkdir()
    (run / "nodes" / "c" / "left.txt").write_text("x")
    remove_tree(run / "nodes", only_empty=True)  # a file keeps its folders
    assert sorted(str(p.relative_to(run)) for p in run.rglob("*")) == [
        "nodes",
        "nodes/c",
        "nodes/c/left.txt",
    ]


def test_nofollow_writes_refuse_a_swapped_folder(tmp_path: Path) -> None:
    run = tmp_path.resolve() / "run"
    write_json(run / "out" / "summary.json", {"a": 1}, nofollow=True)
    with open_append(run / "out" / "events.jsonl", nofollow=True) as f:
        f.write("one\n")
    _swap_for_link(run / "out", tmp_path / "elsewhere")
    before = {p.name: p.read_bytes() for p in (tmp_path / "elsewhere").iterdir()}
    with pytest.raises(PathEscapeError):
        write_json(run / "out" / "summary.json", {"a": 2}, nofollow=True)
    with pytest.raises(PathEscapeError):
        open_append(run / "out" / "events.jsonl", nofollow=True)
    assert {p.name: p.read_bytes() for p in (tmp_path / "elsewhere").iterdir()} == before
    write_json(run / "out" / "summary.json", {"a": 3})  # without nofollow: the user's path
    assert json.loads((tmp_path / "elsewhere" / "summary.json").read_text()) == {"a": 3}
