"""Per-node ``env:``, ``setup:`` (run once per run, its environment kept) and login shells,
against real sshd servers."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from hadar.clusters import cluster_from_dict
from hadar.core.errors import InputError
from hadar.providers.base import make_provider
from hadar.providers.ssh.provider import NodeSetupError, SshProvider
from tests.fixtures.sshd import SshdFarm

pytestmark = pytest.mark.ssh


def fake_env(root: Path, name: str = "hadar-env") -> Path:
    """A conda-like environment: ``bin/python`` and an ``activate`` script that puts it on PATH."""
    env = root / name
    (env / "bin").mkdir(parents=True)
    (env / "bin" / "python").symlink_to(sys.executable)
    (env / "activate").write_text(
        f'export PATH="{env}/bin:$PATH"\nexport CONDA_PREFIX="{env}"\n'
        f'export LD_LIBRARY_PATH="{env}/lib${{LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}}"\n'
    )
    return env


def provider(farm: SshdFarm, run_id: str, **ssh) -> SshProvider:
    p = make_provider(farm.cluster(**ssh), run_id)
    assert isinstance(p, SshProvider)
    return p


PROBE = [
    "python",
    "-c",
    "import os, sys; print(sys.executable, os.environ.get('CONDA_PREFIX'),"
    " os.environ.get('LD_LIBRARY_PATH'), os.environ.get('STAGE'))",
]


def test_setup_runs_once_per_run_and_its_environment_is_kept(
    sshd_farm: SshdFarm, tmp_path: Path
) -> None:
    env = fake_env(tmp_path)
    counter = tmp_path / "setup-count"
    setup = [f"echo ran >> {counter}", f". {env}/activate", "echo setup output to stdout"]
    with provider(
        sshd_farm,
        "run-a",
        setup=setup,
        python="python",
        env={"STAGE": "section"},
        nodes={"ssh-t4": {"env": {"STAGE": "node"}}},
    ) as p:
        for _ in range(3):
            res = p.run("ssh-t4", PROBE, 30)
            assert res.ok, res.stderr
            exe, prefix, ld, stage = res.stdout.split()
            assert exe == f"{env}/bin/python" and prefix == str(env)
            assert ld == f"{env}/lib" and stage == "node"
        res = p.run("ssh-v100", PROBE, 30)
        assert res.stdout.split()[1:] == [str(env), f"{env}/lib", "section"]
        health = p.check("ssh-k80", timeout_s=30)
        assert health.reachable, health.error
        # setup's stdout never pollutes a command's output; it ran in the run's workdir
        assert "setup output" not in res.stdout
    assert counter.read_text().count("ran") == 3  # once on each of the three nodes
    with provider(sshd_farm, "run-b", setup=setup) as p:
        assert p.run("ssh-t4", ["true"], 30).ok
    assert counter.read_text().count("ran") == 4  # a new run sets up again


def test_setup_failure_is_one_line_and_marks_the_node_unusable(
    sshd_farm: SshdFarm, tmp_path: Path
) -> None:
    setup = ["echo preparing", "echo 'pip: no matching distribution' >&2; exit 7", "echo never"]
    with provider(sshd_farm, "run-fail", nodes={"ssh-k80": {"setup": setup}}) as p:
        with pytest.raises(NodeSetupError) as err:
            p.run("ssh-k80", ["true"], 30)
        msg = str(err.value)
        assert msg.startswith(
            f"node ssh-k80 (127.0.0.1:{sshd_farm.server('ssh-k80').port}): setup failed (exit 7): "
        )
        assert "no matching distribution" in msg and "\n" not in msg
        assert err.value.exit_code == 3
        health = p.check("ssh-k80", timeout_s=30)
        assert not health.reachable and "setup failed (exit 7)" in health.error
        assert p.run("ssh-t4", ["true"], 30).ok  # other nodes are unaffected


def test_setup_timeout_kills_it(sshd_farm: SshdFarm, tmp_path: Path) -> None:
    marker = tmp_path / "late"
    slow = [f"sleep 30; touch {marker}"]
    with (
        provider(sshd_farm, "run-slow", setup=slow, setup_timeout_s=1, kill_grace_s=0.5) as p,
        pytest.raises(NodeSetupError, match="setup timed out after 1s"),
    ):
        p.run("ssh-t4", ["true"], 30)
    assert not marker.exists()


def test_login_shell_profile_reaches_the_worker(tmp_path: Path) -> None:
    env = fake_env(tmp_path)
    with SshdFarm.start(tmp_path / "farm", n=1) as farm:
        home = farm.servers[0].home
        (home / ".profile").write_text(f". {env}/activate\nexport STAGE=profile\n")
        (home / ".bash_profile").write_text(". ~/.profile\n")
        (home / ".zprofile").write_text(". ~/.profile\n")
        name = farm.servers[0].name
        with provider(farm, "plain", python="python") as p:
            res = p.run(name, ["sh", "-c", "echo ${STAGE:-unset} ${CONDA_PREFIX:-unset}"], 30)
            assert res.stdout.split() == ["unset", "unset"]  # no profile without a login shell
        with provider(farm, "login", python="python", login_shell=True) as p:
            res = p.run(name, PROBE, 30)
            assert res.ok, res.stderr
            assert res.stdout.split() == [f"{env}/bin/python", str(env), f"{env}/lib", "profile"]


@pytest.mark.parametrize(
    ("ssh", "field"),
    [
        ({"env": {"1BAD": "x"}}, "ssh.env"),
        ({"nodes": {"ssh-t4": {"env": {"A-B": "x"}}}}, "ssh.nodes.ssh-t4.env"),
        ({"setup": [1, 2]}, "ssh.setup"),
        ({"setup_timeout_s": 0}, "ssh.setup_timeout_s"),
    ],
)
def test_bad_environment_settings_are_one_line(sshd_farm: SshdFarm, ssh: dict, field: str) -> None:
    data = sshd_farm.cluster_dict(**ssh)
    with pytest.raises(InputError) as err:
        make_provider(cluster_from_dict(data, source="lab.yaml"), "r")
    assert str(err.value).startswith(f"lab.yaml: {field}")
    assert "\n" not in str(err.value)


def test_no_setup_means_no_extra_round_trip(sshd_farm: SshdFarm) -> None:
    with provider(sshd_farm, "run-plain", env={"STAGE": "x"}) as p:
        assert p.run_env("ssh-t4") == {"STAGE": "x"}
        assert os.environ.get("STAGE") is None
