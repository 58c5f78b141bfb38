"""Text shown to users (``hadar/core/text.py``): a duration in the unit that shows it."""

from __future__ import annotations

import pytest

from hadar.core.text import duration_text


@pytest.mark.parametrize(
    "seconds, text",
    [
        (0, "0.0 s"),
        (10, "10.0 s"),
        (59.9, "59.9 s"),
        (60, "1.0 min"),
        (348, "5.8 min"),
        (3600, "1.00 h"),
        (5400, "1.50 h"),
        (86400, "1.0 days"),
        (365 * 86400, "365.0 days"),
        (4.1505e9, "48,038.2 days"),
    ],
)
def test_a_duration_reads_in_the_unit_that_shows_it(seconds: float, text: str) -> None:
    assert duration_text(seconds) == text
