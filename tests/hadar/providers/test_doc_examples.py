"""The example cluster files in docs/examples/ stay valid (they are what users copy)."""

from __future__ import annotations

from pathlib import Path

from hadar.clusters import load_cluster
from hadar.core.gpu_catalogue import forget_user_gpus
from hadar.providers.aws import AwsSettings
from hadar.providers.base import load_section
from hadar.providers.ssh import SshSettings

EXAMPLES = Path(__file__).resolve().parents[3] / "docs" / "examples"


def test_lab_bastion_example() -> None:
    try:
        cluster = load_cluster(EXAMPLES / "lab-bastion.yaml")
        assert cluster.node("turing-1").gpus == {"rtx-2080-ti": 4}
        assert cluster.node("ada").gpus == {"l4": 2}
    finally:
        forget_user_gpus()
    ssh = load_section(cluster, "ssh", SshSettings)
    assert ssh.proxy_jump and ssh.setup and ssh.nodes["volta"].proxy_jump == "none"


def test_aws_spot_example() -> None:
    cluster = load_cluster(EXAMPLES / "aws-spot.yaml")
    aws = load_section(cluster, "aws", AwsSettings)
    assert aws.spot and aws.spot_max_price == "0.60" and len(aws.setup or []) == 3


def test_no_doc_installs_the_unrelated_hadar_project() -> None:
    """``pip install hadar`` fetches an unrelated project from the package index: the docs and
    examples install the hadar-scheduler wheel or a clone (docs/install.md)."""
    import re

    docs = Path(__file__).resolve().parents[3] / "docs"
    pattern = re.compile(r"pip install (?:-\S+ )*(?:--upgrade )?hadar(?:\s|$|\[)")
    offenders = [
        f"{p.name}:{n}"
        for p in sorted([*docs.rglob("*.md"), *docs.rglob("*.yaml")])
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert offenders == []
