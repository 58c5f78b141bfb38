"""Hostile values on the provider commands' terminal output and cluster files: ``hadar cluster
up|status`` (aws, against moto in server mode), ``hadar nodes check`` (local and ssh) and
``hadar status``. What a cluster file, a node's health probe, EC2 or a run directory says is
shown as text (rich markup such as ``[/]`` stopped these commands with a traceback; escape
sequences such as ``\\x1b[2J`` reached the terminal raw), a malformed probe answer is one line
naming the node, and an instance type or region EC2 could not take is refused when the file is
loaded (exit 2, naming the file and the field), before anything is asked of EC2."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from hadar.core.errors import InputError
from tests.fixtures.cli import hadar_cli, one_error_line
from tests.fixtures.moto_server import REGION, MotoServer, aws_env, moto_server  # noqa: F401

ESC = "\x1b"
CLEAR = "\x1b[2J"
TITLE = "\x1b]0;pwned\x07"


def hadar(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return hadar_cli(*args, cwd=cwd, env={"HOME": str(cwd), "COLUMNS": "200"})


def no_traceback(res: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in res.stderr and "Error:" not in res.stderr, res.stderr


def aws_cluster(path: Path, aws: dict[str, Any] | None = None, **node: Any) -> Path:
    data = {
        "name": "hostile",
        "provider": "aws",
        "nodes": [{"name": "g", "gpus": {"t4": 1}, "instance_type": "g4dn.xlarge", **node}],
        "aws": {"region": REGION, "ami": "ami-0123456789abcdef0", "poll_interval_s": 0.2}
        | (aws or {}),
    }
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def live(server: MotoServer) -> list[str]:
    res = server.client().describe_instances(
        Filters=[{"Name": "instance-state-name", "Values": ["pending", "running"]}]
    )
    return [i["InstanceId"] for r in res["Reservations"] for i in r["Instances"]]


# -- hadar cluster (aws) -----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("aws", "node", "field", "message"),
    [
        ({}, {"instance_type": "[/]"}, "nodes[g].instance_type", "not an EC2 instance type"),
        ({}, {"instance_type": f"g4dn.xlarge{CLEAR}"}, "nodes[g].instance_type", "not an EC2"),
        ({}, {"instance_type": "../../g4dn.xlarge"}, "nodes[g].instance_type", "not an EC2"),
        ({"region": "us-east-1/../x"}, {}, "aws.region", "not an AWS region (like us-east-1)"),
        ({"region": ""}, {}, "aws.region", "not an AWS region"),
    ],
)
def test_an_instance_type_or_region_ec2_cannot_take_is_refused_at_load(
    aws_env: MotoServer,  # noqa: F811
    tmp_path: Path,
    aws: dict[str, Any],
    node: dict[str, Any],
    field: str,
    message: str,
) -> None:
    """Before: a markup instance type stopped `up` with rich's MarkupError traceback, an escape
    sequence went raw into the price table, and a bad region was `EC2 describe_instances:
    InvalidRegionError` (exit 1, not naming the file)."""
    cfg = aws_cluster(tmp_path / "hostile.yaml", aws, **node)
    res = hadar("cluster", "up", "--config", str(cfg), "-y", "--no-wait-ssh", cwd=tmp_path)
    assert res.returncode == 2, res.stdout + res.stderr
    line = one_error_line(res)
    assert line.startswith(f"hadar: error: {cfg}: {field}: {message}"), line
    assert ESC not in res.stdout + res.stderr
    assert live(aws_env) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hostile.yaml"]


def test_cluster_status_shows_what_ec2_says_as_text(aws_env: MotoServer, tmp_path: Path) -> None:  # noqa: F811
    """An instance tagged for the cluster whose type and node tag look like rich markup (an
    endpoint or a hand-tagged instance may say anything): listed literally, exit 0. Before: a
    MarkupError traceback (``[/]``), or the markup swallowed (``[bold]``)."""
    aws_env.client().run_instances(
        ImageId="ami-0123456789abcdef0",
        InstanceType="[bold]g4dn.xlarge",
        MinCount=1,
        MaxCount=1,
        TagSpecifications=[
            {
                "ResourceType": "instance",
                "Tags": [
                    {"Key": "hadar-cluster", "Value": "hostile"},
                    {"Key": "hadar-node", "Value": "[/]g"},
                ],
            }
        ],
    )
    cfg = aws_cluster(tmp_path / "hostile.yaml")
    res = hadar("cluster", "status", "--config", str(cfg), cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    no_traceback(res)
    assert "[/]g" in res.stdout and "[bold]g4dn.xlarge" in res.stdout, res.stdout


def test_cluster_up_prints_an_out_path_with_markup_literally(
    aws_env: MotoServer,  # noqa: F811
    tmp_path: Path,
) -> None:
    """``--out '[/]x.yaml'``: before, the instances were launched and the file written, then the
    closing message stopped with a MarkupError traceback (exit 1)."""
    cfg = aws_cluster(tmp_path / "hostile.yaml")
    argv = ["cluster", "up", "--config", str(cfg), "-y", "--no-wait-ssh", "--out", "[/]x.yaml"]
    res = hadar(*argv, cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    no_traceback(res)
    assert "wrote SSH cluster file [/]x.yaml (1 node)" in res.stdout, res.stdout
    assert (tmp_path / "[" / "]x.yaml").is_file()


# -- hadar nodes check (local, ssh) -------------------------------------------------------------
def local_cluster(tmp_path: Path, probe_line: str) -> Path:
    """A local cluster whose ``local.python`` answers the health probe with ``probe_line``."""
    (tmp_path / "probe.txt").write_text(probe_line + "\n")
    python = tmp_path / "python"
    python.write_text(f"#!/bin/sh\ncat {tmp_path / 'probe.txt'}\n")
    python.chmod(0o755)
    data = {
        "name": "loc",
        "provider": "local",
        "nodes": [{"name": "a", "gpus": {"t4": 1}}],
        "local": {"python": str(python), "base_dir": str(tmp_path / "base")},
    }
    cfg = tmp_path / "loc.yaml"
    cfg.write_text(yaml.safe_dump(data, sort_keys=False))
    return cfg


def probe(**report: Any) -> str:
    return "HADAR-HEALTH " + json.dumps({"python": "3.11.4", "torch": "2.3.0", **report})


@pytest.mark.parametrize(
    ("report", "shown"),
    [
        ({"python": "[/]"}, "[/]"),
        ({"torch": f"2.3{CLEAR}{TITLE}"}, "2.3\\x1b[2J\\x1b]0;pwned\\x07"),
        ({"nvidia_smi": ["[/]T4"], "gpus": [{"index": 0, "name": "[/]T4"}]}, "[/]T4"),
        ({"notes": [f"{CLEAR}careful"]}, "node a: \\x1b[2Jcareful"),
    ],
    ids=["markup-python", "escapes-torch", "markup-gpu", "escapes-note"],
)
def test_nodes_check_shows_the_probe_answer_as_text(
    tmp_path: Path, report: dict[str, Any], shown: str
) -> None:
    """Before: ``[/]`` stopped `nodes check` with a MarkupError traceback, escape sequences
    reached the terminal raw."""
    res = hadar(
        "nodes", "check", "--cluster", str(local_cluster(tmp_path, probe(**report))), cwd=tmp_path
    )
    no_traceback(res)
    assert res.returncode in (0, 2), res.stdout + res.stderr
    assert shown in res.stdout, res.stdout
    assert ESC not in res.stdout + res.stderr


@pytest.mark.parametrize(
    ("report", "reason"),
    [
        ({"python": 3}, "python: Input should be a valid string (got 3)"),
        ({"torch": ["2"]}, "torch: Input should be a valid string"),
        (
            {"gpus": [{"index": "x", "name": "T4", "memory_mib": 15360}]},
            "gpus[0].index: Input should be a valid integer",
        ),
        ({"gpus": [{"index": 0, "name": "T4", "memory_mib": "nan"}]}, "gpus[0].memory_mib:"),
    ],
    ids=["python-int", "torch-list", "gpu-index", "gpu-memory-nan"],
)
def test_a_malformed_probe_answer_is_one_line_naming_the_node(
    tmp_path: Path, report: dict[str, Any], reason: str
) -> None:
    """Before: NotRenderableError / ValueError tracebacks (exit 1), in `hadar run` too (it reads
    the same report)."""
    res = hadar(
        "nodes", "check", "--cluster", str(local_cluster(tmp_path, probe(**report))), cwd=tmp_path
    )
    no_traceback(res)
    assert res.returncode == 2, res.stdout + res.stderr
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith("node a: ")]
    assert len(lines) == 1, res.stdout
    assert "health probe report: " + reason in lines[0], lines[0]


def ssh_cluster(tmp_path: Path, **node: Any) -> Path:
    data = {
        "name": "lab",
        "provider": "ssh",
        "nodes": [{"name": "n1", "gpus": {"t4": 1}, "address": "127.0.0.1", "port": 1, **node}],
        "ssh": {"ssh_config": None, "connect_attempts": 1, "connect_timeout_s": 2},
    }
    cfg = tmp_path / "lab.yaml"
    cfg.write_text(yaml.safe_dump(data, sort_keys=False))
    return cfg


def test_an_ssh_address_with_markup_is_shown_as_text(tmp_path: Path) -> None:
    """``[`` and ``]`` are valid in an OpenSSH host name, so ``[/]x`` loads; its row in the table
    stopped `nodes check` with a MarkupError traceback before. Now: unreachable, exit 3."""
    res = hadar(
        "nodes", "check", "--cluster", str(ssh_cluster(tmp_path, address="[/]x")), cwd=tmp_path
    )
    no_traceback(res)
    assert res.returncode == 3, res.stdout + res.stderr
    assert "│ [/]x" in res.stdout or "[/]x:1" in res.stdout, res.stdout


@pytest.mark.parametrize("kind", ["directory", "fifo"])
def test_an_identity_file_that_is_no_file_says_so(tmp_path: Path, kind: str) -> None:
    """A directory or a FIFO as ``identity_file``: one line naming the node, never opened (a
    FIFO would block). Before: ``identity_file ... not found`` although it exists."""
    key = tmp_path / "key"
    if kind == "directory":
        key.mkdir()
    else:
        import os

        os.mkfifo(key)
    cfg = ssh_cluster(tmp_path, identity_file=str(key))
    res = hadar("nodes", "check", "--cluster", str(cfg), "--json", cwd=tmp_path)
    no_traceback(res)
    assert res.returncode == 3, res.stdout + res.stderr
    (row,) = map(json.loads, res.stdout.splitlines())
    assert row["error"] == f"node n1 (127.0.0.1:1): identity_file {key} is not a regular file"


# -- hadar run: the user's set-up, checked before anything is written -------------------------
JOBS = {
    "jobs": [
        {
            "id": 0,
            "type": "MM",
            "gpus": 1,
            "steps": 40,
            "spec": {
                "model": "MM",
                "size": "tiny",
                "data": "synthetic",
                "batch_size": 16,
                "lr": 0.001,
            },
        }
    ]
}
NO_AWS = {
    "AWS_ACCESS_KEY_ID": "",
    "AWS_SECRET_ACCESS_KEY": "",
    "AWS_SESSION_TOKEN": "",
    "AWS_CONFIG_FILE": "/nonexistent/config",
    "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/credentials",
    "AWS_EC2_METADATA_DISABLED": "true",
}


def run_cluster(cfg: Path, tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    (tmp_path / "jobs.yaml").write_text(yaml.safe_dump(JOBS))
    return hadar_cli(
        "run", "--cluster", str(cfg), "--workload", "jobs.yaml", "--no-live", "--no-eval",
        "--out", "run", cwd=tmp_path, env={"HOME": str(tmp_path), **env}, timeout=120,
    )  # fmt: skip


@pytest.mark.parametrize("provider", ["aws", "ssh"])
def test_a_run_with_a_missing_identity_file_is_exit_2_and_writes_nothing(
    tmp_path: Path, provider: str
) -> None:
    """Bad input naming the cluster file and the key (it was an unreachable node, exit 3,
    after ``state.sqlite`` and ``checkpoints/`` had been written)."""
    key = tmp_path / "missing.pem"
    if provider == "aws":
        cfg = aws_cluster(tmp_path / "aws.yaml", {"identity_file": str(key)})
        field = "aws.identity_file:"
    else:
        cfg = ssh_cluster(tmp_path, identity_file=str(key))
        field = "node n1: identity_file"
    res = run_cluster(cfg, tmp_path, {"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "y"})
    assert res.returncode == 2, res.stdout + res.stderr
    assert one_error_line(res) == f"hadar: error: {cfg}: {field} {key} not found"
    assert not (tmp_path / "run").exists()


def test_an_aws_run_without_credentials_writes_nothing(tmp_path: Path) -> None:
    key = tmp_path / "hadar.pem"
    key.write_text("a key\n")
    cfg = aws_cluster(tmp_path / "aws.yaml", {"identity_file": str(key)})
    res = run_cluster(cfg, tmp_path, NO_AWS)
    assert res.returncode == 1, res.stdout + res.stderr
    assert one_error_line(res).startswith("hadar: error: no AWS credentials found")
    assert not (tmp_path / "run").exists()


# -- hadar status ------------------------------------------------------------------------------
def test_status_shows_run_json_and_the_log_line_as_text(tmp_path: Path) -> None:
    """A run directory's ``run.json`` and ``run.log`` are shown as text: before, ``[/]`` in the
    policy stopped `hadar status` with a MarkupError traceback and the log's escape sequences
    reached the terminal raw."""
    run = tmp_path / "runs" / "r1"
    run.mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"policy": "[/]", "workload": f"M-3{CLEAR}"}))
    (run / "run.log").write_text(f"round 3 {TITLE}[bold]done[/]\n")
    res = hadar("status", cwd=tmp_path)
    no_traceback(res)
    assert res.returncode == 0, res.stdout + res.stderr
    assert ESC not in res.stdout
    for shown in ("[/]", "M-3\\x1b[2J", "round 3 \\x1b]0;pwned\\x07[bold]done[/]"):
        assert shown in res.stdout, res.stdout


@pytest.mark.parametrize("port", [True, "22", 22.0])
def test_an_ssh_port_is_a_yaml_integer(port: object) -> None:
    """As GPU counts: ``true`` read as port 1, ``"22"`` and ``22.0`` as 22; now refused."""
    from hadar.clusters import cluster_from_dict

    for spec in (
        {"nodes": [{"name": "a", "gpus": {"v100": 1}, "port": port}]},
        {"ssh": {"port": port}, "nodes": [{"name": "a", "gpus": {"v100": 1}}]},
    ):
        with pytest.raises(InputError, match=r"port: Input should be a valid integer"):
            cluster_from_dict({"name": "c", "provider": "ssh", **spec}, "c.yaml")


AWS_OK = {"region": "us-east-1", "ami": "ami-1", "key_name": "k"}


@pytest.mark.parametrize(
    ("spec", "where"),
    [
        ({"nodes": [{"name": "a", "gpus": {"v100": 1}, "pcie_gen": True}]}, "nodes[0].pcie_gen"),
        (
            {"nodes": [{"name": "a", "gpus": {"v100": 1}, "speed_factor": "0.5"}]},
            "nodes[0].speed_factor",
        ),
        ({"provider": "ssh", "ssh": {"trust_new_hosts": "yes"}}, "ssh.trust_new_hosts"),
        ({"provider": "ssh", "ssh": {"connect_attempts": True}}, "ssh.connect_attempts"),
        (
            {"provider": "aws", "aws": {**AWS_OK, "max_attempts": "3"}},
            "aws.max_attempts",
        ),
    ],
)
def test_cluster_file_values_keep_their_yaml_types(spec: dict[str, Any], where: str) -> None:
    """A YAML file has types: ``true`` is no PCIe generation or retry count, ``"yes"`` does not
    turn on trust-on-first-use, ``"0.5"`` is text (pydantic's lax mode read them as 1, True, 0.5)."""
    from hadar.clusters import cluster_from_dict

    data = {"name": "c", "provider": "simulated", "nodes": [{"name": "a", "gpus": {"v100": 1}}]}
    with pytest.raises(InputError, match=rf"^c\.yaml: {re.escape(where)}: Input should be a valid"):
        cluster_from_dict({**data, **spec}, "c.yaml")
    ok = {**data, "nodes": [{"name": "a", "gpus": {"v100": 1}, "speed_factor": 1, "pcie_gen": 4}]}
    assert cluster_from_dict(ok, "c.yaml").nodes[0].speed_factor == 1.0  # an int is a number
