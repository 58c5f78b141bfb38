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


def test_console_host_keys_are_appended_through_a_link_but_never_to_a_fifo(tmp_path: Path):
    """known_hosts may be a dotfile manager's link (followed); a FIFO there used to block
    ``hadar cluster up`` for ever, a folder raised a traceback."""
    import os

    import pytest

    from hadar.core.errors import InputError
    from hadar.core.io import open_append

    real = tmp_path / "real_known_hosts"
    real.write_text("a ssh-ed25519 AAAA\n")
    link = tmp_path / "known_hosts"
    link.symlink_to(real)
    with open_append(link, follow_links=True, mode=0o600) as f:
        f.write("b ssh-ed25519 BBBB\n")
    assert real.read_text() == "a ssh-ed25519 AAAA\nb ssh-ed25519 BBBB\n"
    fresh = tmp_path / "new_known_hosts"
    with open_append(fresh, follow_links=True, mode=0o600) as f:
        f.write("c ssh-ed25519 CCCC\n")
    assert fresh.stat().st_mode & 0o777 == 0o600
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for bad in (fifo, tmp_path):
        with pytest.raises(InputError, match="not a regular file"):
            open_append(bad, follow_links=True)
