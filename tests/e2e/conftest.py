from tests.fixtures.slurm import slurm, slurm_cluster  # noqa: F401  (the local Slurm, one test at a time)
from tests.fixtures.sshd import sshd_farm  # noqa: F401  (session-scoped real sshd servers)
