"""Keep torch to one thread while these tests run (tests/fixtures/torch_threads.py)."""

from tests.fixtures.torch_threads import one_torch_thread  # noqa: F401  (autouse)
