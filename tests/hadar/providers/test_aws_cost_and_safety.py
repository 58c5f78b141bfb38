"""What `hadar cluster up` shows and asks before it spends money, its EC2 dry run, the generated
IAM policy, `hadar run --down-after`'s teardown and `nodes check` with the aws file: against moto
in server mode (real boto3 calls)."""

from __future__ import annotations

import datetime as dt
import json
from fnmatch import fnmatchcase
from pathlib import Path

import pytest
import yaml

from hadar.cli import main
from hadar.clusters import load_cluster
from hadar.commands.cluster import teardown
from hadar.providers.aws import iam_policy
from hadar.providers.aws import prices as ec2_prices
from hadar.providers.aws.provider import AwsCluster
from tests.fixtures.moto_server import REGION, MotoServer


def write_config(path: Path, **aws) -> Path:
    data = {
        "name": path.stem,
        "provider": "aws",
        "nodes": [
            {"name": "t4", "count": 2, "gpus": {"t4": 1}, "instance_type": "g4dn.xlarge"},
            {"name": "v100", "gpus": {"v100": 1}, "instance_type": "p3.2xlarge"},
        ],
        "aws": {"region": REGION, "ami": "ami-0123456789abcdef0", "key_name": "hadar", **aws},
    }
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def live(ec2, name: str) -> list[dict]:
    f = [
        {"Name": "tag:hadar-cluster", "Values": [name]},
        {"Name": "instance-state-name", "Values": ["pending", "running"]},
    ]
    return [i for r in ec2.describe_instances(Filters=f)["Reservations"] for i in r["Instances"]]


def test_up_shows_the_hourly_cost_and_asks(aws_env: MotoServer, tmp_path: Path, capsys) -> None:
    cfg = write_config(tmp_path / "priced.yaml")
    # no terminal and no -y: nothing is launched, one line says to pass -y
    assert main(["cluster", "up", "--config", str(cfg), "--no-wait-ssh"]) == 2
    captured = capsys.readouterr()
    table = " ".join(captured.out.split())
    assert "g4dn.xlarge │ 2 │ 0.526 │ 1.05" in table and "p3.2xlarge │ 1 │ 3.060 │ 3.06" in table
    assert "total │ 3 │ │ 4.11" in table
    assert "stale" in captured.out  # the bundled table is older than STALE_AFTER_DAYS here
    assert "refusing without confirmation" in captured.err and "pass -y to launch" in captured.err
    assert live(aws_env.client(), "priced") == []
    # -y launches; a second up has nothing to price or ask
    out = tmp_path / "ssh.yaml"
    assert (
        main(["cluster", "up", "-y", "--config", str(cfg), "--no-wait-ssh", "--out", str(out)]) == 0
    )
    assert len(live(aws_env.client(), "priced")) == 3
    capsys.readouterr()
    assert main(["cluster", "up", "--config", str(cfg), "--no-wait-ssh", "--out", str(out)]) == 0
    again = capsys.readouterr().out
    assert "instances to launch" not in again and again.count("already has") >= 3


def test_dry_run_launches_nothing_and_reports_refusals(
    aws_env: MotoServer, tmp_path: Path, capsys
) -> None:
    cfg = write_config(tmp_path / "dry.yaml")
    assert main(["cluster", "up", "--config", str(cfg), "--dry-run"]) == 0
    assert "dry run: EC2 would launch all 3 instances" in capsys.readouterr().out
    assert live(aws_env.client(), "dry") == []


def test_estimate_notes_unknown_types_regions_spot_and_staleness() -> None:
    fresh = ec2_prices.AS_OF + dt.timedelta(days=1)
    e = ec2_prices.estimate(["p3.2xlarge", "x9.huge"], region=REGION, today=fresh)
    assert e.usd_per_hour == pytest.approx(3.06)
    assert e.notes == ("no price in the bundled table for x9.huge (not counted)",)
    old = ec2_prices.AS_OF + dt.timedelta(days=ec2_prices.STALE_AFTER_DAYS + 1)
    spot = ec2_prices.estimate(
        ["g4dn.xlarge"] * 2, region="eu-west-1", spot=True, spot_max_price="0.35", today=old
    )
    assert spot.usd_per_hour == pytest.approx(0.70)
    assert [n.split(":")[0].split(" ")[0] for n in spot.notes] == ["spot", "prices", "prices"]
    assert "eu-west-1 differs" in spot.notes[1] and "stale" in spot.notes[2]


def allows(document: dict, action: str, resource: str, context: dict[str, str]) -> bool:
    """Whether an IAM policy ``document`` (Allow statements; Resource, StringEquals and StringLike
    conditions, the forms the generated policy uses) allows ``action`` on ``resource`` given the
    request's condition keys ``context``: a missing key fails its condition, as in IAM."""
    for st in document["Statement"]:
        assert st["Effect"] == "Allow"
        resources = st["Resource"] if isinstance(st["Resource"], list) else [st["Resource"]]
        if action not in st["Action"] or not any(fnmatchcase(resource, r) for r in resources):
            continue
        conditions = st.get("Condition", {})
        assert set(conditions) <= {"StringEquals", "StringLike"}, conditions
        if all(
            key in context
            and (context[key] == want if op == "StringEquals" else fnmatchcase(context[key], want))
            for op, pairs in conditions.items()
            for key, want in pairs.items()
        ):
            return True
    return False


