"""Paths built from input stay under their root (issue 17): node names, cluster names and job ids
are restricted where their file is loaded, and every path built from them is resolved and
checked where it is built, so ``..``, absolute paths and planted symlinks go nowhere."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hadar.clusters import cluster_from_dict, load_cluster
from hadar.core.cluster import Cluster, Node
from hadar.core.errors import InputError
from hadar.core.jobs import Job
from hadar.core.safe_paths import PathEscapeError, confined
from hadar.providers.base import RemotePathError, make_provider
from hadar.providers.local.provider import LocalProvider
from hadar.providers.ssh.provider import SshProvider
from hadar.runtime.dispatch import CopyTask, run_copy
from hadar.workloads.files import load_job_file

ESCAPES = ["../../../x", "..", "/tmp/hadar-escape", "a/b", "~root", ".hidden", "a b", "-rf", ""]


def _cluster(node_name: str, cluster_name: str = "c") -> dict:
    return {
        "name": cluster_name,
        "provider": "local",
        "nodes": [{"name": node_name, "gpus": {"v100": 1}}],
    }


@pytest.mark.parametrize("name", ESCAPES)
def test_node_names_outside_the_safe_set_are_refused_naming_file_and_field(name: str) -> None:
    with pytest.raises(InputError) as err:
        cluster_from_dict(_cluster(name), source="c.yaml")
    msg = str(err.value)
    assert msg.startswith("c.yaml: nodes[0].name: ") and "\n" not in msg


@pytest.mark.parametrize("name", ["../up", "/abs", "a/b"])
def test_cluster_names_outside_the_safe_set_are_refused(name: str) -> None:
    with pytest.raises(InputError, match=r"^c\.yaml: name: .*not a safe name"):
        cluster_from_dict(_cluster("ok", cluster_name=name), source="c.yaml")


def test_counted_node_names_stay_safe() -> None:
    c = cluster_from_dict(
        {"name": "c", "nodes": [{"name": "k80.x_1", "count": 2, "gpus": {"k80": 1}}]}
    )
    assert c.node_names == ("k80.x_1-0", "k80.x_1-1")


@pytest.mark.parametrize("job_id", ["../x", "/etc/passwd", "1/../../2", -1])
def test_job_ids_that_are_not_non_negative_integers_are_refused(
    tmp_path: Path, job_id: object
) -> None:
    path = tmp_path / "jobs.yaml"
    path.write_text(json.dumps({"jobs": [{"id": job_id, "type": "MM", "gpus": 1, "steps": 5}]}))
    with pytest.raises(InputError) as err:
        load_job_file(path)
    assert str(err.value).startswith(f"{path}: jobs[0].id: ")


def test_a_node_named_to_escape_in_code_is_refused_by_every_provider(tmp_path: Path) -> None:
    """Defence in depth: a Cluster built in code (not loaded from a file) with a bad name."""
    bad = Cluster("c", (Node("../../evil", {"v100": 1}),), provider="local")
    local = LocalProvider(bad, "run-1", base_dir=tmp_path / "nodes")
    with pytest.raises(RemotePathError, match=r"node '\.\./\.\./evil': not a safe directory name"):
        local.workdir("../../evil")
    with pytest.raises(RemotePathError):
        local.put("../../evil", __file__, "spec.json")
    assert not (tmp_path / "evil").exists()
    ssh = SshProvider(
        Cluster(
            "c", (Node("/abs", {"v100": 1}, transport={"address": "127.0.0.1"}),), provider="ssh"
        ),
        "run-1",
    )
    with pytest.raises(RemotePathError, match="not a safe directory name"):
        ssh.workdir("/abs")


def test_a_symlinked_node_directory_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    p = make_provider(load_cluster("local-3node"), "run-1", base_dir=tmp_path / "nodes")
    (tmp_path / "nodes" / "run-1").mkdir(parents=True)
    (tmp_path / "nodes" / "run-1" / "t4").symlink_to(outside)
    with pytest.raises(PathEscapeError) as err:
        p.put("t4", __file__, "r0000-a0/j0-c0/spec.json")
    msg = str(err.value)
    assert (
        msg.startswith("node t4: working directory: 'run-1/t4' resolves to ")
        and str(outside) in msg
    )
    assert list(outside.iterdir()) == []
    assert p.workdir("v100").startswith(
        str((tmp_path / "nodes").resolve())
    )  # other nodes unaffected


def test_the_nodes_folder_swapped_for_a_link_mid_run_is_refused(tmp_path: Path) -> None:
    """The base folder itself (a run's ``nodes/``) moved out and linked back: confining paths
    under the link's target would follow it."""
    p = make_provider(load_cluster("local-3node"), "run-1", base_dir=tmp_path / "nodes")
    p.put("t4", __file__, "spec.json")
    moved = tmp_path / "outside"
    (tmp_path / "nodes").rename(moved)
    (tmp_path / "nodes").symlink_to(moved, target_is_directory=True)
    before = sorted(str(x) for x in moved.rglob("*"))
    with pytest.raises(PathEscapeError, match="now leads to .*outside .a symbolic link planted"):
        p.put("t4", __file__, "spec2.json")
    with pytest.raises(PathEscapeError):
        p.remove_workdir("t4")  # refused: nothing deleted
    assert sorted(str(x) for x in moved.rglob("*")) == before


def test_a_symlink_planted_inside_a_node_directory_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = outside / "secret.pt"
    secret.write_bytes(b"not yours")
    p = make_provider(load_cluster("local-3node"), "run-1", base_dir=tmp_path / "nodes")
    wd = Path(p.workdir("k80"))
    wd.mkdir(parents=True)
    (wd / "r0000-a0").symlink_to(outside)  # a job's round directory pointing elsewhere
    with pytest.raises(
        PathEscapeError, match="node k80: file: 'r0000-a0/j0-c0/spec.json' resolves to"
    ):
        p.put("k80", __file__, "r0000-a0/j0-c0/spec.json")
    (wd / "out.pt").symlink_to(secret)  # a result file pointing elsewhere
    with pytest.raises(PathEscapeError):
        p.get("k80", "out.pt", tmp_path / "fetched.pt")
    with pytest.raises(PathEscapeError):
        p.sha256("k80", "out.pt")
    assert not (tmp_path / "fetched.pt").exists() and sorted(x.name for x in outside.iterdir()) == [
        "secret.pt"
    ]


def test_dispatch_stops_on_a_path_escape_instead_of_retrying_it(tmp_path: Path) -> None:
    """A planted symlink is not a copy failure to retry every round: it reaches the caller."""
    outside = tmp_path / "outside"
    outside.mkdir()
    p = make_provider(load_cluster("local-3node"), "run-1", base_dir=tmp_path / "nodes")
    wd = Path(p.workdir("v100"))
    wd.mkdir(parents=True)
    (wd / "r0003-a0").symlink_to(outside)
    job = Job(
        job_id=7,
        job_type="MM",
        num_gpus=1,
        total_steps=10,
        spec={"model": "MM", "size": "tiny", "data": "synthetic", "batch_size": 4, "lr": 0.01},
    )
    task = CopyTask(
        round=3,
        attempt=0,
        job=job,
        copy=0,
        tracker_copy=1,
        placement={"v100": {"v100": 1}},
        steps=1,
        deadline_s=5,
        timeout_s=10,
        checkpoint_in=None,
        checkpoint_sha256=None,
        data_stream=1,
        threads=1,
        gpus={"v100": {"v100": (0,)}},
        devices={"v100": {"v100": (0,)}},
        warm=False,
    )
    with pytest.raises(PathEscapeError, match="r0003-a0/j7-c0/spec.json"):
        run_copy(p, task, tmp_path / "incoming")
    assert list(outside.iterdir()) == []


def test_confined_accepts_inner_paths_and_refuses_the_rest(tmp_path: Path) -> None:
    assert confined(tmp_path, "a", "b", what="x") == (tmp_path / "a" / "b").resolve()
    for parts in (("..", "y"), ("/etc",), ("a", "..", "..", "y")):
        with pytest.raises(PathEscapeError, match=r"^x: "):
            confined(tmp_path, *parts, what="x")
