"""The AWS provider and `hadar cluster up|down|status` against moto in server mode (real boto3 HTTP
calls to a moto process on a loopback port)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import boto3
import pytest
import yaml
from botocore.stub import Stubber

from hadar.cli import main
from hadar.clusters import cluster_from_dict, load_cluster
from hadar.core.errors import InputError
from hadar.providers.aws.provider import AwsCluster, AwsError, AwsProvider, host_keys_from_console
from hadar.providers.base import make_provider
from hadar.providers.ssh import SshNode
from hadar.providers.transport import node_transport
from tests.fixtures.cli import hadar_cli
from tests.fixtures.moto_server import REGION, MotoServer

ROOT = Path(__file__).resolve().parents[3]


def describe(ec2, **filters) -> list[dict]:
    f = [{"Name": k, "Values": v} for k, v in filters.items()]
    return [i for r in ec2.describe_instances(Filters=f)["Reservations"] for i in r["Instances"]]


def tags(inst: dict) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in inst.get("Tags", [])}


def live(ec2, cluster: str) -> list[dict]:
    return describe(
        ec2, **{"tag:hadar-cluster": [cluster], "instance-state-name": ["pending", "running"]}
    )


def write_config(path: Path, nodes: list[dict], **aws) -> Path:
    data = {
        "name": path.stem,
        "provider": "aws",
        "nodes": nodes,
        "aws": {"region": REGION, "ami": "ami-0123456789abcdef0", "key_name": "hadar", **aws},
    }
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_up_status_down_with_the_bundled_config(
    aws_env: MotoServer, tmp_path: Path, capsys
) -> None:
    ec2 = aws_env.client()
    # someone else's instances in the same account: one tagged for another cluster, one untagged
    foreign = ec2.run_instances(
        ImageId="ami-0123456789abcdef0",
        InstanceType="t3.micro",
        MinCount=1,
        MaxCount=1,
        TagSpecifications=[
            {"ResourceType": "instance", "Tags": [{"Key": "hadar-cluster", "Value": "other"}]}
        ],
    )["Instances"][0]["InstanceId"]
    untagged = ec2.run_instances(
        ImageId="ami-0123456789abcdef0", InstanceType="t3.micro", MinCount=1, MaxCount=1
    )["Instances"][0]["InstanceId"]

    out = tmp_path / "aws-5node-ssh.yaml"
    assert (
        main(["cluster", "up", "-y", "--config", "aws-5node", "--out", str(out), "--no-wait-ssh"])
        == 0
    )
    printed = capsys.readouterr().out
    assert "wrote SSH cluster file" in printed and "p2-1: launched i-" in printed

    ours = live(ec2, "aws-5node")
    assert sorted(i["InstanceType"] for i in ours) == [
        "g4dn.xlarge",
        "g4dn.xlarge",
        "p2.xlarge",
        "p2.xlarge",
        "p3.2xlarge",
    ]
    by_node = {tags(i)["hadar-node"]: i for i in ours}
    assert set(by_node) == {"p3", "p2-0", "p2-1", "g4dn-0", "g4dn-1"}
    for name, inst in by_node.items():
        t = tags(inst)
        assert t["hadar-cluster"] == "aws-5node" and t["project"] == "hadar"
        assert t["Name"] == f"hadar-aws-5node-{name}"
        assert inst["ImageId"] == "ami-0123456789abcdef0" and inst["KeyName"] == "hadar"
    assert by_node["p3"]["InstanceType"] == "p3.2xlarge"

    # the SSH cluster file: same nodes and GPUs, public addresses, private rendezvous
    ssh_cluster = load_cluster(out)
    aws_cluster = load_cluster("aws-5node")
    assert ssh_cluster.provider == "ssh" and ssh_cluster.name == "aws-5node"
    assert [(n.name, dict(n.gpus)) for n in ssh_cluster.nodes] == [
        (n.name, dict(n.gpus)) for n in aws_cluster.nodes
    ]
    for n in ssh_cluster.nodes:
        inst = by_node[n.name]
        t = node_transport(ssh_cluster, n, SshNode)
        assert t.address == inst["PublicIpAddress"] and t.port == 22 and t.user == "ubuntu"
        assert t.identity_file == "~/.ssh/hadar.pem" and t.instance_type == inst["InstanceType"]
        assert (
            ssh_cluster.settings["ssh"]["nodes"][n.name]["rendezvous_address"]
            == inst["PrivateIpAddress"]
        )
    with make_provider(ssh_cluster, "r") as p:  # a valid ssh cluster for the SSH provider
        assert p.rendezvous_address("p3") == by_node["p3"]["PrivateIpAddress"]
    for i in ours:
        assert f"{tags(i)['hadar-node']}: {i['InstanceId']}" in out.read_text()  # header comment

    # up again: every node already has an instance, nothing new is launched
    assert (
        main(["cluster", "up", "-y", "--config", "aws-5node", "--out", str(out), "--no-wait-ssh"])
        == 0
    )
    assert "already has" in capsys.readouterr().out
    assert len(live(ec2, "aws-5node")) == 5

    assert main(["cluster", "status", "--config", "aws-5node"]) == 0
    status = capsys.readouterr().out
    assert all(i["InstanceId"] in status for i in ours), status

    assert main(["cluster", "down", "--config", "aws-5node", "-y"]) == 0
    assert "terminated 5 instances of cluster aws-5node" in capsys.readouterr().out
    states = {i["InstanceId"]: i["State"]["Name"] for i in describe(ec2)}
    assert all(states[i["InstanceId"]] in ("shutting-down", "terminated") for i in ours)
    assert states[foreign] == "running" and states[untagged] == "running"

    # idempotent: a second down has nothing to do and succeeds
    assert main(["cluster", "down", "--config", "aws-5node", "-y"]) == 0
    assert "nothing to do" in capsys.readouterr().out
    assert (
        states[foreign]
        == describe(ec2, **{"instance-id": [foreign]})[0]["State"]["Name"]
        == "running"
    )


def test_reclaimed_instance_drops_out_of_the_provider(aws_env: MotoServer, tmp_path: Path) -> None:
    cfg = write_config(
        tmp_path / "churn.yaml",
        [
            {"name": "a", "gpus": {"t4": 1}, "instance_type": "g4dn.xlarge"},
            {"name": "b", "gpus": {"t4": 1}, "instance_type": "g4dn.xlarge", "speed_factor": 0.5},
        ],
    )
    cluster = load_cluster(cfg)
    aws = AwsCluster(cluster)
    instances = aws.up(wait_ssh=False)
    assert [i.node for i in instances] == ["a", "b"]
    provider = make_provider(cluster, "r")
    assert isinstance(provider, AwsProvider)
    assert [n.name for n in provider.nodes()] == ["a", "b"]
    assert provider.speed_factor("b") == 0.5
    assert provider.rendezvous_address("b") == instances[1].private_ip

    aws_env.client().terminate_instances(InstanceIds=[instances[0].instance_id])  # reclaimed
    assert set(aws.running_nodes()) == {"b"}
    assert [n.name for n in provider.nodes()] == ["b"]
    h = provider.check("a")
    assert not h.reachable and "no running EC2 instance" in (h.error or "")
    from hadar.core.errors import UnreachableNodeError

    with pytest.raises(UnreachableNodeError, match="node a: no running EC2 instance"):
        provider.run("a", ["true"], 10)
    # `up` replaces exactly the reclaimed node
    again = aws.up(wait_ssh=False)
    assert again[1].instance_id == instances[1].instance_id
    assert again[0].instance_id != instances[0].instance_id
    assert [n.name for n in provider.nodes()] == ["a", "b"]
    assert provider.rendezvous_address("a") == again[0].private_ip != instances[0].private_ip
    # an instance that dies while `up` waits for it is an error naming the node
    aws_env.client().terminate_instances(InstanceIds=[again[0].instance_id])
    with pytest.raises(
        AwsError, match=rf"node a: instance {again[0].instance_id} is (terminated|shutting-down)"
    ):
        aws.wait_running({"a": again[0].instance_id, "b": again[1].instance_id})
    provider.close()
    assert len(aws.down()) == 1 and aws.down() == []


def test_missing_and_unknown_aws_fields_are_one_line_errors(
    aws_env: MotoServer, tmp_path: Path
) -> None:
    node = [{"name": "a", "gpus": {"t4": 1}, "instance_type": "g4dn.xlarge"}]
    cfg = tmp_path / "noami.yaml"
    cfg.write_text(
        yaml.safe_dump({"name": "x", "provider": "aws", "nodes": node, "aws": {"region": REGION}})
    )
    up = ("cluster", "up", "-y", "--config", str(cfg), "--no-wait-ssh")
    res = hadar_cli(*up, cwd=tmp_path, env=aws_env.env())
    assert res.returncode == 2
    assert res.stderr.strip() == f"hadar: error: {cfg}: aws.ami: missing required field"

    with pytest.raises(InputError, match=r"aws.amii: unknown field"):
        AwsCluster(load_cluster(write_config(tmp_path / "typo.yaml", node, amii="x")))
    with pytest.raises(InputError, match=r"aws.tags: .*hadar-cluster.* reserved"):
        AwsCluster(
            load_cluster(write_config(tmp_path / "tag.yaml", node, tags={"hadar-cluster": "x"}))
        )
    no_type = write_config(tmp_path / "notype.yaml", [{"name": "a", "gpus": {"t4": 1}}])
    with pytest.raises(InputError, match=r"nodes\[a\].instance_type: missing required field"):
        AwsCluster(load_cluster(no_type)).up(wait_ssh=False)
    prof = write_config(tmp_path / "prof.yaml", node, profile="no-such-profile")
    with pytest.raises(InputError, match=r"aws.profile: AWS profile 'no-such-profile' not found"):
        AwsCluster(load_cluster(prof)).instances()
    assert live(aws_env.client(), "notype") == [] and live(aws_env.client(), "x") == []


def test_endpoint_from_the_config_file(aws_env: MotoServer, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("HADAR_AWS_ENDPOINT_URL")
    cfg = write_config(
        tmp_path / "ep.yaml",
        [{"name": "a", "gpus": {"t4": 1}, "instance_type": "g4dn.xlarge"}],
        endpoint_url=aws_env.endpoint_url,
    )
    aws = AwsCluster(load_cluster(cfg))
    assert aws.endpoint_url == aws_env.endpoint_url
    assert [i.node for i in aws.up(wait_ssh=False)] == ["a"]
    assert len(live(aws_env.client(), "ep")) == 1
    aws.down()


def test_unsupported_instance_type_reported_per_type(tmp_path: Path, monkeypatch) -> None:
    """A moto server that validates instance types rejects a type EC2 does not offer; the
    other types still launch and the failure is one line for that type."""
    with MotoServer.start(
        tmp_path / "moto", env={"MOTO_EC2_ENABLE_INSTANCE_TYPE_VALIDATION": "true"}
    ) as srv:
        for k, v in srv.env().items():
            monkeypatch.setenv(k, v)
        cfg = write_config(
            tmp_path / "cap.yaml",
            [
                {"name": "huge", "count": 2, "gpus": {"v100": 8}, "instance_type": "p9.96xlarge"},
                {"name": "t4", "gpus": {"t4": 1}, "instance_type": "g4dn.xlarge"},
            ],
        )
        aws = AwsCluster(load_cluster(cfg))
        with pytest.raises(AwsError) as err:
            aws.up(wait_ssh=False)
        lines = str(err.value).splitlines()
        assert lines[0].startswith("2 of 3 instances could not be launched")
        assert lines[1:] == [
            "  p9.96xlarge (nodes huge-0, huge-1): not offered here: InvalidInstanceType.NotFound: "
            "The instance type 'p9.96xlarge' does not exist"
        ]
        assert [tags(i)["hadar-node"] for i in live(srv.client(), "cap")] == ["t4"]
        assert len(aws.down()) == 1


def test_auth_failure_is_a_one_line_permission_error(
    aws_env: MotoServer, tmp_path: Path, capsys
) -> None:
    cfg = write_config(
        tmp_path / "auth.yaml", [{"name": "a", "gpus": {"t4": 1}, "instance_type": "g4dn.xlarge"}]
    )
    aws_env.set_auth(0)  # from now on moto checks credentials like EC2 does
    try:
        assert main(["cluster", "up", "-y", "--config", str(cfg), "--no-wait-ssh"]) == 1
    finally:
        aws_env.set_auth(float("inf"))
    err = capsys.readouterr().err.strip()
    assert err.startswith("hadar: error: EC2 describe_instances: permission denied: AuthFailure: ")
    assert "\n" not in err


def test_capacity_and_permission_errors_mapping_per_type(tmp_path: Path) -> None:
    """moto cannot run out of capacity, so EC2's real error responses for RunInstances are fed
    through botocore's own Stubber (the only stubbed test; everything else talks to moto)."""
    cluster = load_cluster("aws-5node")
    client = boto3.client(
        "ec2", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x"
    )
    stub = Stubber(client)
    stub.add_response("describe_instances", {"Reservations": []})
    stub.add_client_error(
        "run_instances",
        "InsufficientInstanceCapacity",
        "We currently do not have sufficient p3.2xlarge capacity in the Availability Zone you requested (us-east-1a).",
    )
    for _ in range(2):
        stub.add_client_error(
            "run_instances",
            "InstanceLimitExceeded",
            "You have requested more instances (2) than your current instance limit of 0 allows for the specified instance type.",
        )
    for _ in range(2):
        stub.add_client_error(
            "run_instances",
            "UnauthorizedOperation",
            "You are not authorized to perform this operation.",
            http_status_code=403,
        )
    with stub, pytest.raises(AwsError) as err:
        AwsCluster(cluster, client=client).up(wait_ssh=False)
    assert str(err.value).splitlines()[1:] == [
        "  p3.2xlarge (node p3): no capacity: InsufficientInstanceCapacity: We currently do not have "
        "sufficient p3.2xlarge capacity in the Availability Zone you requested (us-east-1a).",
        "  p2.xlarge (nodes p2-0, p2-1): instance quota exceeded: InstanceLimitExceeded: You have "
        "requested more instances (2) than your current instance limit of 0 allows for the "
        "specified instance type.",
        "  g4dn.xlarge (nodes g4dn-0, g4dn-1): permission denied: UnauthorizedOperation: You are "
        "not authorized to perform this operation.",
    ]


