"""AWS mechanics done by boto3 (paginator, waiters, adaptive retries), spot instances, the
after-boot setup step and `hadar cluster down`'s confirmation, against moto in server mode
(and real sshd servers for the setup step)."""

from __future__ import annotations

import datetime as dt
import http.server
import os
import pty
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path

import boto3
import pytest
import yaml
from botocore.stub import Stubber

import hadar.providers.aws.ec2
from hadar.clusters import load_cluster
from hadar.providers.aws.provider import AwsCluster, AwsError, Instance
from tests.fixtures.moto_server import REGION, MotoServer
from tests.fixtures.sshd import SshdFarm

ROOT = Path(__file__).resolve().parents[3]


def write_config(path: Path, n: int = 1, ssh: dict | None = None, **aws) -> Path:
    data = {
        "name": path.stem,
        "provider": "aws",
        "nodes": [{"name": "g", "count": n, "gpus": {"t4": 1}, "instance_type": "g4dn.xlarge"}]
        if n > 1
        else [{"name": "g", "gpus": {"t4": 1}, "instance_type": "g4dn.xlarge"}],
        "aws": {"region": REGION, "ami": "ami-0123456789abcdef0", "poll_interval_s": 0.2, **aws},
    }
    if ssh:
        data["ssh"] = ssh
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def states(ec2, cluster: str) -> list[str]:
    f = [{"Name": "tag:hadar-cluster", "Values": [cluster]}]
    res = ec2.describe_instances(Filters=f)["Reservations"]
    return sorted(i["State"]["Name"] for r in res for i in r["Instances"])


def test_instances_are_listed_page_by_page(
    aws_env: MotoServer, tmp_path: Path, monkeypatch
) -> None:
    aws = AwsCluster(load_cluster(write_config(tmp_path / "paged.yaml", n=12)))
    aws.up(wait_ssh=False)
    monkeypatch.setattr(hadar.providers.aws.ec2, "PAGE_SIZE", 5)
    calls: list[dict] = []
    aws.ec2.meta.events.register(
        "provide-client-params.ec2.DescribeInstances", lambda params, **_: calls.append(params)
    )
    listed = aws.instances()
    assert [i.node for i in listed] == [f"g-{i}" for i in range(12)]
    assert len(calls) == 3 and all(c["MaxResults"] == 5 for c in calls)
    assert "NextToken" not in calls[0] and all("NextToken" in c for c in calls[1:])
    assert len(aws.down()) == 12


class ThrottlingProxy:
    """An HTTP proxy in front of moto that answers the first ``throttle`` requests with EC2's
    real throttling error (HTTP 503 RequestLimitExceeded), then forwards everything."""

    def __init__(self, upstream: str, throttle: int) -> None:
        proxy = self
        self.upstream, self.throttle, self.requests = upstream, throttle, 0

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                proxy.requests += 1
                if proxy.requests <= proxy.throttle:
                    status, data = 503, THROTTLED
                else:
                    req = urllib.request.Request(
                        proxy.upstream + self.path,
                        data=body,
                        headers=dict(self.headers),
                        method="POST",
                    )
                    with urllib.request.urlopen(req, timeout=30) as resp:
                        status, data = resp.status, resp.read()
                self.send_response(status)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"


THROTTLED = (
    b"<?xml version='1.0' encoding='UTF-8'?><Response><Errors><Error>"
    b"<Code>RequestLimitExceeded</Code><Message>Request limit exceeded.</Message></Error>"
    b"</Errors><RequestID>throttled</RequestID></Response>"
)


def test_throttled_calls_are_retried_adaptively(
    aws_env: MotoServer, tmp_path: Path, monkeypatch
) -> None:
    cfg = write_config(tmp_path / "r.yaml", max_attempts=3)
    proxy = ThrottlingProxy(aws_env.endpoint_url, throttle=2)
    monkeypatch.setenv("HADAR_AWS_ENDPOINT_URL", proxy.url)
    aws = AwsCluster(load_cluster(cfg))
    assert aws.ec2.meta.config.retries == {"mode": "adaptive", "total_max_attempts": 3}
    assert aws.instances() == []  # two throttled answers, then moto's
    assert proxy.requests == 3
    proxy.requests, proxy.throttle = 0, 10
    with pytest.raises(AwsError) as err:
        AwsCluster(load_cluster(cfg)).instances()
    assert proxy.requests == 3
    assert str(err.value) == (
        "EC2 describe_instances: throttled (still, after aws.max_attempts tries): "
        "RequestLimitExceeded: Request limit exceeded."
    )
    proxy.server.shutdown()


def test_spot_instances_are_requested_as_spot(aws_env: MotoServer, tmp_path: Path, capsys) -> None:
    from hadar.cli import main

    cfg = write_config(tmp_path / "spot.yaml", n=2, spot=True, spot_max_price=0.35)
    assert (
        main(
            [
                "cluster",
                "up",
                "-y",
                "--config",
                str(cfg),
                "--no-wait-ssh",
                "--out",
                str(tmp_path / "o.yaml"),
            ]
        )
        == 0
    )
    assert "g-1: launched i-" in capsys.readouterr().out
    aws = AwsCluster(load_cluster(cfg))
    assert [i.lifecycle for i in aws.instances()] == ["spot", "spot"]
    assert aws._launch_args(aws.cluster.nodes[0])["InstanceMarketOptions"] == {
        "MarketType": "spot",
        "SpotOptions": {
            "SpotInstanceType": "one-time",
            "InstanceInterruptionBehavior": "terminate",
            "MaxPrice": "0.35",
        },
    }
    assert len(aws.down()) == 2


