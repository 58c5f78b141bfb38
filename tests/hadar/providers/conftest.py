"""Provider tests: real sshd servers and a real moto server (fixtures in tests/fixtures/)."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
if str(ROOT) not in sys.path:  # plain `pytest` (not `python -m pytest`) from elsewhere
    sys.path.insert(0, str(ROOT))

from tests.fixtures.moto_server import aws_env, moto_server  # noqa: E402,F401
from tests.fixtures.slurm import slurm, slurm_cluster  # noqa: E402,F401
from tests.fixtures.sshd import bastion, sshd_farm  # noqa: E402,F401