def test_wait_ssh_times_out_naming_the_nodes(aws_env: MotoServer, tmp_path: Path, capsys) -> None:
    cfg = write_config(
        tmp_path / "wait.yaml",
        [{"name": "a", "gpus": {"t4": 1}, "instance_type": "g4dn.xlarge"}],
        address="private",
        poll_interval_s=0.2,
    )
    code = main(
        [
            "cluster",
            "up",
            "-y",
            "--config",
            str(cfg),
            "--ssh-wait-timeout",
            "1",
            "--out",
            str(tmp_path / "o.yaml"),
        ]
    )
    assert code == 3
    err = capsys.readouterr().err.strip()
    assert err.startswith("hadar: error: not reachable over SSH after 1s: a (10.") and err.endswith(
        ":22)"
    )
    assert not (tmp_path / "o.yaml").exists()
    AwsCluster(load_cluster(cfg)).down()


def test_host_keys_from_console_output() -> None:
    console = (
        "[   12.3] cloud-init[901]: Generating public/private ed25519 key pair.\n"
        "-----BEGIN SSH HOST KEY KEYS-----\n"
        "ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTY= root@ip-10-0-0-5\n"
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIG9wZW4= root@ip-10-0-0-5\n"
        "-----END SSH HOST KEY KEYS-----\n"
        "ssh-rsa AAAAB3NzaC1yc2E= outside-the-block\n"
    )
    assert host_keys_from_console(console) == [
        ("ecdsa-sha2-nistp256", "AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTY="),
        ("ssh-ed25519", "AAAAC3NzaC1lZDI1NTE5AAAAIG9wZW4="),
    ]