def instance_arn(instance_id: str) -> str:
    return f"arn:aws:ec2:{REGION}:123456789012:instance/{instance_id}"


def test_the_iam_policy_scopes_terminate_to_the_cluster_tag_and_tags_to_launches() -> None:
    document = json.loads(Path(iam_policy.DOC).read_text())
    tag = "aws:ResourceTag/hadar-cluster"
    changing = [
        st
        for st in document["Statement"]
        if {"ec2:TerminateInstances", "ec2:StopInstances"} & set(st["Action"])
    ]
    assert changing and all(
        st["Resource"] == "arn:aws:ec2:*:*:instance/*" and tag in st["Condition"]["StringLike"]
        for st in changing
    ), changing
    arn = instance_arn("i-0123456789abcdef0")
    for value, allowed in (("demo", True), ("", False)):
        assert allows(document, "ec2:TerminateInstances", arn, {tag: value}) is allowed
    assert not allows(document, "ec2:TerminateInstances", arn, {})  # untagged: someone else's
    assert not allows(document, "ec2:TerminateInstances", "*", {tag: "demo"})
    launch = {"ec2:CreateAction": "RunInstances"}
    assert allows(document, "ec2:CreateTags", arn, launch)
    assert not allows(document, "ec2:CreateTags", arn, {})  # retagging an instance later
    assert allows(document, "ec2:DescribeInstances", "*", {})
    # one cluster only: the tag must equal its name
    one = iam_policy.policy(cluster="demo")
    assert allows(one, "ec2:TerminateInstances", arn, {tag: "demo"})
    assert not allows(one, "ec2:TerminateInstances", arn, {tag: "demo2"})


def test_the_iam_policy_in_docs_is_generated_and_covers_every_call(
    aws_env: MotoServer, tmp_path: Path
) -> None:
    doc = Path(iam_policy.DOC)
    document = json.loads(doc.read_text())
    assert document == iam_policy.policy(), (
        "docs/aws-iam-policy.json is stale: python -m hadar.providers.aws.iam_policy --write"
    )
    calls: list[tuple[str, dict]] = []
    client = aws_env.client()
    client.meta.events.register(
        "before-parameter-build.ec2.*",
        lambda model, params, **_: calls.append((model.name, dict(params))),
    )
    cfg = write_config(tmp_path / "iam.yaml", poll_interval_s=0.2)
    aws = AwsCluster(load_cluster(cfg), client=client)
    missing, _ = aws.to_launch()
    aws.dry_run(missing)
    instances = aws.up(wait_ssh=False)
    aws.record_console_host_keys(instances[0])
    aws.down()
    called = {f"ec2:{name}" for name, _ in calls}
    assert {"ec2:RunInstances", "ec2:DescribeInstances", "ec2:TerminateInstances"} <= called
    tags = {
        i["InstanceId"]: {t["Key"]: t["Value"] for t in i.get("Tags", [])}
        for r in aws_env.client().describe_instances()["Reservations"]
        for i in r["Instances"]
    }
    for name, params in calls:
        action = f"ec2:{name}"
        if name == "TerminateInstances":  # each instance, by the tags it carries
            for iid in params["InstanceIds"]:
                context = {f"aws:ResourceTag/{k}": v for k, v in tags[iid].items()}
                assert allows(document, action, instance_arn(iid), context), (iid, tags[iid])
        else:
            assert allows(document, action, "*", {}), action
            if name == "RunInstances" and params.get("TagSpecifications"):
                assert allows(document, "ec2:CreateTags", "*", {"ec2:CreateAction": name})


def test_down_after_terminates_the_cluster(aws_env: MotoServer, tmp_path: Path) -> None:
    cfg = write_config(tmp_path / "after.yaml", poll_interval_s=0.2)
    AwsCluster(load_cluster(cfg)).up(wait_ssh=False)
    assert len(live(aws_env.client(), "after")) == 3
    lines: list[str] = []
    waited: list[float] = []
    ids = teardown(str(cfg), 2, lines.append, sleep=waited.append)
    assert waited == [120.0] and len(ids) == 3
    assert live(aws_env.client(), "after") == []
    assert lines[0].startswith("--down-after: terminating the instances of after in 2 min")
    assert lines[-1] == "--down-after: terminated 3 instances of cluster after"


def test_down_after_needs_an_aws_cluster(tmp_path: Path, capsys) -> None:
    pytest.importorskip("torch")
    out = tmp_path / "run"
    assert main(["run", "--cluster", "local-3node", "--down-after", "--out", str(out)]) == 2
    assert not out.exists()
    err = capsys.readouterr().err
    assert "--down-after: local-3node is a provider: local cluster" in err


def test_nodes_check_takes_the_aws_file(aws_env: MotoServer, tmp_path: Path, capsys) -> None:
    """The aws file works for `nodes check` as for `hadar run` (the SSH file does too): the
    instances are found by their tags; moto's do not answer SSH, so they are unreachable (3)."""
    cfg = write_config(tmp_path / "chk.yaml", poll_interval_s=0.2)
    assert main(["nodes", "check", "--cluster", str(cfg), "--json", "--timeout", "2"]) == 3
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["node"] for r in rows] == ["t4-0", "t4-1", "v100"]
    assert all("no running EC2 instance tagged hadar-cluster=chk" in r["error"] for r in rows)
