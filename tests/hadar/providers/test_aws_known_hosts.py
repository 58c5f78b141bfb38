"""The AWS side records console host keys where the SSH side will look for them."""

from pathlib import Path

from hadar.clusters import cluster_from_dict
from hadar.providers.aws.provider import AwsCluster

BASE = {
    "name": "c",
    "provider": "aws",
    "nodes": [{"name": "p3", "gpus": {"v100": 1}, "instance_type": "p3.2xlarge"}],
}
AWS = {"region": "us-east-1", "ami": "ami-1", "key_name": "k"}


def test_known_hosts_falls_back_to_the_ssh_sections_file(tmp_path: Path):
    kh = tmp_path / "kh"
    c = cluster_from_dict({**BASE, "aws": AWS, "ssh": {"known_hosts": str(kh)}}, "c.yaml")
    assert AwsCluster(c).known_hosts_path() == kh
    own = tmp_path / "own"
    c2 = cluster_from_dict(
        {**BASE, "aws": {**AWS, "known_hosts": str(own)}, "ssh": {"known_hosts": str(kh)}}, "c.yaml"
    )
    assert AwsCluster(c2).known_hosts_path() == own
    c3 = cluster_from_dict({**BASE, "aws": AWS}, "c.yaml")
    assert AwsCluster(c3).known_hosts_path() == Path("~/.ssh/known_hosts").expanduser()