def test_ssh_cluster_dict_skips_nodes_without_instances() -> None:
    from hadar.providers.aws.provider import Instance

    cluster = load_cluster("aws-5node")
    aws = AwsCluster(cluster)
    now = dt.datetime.now(dt.timezone.utc)
    data = aws.ssh_cluster_dict(
        [Instance("i-1", "p3", "p3.2xlarge", "running", "1.2.3.4", "10.0.0.1", now)]
    )
    assert [n["name"] for n in data["nodes"]] == ["p3"]
    assert cluster_from_dict(data).node("p3").transport["address"] == "1.2.3.4"


def test_the_network_section_carries_over_to_the_ssh_cluster_over_the_launched_nodes() -> None:
    from hadar.providers.aws.provider import Instance

    cluster = cluster_from_dict(
        {
            "name": "racked",
            "provider": "aws",
            "nodes": [
                {"name": n, "gpus": {"t4": 1}, "instance_type": "g4dn.xlarge"}
                for n in ("a", "b", "c")
            ],
            "aws": {"region": REGION, "ami": "ami-12345678"},
            "network": {
                "nic_gbps": 25,
                "racks": [
                    {"name": "r1", "nodes": ["a", "b"], "uplink_gbps": 10},
                    {"name": "r2", "nodes": ["c"], "uplink_gbps": 10},
                ],
            },
        }
    )
    now = dt.datetime.now(dt.timezone.utc)
    launched = [
        Instance(f"i-{n}", n, "g4dn.xlarge", "running", f"1.2.3.{i}", f"10.0.0.{i}", now)
        for i, n in enumerate(("a", "c"))  # b never came up
    ]
    data = AwsCluster(cluster).ssh_cluster_dict(launched)
    assert [r["nodes"] for r in data["network"]["racks"]] == [["a"], ["c"]]
    ssh = cluster_from_dict(data)  # the written file loads, with the same topology
    assert ssh.network is not None
    assert ssh.network.racks_spanned(["a", "c"]) == 2
    assert ssh.network.bottleneck_gbps(["a", "c"]) == cluster.network.bottleneck_gbps(["a", "c"])
    # the only rack left with a node keeps it; a rack left empty is dropped
    one = AwsCluster(cluster).ssh_cluster_dict(launched[:1])
    assert [r["name"] for r in one["network"]["racks"]] == ["r1"]
    assert cluster_from_dict(one).network is not None


