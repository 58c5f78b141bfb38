"""A provider's settings section is validated with its schema when the cluster file is loaded
(``hadar.providers.transport.check_settings``), not when a run starts: a wrong type, an unknown
key or a missing required one is one line naming the file, the section and the field (exit 2)
whatever command loads the file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from hadar.cli import main
from hadar.clusters import cluster_from_dict, load_cluster
from hadar.core import cluster_config
from hadar.core.errors import InputError

NODE = {"name": "a", "gpus": {"t4": 1}}
AMI = {"ami": "ami-0123456789abcdef0"}


def write(tmp_path: Path, provider: str, **sections: Any) -> Path:
    f = tmp_path / f"{provider}.yaml"
    f.write_text(yaml.safe_dump({"name": "c", "provider": provider, "nodes": [NODE], **sections}))
    return f


BAD = [
    ("ssh", {"ssh": {"port": "twenty-two"}}, "ssh.port: Input should be a valid integer"),
    ("ssh", {"ssh": {"adress": "h1"}}, "ssh.adress: unknown field"),
    ("ssh", {"ssh": {"nodes": {"a": {"python": 3}}}}, "ssh.nodes.a.python: Input should be"),
    ("ssh", {"ssh": {"env": {"A B": "1"}}}, "ssh.env: invalid environment variable name 'A B'"),
    ("aws", {"aws": {"region": "us-east-1"}}, "aws.ami: missing required field"),
    ("aws", {}, "aws.ami: missing required field"),  # its section is required, even absent
    ("aws", {"aws": {**AMI, "tags": {"hadar-cluster": "x"}}}, "aws.tags: tag 'hadar-cluster'"),
    ("aws", {"aws": AMI, "ssh": {"connect_attempts": 0}}, "ssh.connect_attempts: Input should"),
    ("local", {"local": {"kill_grace_s": -1}}, "local.kill_grace_s: Input should be greater"),
    ("local", {"ssh": {"port": 0}}, "ssh.port: Input should be greater than or equal to 1"),
    ("simulated", {"aws": {**AMI, "spot_max_price": "cheap"}}, "aws.spot_max_price: String"),
    ("simulated", {"local": {"base_dirr": "x"}}, "local.base_dirr: unknown field"),
]


@pytest.mark.parametrize(("provider", "sections", "message"), BAD)
def test_a_bad_section_is_refused_when_the_file_is_loaded(
    tmp_path: Path, provider: str, sections: dict[str, Any], message: str
) -> None:
    f = write(tmp_path, provider, **sections)
    with pytest.raises(InputError) as caught:
        load_cluster(f)
    line = str(caught.value)
    assert line.startswith(f"{f}: {message}") and "\n" not in line, line
    # the core alone (which names no provider) does not judge the sections' values
    schema = cluster_config.ProviderSchema(sections=("local", "ssh", "aws"))
    assert cluster_config.load_cluster(f, schema=schema).provider == provider


def test_good_sections_load_and_another_providers_empty_section_is_not_judged(
    tmp_path: Path,
) -> None:
    cluster = load_cluster(write(tmp_path, "aws", aws=AMI, ssh={"connect_attempts": 2}))
    assert cluster.settings["ssh"] == {"connect_attempts": 2}
    assert load_cluster(write(tmp_path, "local", aws={})).provider == "local"
    assert cluster_from_dict({"name": "c", "nodes": [NODE], "aws": {}}).provider == "simulated"
    for name in ("aws-5node", "local-3node", "local-5node", "local-elastic", "sim-60gpu"):
        load_cluster(name)  # the bundled files pass


def test_an_unknown_provider_lists_the_registered_ones(tmp_path: Path) -> None:
    f = write(tmp_path, "sshh")
    with pytest.raises(InputError) as caught:
        load_cluster(f)
    assert str(caught.value) == (
        f"{f}: provider: Input should be 'simulated', 'local', 'ssh', 'aws' or 'slurm' (got 'sshh')"
    )


@pytest.mark.parametrize(
    "argv",
    [
        ["nodes", "check", "--cluster"],
        ["cluster", "status", "--config"],
        ["cluster", "up", "-y", "--config"],
        ["simulate", "--workload", "M-1", "--no-progress", "--cluster"],
    ],
    ids=["nodes-check", "cluster-status", "cluster-up", "simulate"],
)
def test_every_command_that_loads_the_file_refuses_it_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], monkeypatch
) -> None:
    monkeypatch.chdir(tmp_path)
    f = write(tmp_path, "aws", aws={**AMI, "root_volume_gb": 4})
    assert main([*argv, str(f)]) == 2
    captured = capsys.readouterr()
    (line,) = captured.err.strip().splitlines()
    assert line.endswith(
        f"{f}: aws.root_volume_gb: Input should be greater than or equal to 8 (got 4)"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["aws.yaml"]  # nothing written