def test_no_spot_capacity_is_one_clear_line(tmp_path: Path) -> None:
    """moto never runs out of capacity: EC2's real error response is fed through botocore's
    Stubber, as in test_provider_aws.py."""
    cluster = load_cluster(write_config(tmp_path / "nocap.yaml", n=2, spot=True))
    client = boto3.client(
        "ec2", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x"
    )
    stub = Stubber(client)
    stub.add_response("describe_instances", {"Reservations": []})
    for _ in range(2):
        stub.add_client_error(
            "run_instances",
            "InsufficientInstanceCapacity",
            "There is no Spot capacity available that matches your request.",
        )
    with stub, pytest.raises(AwsError) as err:
        AwsCluster(cluster, client=client).up(wait_ssh=False)
    assert str(err.value).splitlines()[1:] == [
        "  g4dn.xlarge (nodes g-0, g-1): no capacity for spot instances: "
        "InsufficientInstanceCapacity: There is no Spot capacity available that matches your "
        "request. (retry later, pick another instance type or subnet, or set aws.spot: false)"
    ]


def test_bad_spot_price_is_one_line(aws_env: MotoServer, tmp_path: Path) -> None:
    from hadar.core.errors import InputError

    with pytest.raises(InputError, match=r"spot-bad.yaml: aws.spot_max_price: "):
        AwsCluster(load_cluster(write_config(tmp_path / "spot-bad.yaml", spot_max_price="cheap")))


def _down(
    cfg: Path, env: dict, *extra: str, stdin=subprocess.DEVNULL
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "hadar", "cluster", "down", "--config", str(cfg), *extra],
        stdin=stdin,
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
    )


def test_cluster_down_asks_first(aws_env: MotoServer, tmp_path: Path) -> None:
    cfg = write_config(tmp_path / "ask.yaml", n=2)
    AwsCluster(load_cluster(cfg)).up(wait_ssh=False)
    env = {**os.environ, **aws_env.env(), "COLUMNS": "200"}
    ec2 = aws_env.client()

    res = _down(cfg, env)  # no terminal, no -y: refuse, touch nothing
    assert res.returncode == 2
    assert res.stderr.strip() == (
        "hadar: error: terminate 2 instances of cluster ask: refusing without confirmation "
        "(stdin is not a terminal); pass -y to terminate"
    )
    assert states(ec2, "ask") == ["running", "running"]

    for answer, code, left in (
        (b"n\n", 1, ["running", "running"]),
        (b"y\n", 0, ["terminated"] * 2),
    ):
        master, slave = pty.openpty()
        os.write(master, answer)
        res = _down(cfg, env, stdin=slave)
        os.close(slave)
        os.close(master)
        assert res.returncode == code, res.stderr
        assert "terminate 2 instances of cluster ask? [y/N]" in res.stdout
        assert states(ec2, "ask") == left
    assert "terminated 2 instances of cluster ask" in res.stdout

    res = _down(cfg, env)  # nothing left: no question, nothing to do
    assert res.returncode == 0 and "nothing to do" in res.stdout


def test_cluster_down_with_yes_waits_until_terminated(aws_env: MotoServer, tmp_path: Path) -> None:
    cfg = write_config(tmp_path / "yes.yaml", n=3)
    AwsCluster(load_cluster(cfg)).up(wait_ssh=False)
    res = _down(cfg, {**os.environ, **aws_env.env()}, "-y")
    assert res.returncode == 0, res.stderr
    assert states(aws_env.client(), "yes") == ["terminated"] * 3  # the waiter saw them gone


def test_setup_runs_once_per_instance_over_ssh(tmp_path: Path) -> None:
    """aws.setup goes over real SSH: the instances are played by an sshd on loopback."""
    counter = tmp_path / "count"
    with SshdFarm.start(tmp_path / "farm", n=1) as farm:
        server = farm.servers[0]

        def config(name: str, setup: list[str]) -> Path:
            # the ssh section's per-run setup must not run in the after-boot step
            ssh = {
                "allow_agent": False,
                "look_for_keys": False,
                "connect_attempts": 1,
                "setup": ["exit 9"],
            }
            return write_config(
                tmp_path / name,
                ssh=ssh,
                ssh_user=farm.user,
                identity_file=str(farm.client_key),
                known_hosts=str(farm.known_hosts),
                ssh_port=server.port,
                python=farm.python,
                setup=setup,
            )

        aws = AwsCluster(load_cluster(config("boot.yaml", [f"echo booted >> {counter}"])))
        now = dt.datetime.now(dt.timezone.utc)
        inst = Instance("i-0abc", "g", "g4dn.xlarge", "running", "127.0.0.1", "127.0.0.1", now)
        lines: list[str] = []
        aws.run_setup([inst], log=lines.append)
        aws.run_setup([inst], log=lines.append)
        assert counter.read_text() == "booted\n"  # the second call found the marker
        assert lines[0].startswith("g: setup done") and lines[1].startswith("g: already set up")

        failing = config("boot2.yaml", ["echo 'E: Unable to locate package cuda' >&2", "false"])
        with pytest.raises(AwsError) as err:
            AwsCluster(load_cluster(failing)).run_setup([inst])
        assert str(err.value).splitlines()[1:] == [
            "  g (i-0abc): setup failed (exit 1): E: Unable to locate package cuda"
        ]
