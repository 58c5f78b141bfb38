from tests.fixtures.sshd import sshd_farm  # noqa: F401  (session-scoped real sshd servers)
