"""Hypothesis profiles of the fuzz suite.

``fuzz-ci`` (the default): derandomized (the same examples on every run, so CI is reproducible),
a bounded number of examples per test, no example database. ``long``: many more, randomized
examples for a deeper local run::

    .venv/bin/python -m pytest tests/fuzz --hypothesis-profile=long

(Give ``tests/fuzz`` on the command line: pytest then loads this file before Hypothesis reads the
option.) Only the fuzz tests use these profiles; the suite's other property tests keep theirs.
"""

from hypothesis import HealthCheck, settings

_COMMON = dict(
    deadline=None,  # the per-case time limit of cli_case.run_cli replaces Hypothesis' deadline
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.filter_too_much,
    ],
    print_blob=True,
)
settings.register_profile("fuzz-ci", max_examples=30, derandomize=True, database=None, **_COMMON)
settings.register_profile("long", max_examples=1500, **_COMMON)