def test_ssh_section_of_an_aws_cluster_carries_over(
    aws_env: MotoServer, tmp_path: Path, capsys
) -> None:
    cfg = tmp_path / "withssh.yaml"
    cfg.write_text(
        yaml.safe_dump(
            {
                "name": "withssh",
                "provider": "aws",
                "nodes": [
                    {"name": "a", "gpus": {"t4": 1}, "instance_type": "g4dn.xlarge"},
                    {"name": "b", "gpus": {"t4": 1}, "instance_type": "g4dn.xlarge"},
                ],
                "aws": {"region": REGION, "ami": "ami-12345678", "python": "/opt/venv/bin/python"},
                "ssh": {
                    "connect_attempts": 1,
                    "python": "python3.11",
                    "nodes": {"b": {"remote_base": "/scratch"}},
                },
            }
        )
    )
    # no instances yet: every node is reported unreachable, exit 3
    assert main(["nodes", "check", "--cluster", str(cfg), "--json"]) == 3
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["reachable"] for r in rows] == [False, False]
    assert (
        rows[0]["error"]
        == "node a: no running EC2 instance tagged hadar-cluster=withssh, hadar-node=a"
    )

    out = tmp_path / "withssh-ssh.yaml"
    assert (
        main(["cluster", "up", "-y", "--config", str(cfg), "--no-wait-ssh", "--out", str(out)]) == 0
    )
    ssh = load_cluster(out).settings["ssh"]
    assert ssh["connect_attempts"] == 1
    assert ssh["python"] == "/opt/venv/bin/python"  # set in the aws section: wins
    assert ssh["nodes"]["b"]["remote_base"] == "/scratch"
    assert set(ssh["nodes"]["b"]) == {"remote_base", "rendezvous_address"}
    assert main(["cluster", "down", "--config", str(cfg), "-y"]) == 0
