"""Transport keys (SSH address/port/user/identity_file, AWS instance_type) live with the providers.

The cluster file stays flat; the core keeps them uninterpreted in ``Node.transport`` and each
provider's schema (``hadar/providers/transport.py``) decides which keys it takes, so a misspelt key is
exit 2 at load time whatever the provider.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

from hadar.clusters import load_cluster
from hadar.core import cluster_config
from hadar.core.cluster import Node
from hadar.core.errors import InputError
from hadar.providers.aws import AwsNode
from hadar.providers.ssh import SshNode
from hadar.providers.transport import node_transport, transport_keys
from tests.fixtures.processes import run_group

SSH_KEYS = {"address": "h1", "port": 2222, "user": "u", "identity_file": "~/.ssh/k"}


def write(tmp_path: Path, provider: str, **node_keys: object) -> Path:
    f = tmp_path / f"{provider}.yaml"
    node = {"name": "a", "gpus": {"v100": 1}, **node_keys}
    data = {"name": "c", "provider": provider, "nodes": [node]}
    if provider == "aws":  # its section's one required key (checked at load time too)
        data["aws"] = {"ami": "ami-0123456789abcdef0"}
    f.write_text(yaml.safe_dump(data))
    return f


def test_the_core_node_has_no_transport_fields_only_an_opaque_mapping(tmp_path):
    f = write(tmp_path, "ssh", **SSH_KEYS, instance_type="p3.2xlarge")
    node = load_cluster(f).node("a")
    assert not any(hasattr(node, k) for k in [*SSH_KEYS, "instance_type", "extra"])
    assert dict(node.transport) == {**SSH_KEYS, "instance_type": "p3.2xlarge"}
    t = node_transport(load_cluster(f), node, SshNode)
    assert (t.address, t.port, t.user, t.identity_file) == ("h1", 2222, "u", "~/.ssh/k")
    aws = load_cluster(write(tmp_path, "aws", instance_type="g4dn.xlarge"))
    assert node_transport(aws, aws.node("a"), AwsNode).instance_type == "g4dn.xlarge"


def test_the_node_keeps_its_own_copy_of_the_transport_keys():
    keys = {"address": "h1"}
    node = Node("a", {"v100": 1}, transport=keys)
    keys["address"] = "h2"
    assert node.transport == {"address": "h1"}


@pytest.mark.parametrize("provider", ["simulated", "local", "ssh", "aws"])
@pytest.mark.parametrize("typo", ["adress", "speedfactor", "instance_typ"])
def test_a_misspelt_node_key_is_an_error_for_every_provider(tmp_path, provider, typo):
    f = write(tmp_path, provider, **{typo: "x"})
    with pytest.raises(InputError, match=rf"^{f}: nodes\[0\]\.{typo}: unknown field$"):
        load_cluster(f)


@pytest.mark.parametrize(
    ("provider", "key", "value"),
    [("local", "address", "h1"), ("local", "instance_type", "p3.2xlarge"), ("aws", "user", "u")],
)
def test_another_providers_key_is_refused(tmp_path, provider, key, value):
    f = write(tmp_path, provider, **{key: value})
    with pytest.raises(InputError, match=rf"^{f}: nodes\[0\]\.{key}: unknown field$"):
        load_cluster(f)


def test_a_simulated_cluster_may_carry_the_keys_of_any_provider(tmp_path):
    f = write(tmp_path, "simulated", **SSH_KEYS, instance_type="p3.2xlarge")
    assert load_cluster(f).node("a").transport["instance_type"] == "p3.2xlarge"
    assert transport_keys("simulated") == (
        transport_keys("ssh") | transport_keys("aws") | transport_keys("slurm")
    )
    assert transport_keys("local") == frozenset()


@pytest.mark.parametrize("provider", ["simulated", "ssh"])
def test_bad_transport_values_name_the_file_node_and_field(tmp_path, provider):
    f = write(tmp_path, provider, port=0)
    with pytest.raises(InputError, match=rf"^{f}: nodes\[a\]\.port: .*greater than or equal to 1"):
        load_cluster(f)
    f = write(tmp_path, provider, user=["not", "a", "name"])
    with pytest.raises(InputError, match=rf"^{f}: nodes\[a\]\.user: .*valid string"):
        load_cluster(f)


def test_the_core_loader_takes_only_the_transport_keys_it_is_given(tmp_path):
    f = write(tmp_path, "ssh", address="h1")
    with pytest.raises(InputError, match=r"nodes\[0\]\.address: unknown field"):
        cluster_config.load_cluster(f)
    node = cluster_config.load_cluster(f, lambda provider: {"address"}).node("a")
    assert node.transport == {"address": "h1"}


@pytest.mark.parametrize("name", ["aws-5node", "lab-5node", "local-3node", "sim-60gpu"])
def test_the_bundled_cluster_files_load_unchanged(name):
    cluster = load_cluster(name)
    if cluster.provider == "aws":
        assert all(n.transport.get("instance_type") for n in cluster.nodes)


def test_hadar_simulate_refuses_a_misspelt_key_in_one_line(tmp_path):
    f = write(tmp_path, "simulated", adress="h1")
    proc = run_group(
        [
            sys.executable,
            "-m",
            "hadar",
            "simulate",
            "--cluster",
            str(f),
            "--workload",
            "philly-5",
            "--out",
            str(tmp_path / "o"),
        ],
        timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"hadar: error: {f}: nodes[0].adress: unknown field"
    assert not (tmp_path / "o").exists()
