"""The slurm provider against the real local Slurm (scripts/slurm-local): allocations, job
steps, GPUs from Slurm's gres, bad input refused before anything is allocated, revoked
allocations, and the run's job ids released by ``close`` and by a later provider of the run."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from hadar.clusters import load_cluster
from hadar.core.errors import InputError, UnreachableNodeError
from hadar.providers.base import make_provider
from hadar.providers.slurm.provider import SlurmProvider, job_name
from tests.fixtures.slurm import CLUSTER_FILE, LocalSlurm

pytestmark = pytest.mark.slurm


def _cluster_file(tmp_path: Path, **changes: object) -> Path:
    doc = yaml.safe_load(CLUSTER_FILE.read_text())
    for key, value in changes.items():
        if key == "nodes":
            doc["nodes"] = value
        else:
            doc["slurm"][key] = value
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def _provider(path: Path, tmp_path: Path, run_id: str = "t1") -> SlurmProvider:
    p = make_provider(load_cluster(path), run_id, base_dir=tmp_path / "nodes")
    assert isinstance(p, SlurmProvider)
    return p


def test_each_node_is_an_allocation_commands_are_steps_and_close_releases_them(
    slurm: LocalSlurm, tmp_path: Path
) -> None:
    p = _provider(CLUSTER_FILE, tmp_path)
    health = p.check("n2", timeout_s=60)
    assert health.reachable and health.error is None, health
    alloc = p.allocations()["n2"]
    assert alloc.slurm_node == "n2"
    jobs = {j[0]: j for j in slurm.squeue()}
    assert jobs[alloc.job_id][1:] == ("idle", "RUNNING", job_name("t1", "n2"))
    # a plain command shares the allocation: it sees the node's two GPUs Slurm granted
    res = p.run("n2", ["sh", "-c", "echo $SLURM_JOB_ID $CUDA_VISIBLE_DEVICES; pwd"], timeout_s=60)
    assert res.ok, res
    job, visible, cwd = res.stdout.split()
    assert job == alloc.job_id and visible == "0,1" and cwd == p.workdir("n2")
    # a worker given one GPU gets one from Slurm, which sets CUDA_VISIBLE_DEVICES itself
    res = p.run(
        "n2", ["sh", "-c", "echo $CUDA_VISIBLE_DEVICES"], 60, env={"CUDA_VISIBLE_DEVICES": "1"}
    )
    assert res.ok and res.stdout.strip() in {"0", "1"}, res
    # files move through the shared file system, verified
    src = tmp_path / "a.txt"
    src.write_text("hello")
    sha = p.put("n2", src, "r/a.txt")
    assert p.sha256("n2", "r/a.txt") == sha
    assert p.run("n2", ["cat", "r/a.txt"], 60).stdout == "hello"
    p.close()
    assert slurm.settled() == []


def test_a_step_past_its_timeout_is_killed(slurm: LocalSlurm, tmp_path: Path) -> None:
    with _provider(CLUSTER_FILE, tmp_path) as p:
        res = p.run("n1", ["sleep", "30"], timeout_s=2)
        assert res.timed_out and res.seconds < 20
    assert slurm.settled() == []


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"partition": "nope"}, "slurm.partition: Slurm has no partition 'nope'"),
        (
            {"nodes": [{"name": "n1", "gpus": {"k80": 1}, "emulate": True}]},
            "nodes[n1]: Slurm refuses the request (gres gpu:k80:1",
        ),
        (
            {"nodes": [{"name": "n1", "gpus": {"v100": 3}, "emulate": True}]},
            "nodes[n1]: Slurm refuses the request (gres gpu:v100:3",
        ),
        (
            {"nodes": [{"name": "a", "gpus": {"v100": 1}, "emulate": True, "slurm_node": "n9"}]},
            "nodes[a].slurm_node: Slurm refuses 'n9'",
        ),
    ],
)
def test_a_request_slurm_refuses_is_one_line_and_allocates_nothing(
    slurm: LocalSlurm, tmp_path: Path, change: dict[str, object], named: str
) -> None:
    path = _cluster_file(tmp_path, **change)
    with pytest.raises(InputError) as err:
        _provider(path, tmp_path)
    assert err.value.exit_code == 2
    assert str(err.value).startswith(f"{path}: {named}"), err.value
    assert "\n" not in str(err.value)
    assert slurm.settled() == []


def test_slurm_not_reachable_is_one_line(slurm: LocalSlurm, tmp_path: Path) -> None:
    conf = tmp_path / "slurm.conf"  # a controller on a port nothing listens on
    text = slurm.conf.read_text()
    conf.write_text(
        "\n".join(
            "SlurmctldPort=1" if ln.startswith("SlurmctldPort=") else ln for ln in text.splitlines()
        )
    )
    path = _cluster_file(tmp_path, slurm_conf=str(conf))
    with pytest.raises(InputError) as err:
        _provider(path, tmp_path)
    assert str(err.value).startswith(f"{path}: Slurm not reachable: sinfo: "), err.value
    missing = _cluster_file(tmp_path, slurm_conf=str(tmp_path / "none.conf"))
    with pytest.raises(InputError, match=r"slurm.slurm_conf: no file .*none.conf$"):
        _provider(missing, tmp_path)


def test_a_revoked_allocation_makes_the_node_unreachable_until_a_new_one(
    slurm: LocalSlurm, tmp_path: Path
) -> None:
    with _provider(CLUSTER_FILE, tmp_path) as p:
        first = p.allocation("n3")
        slurm.cmd("scancel", first.job_id)
        with pytest.raises(UnreachableNodeError, match=rf"allocation {first.job_id} .* revoked"):
            p.run("n3", ["sleep", "5"], timeout_s=30)
        health = p.check("n3", timeout_s=60)
        assert health.reachable, health
        assert p.allocations()["n3"].job_id != first.job_id
    assert slurm.settled() == []


def test_a_later_provider_of_the_run_releases_a_crashed_sessions_allocations(
    slurm: LocalSlurm, tmp_path: Path
) -> None:
    crashed = _provider(CLUSTER_FILE, tmp_path, run_id="r7")
    ids = {crashed.allocation(n).job_id for n in ("n1", "n2")}
    assert set(crashed.recorded_jobs()) == ids  # recorded before use
    assert {j[0] for j in slurm.squeue()} == ids  # never closed: the session "crashed"
    other = _provider(CLUSTER_FILE, tmp_path, run_id="r8")  # another run's are not touched
    assert {j[0] for j in slurm.squeue()} == ids
    other.close()
    resumed = _provider(CLUSTER_FILE, tmp_path, run_id="r7")
    assert slurm.settled() == []
    new = resumed.allocation("n3").job_id
    crashed.close()  # the run's replaced provider, closed late, cancels only its own
    assert [j[0] for j in slurm.squeue()] == [new]
    assert resumed.recorded_jobs() == [new]
    resumed.close()
    assert slurm.settled() == []
