"""The fuzz harness itself: a hang is caught, and the contract check refuses what it must."""

import time

import pytest

from tests.fuzz.cli_case import CaseTimeout, Outcome, check_contract, time_limit


def test_a_hang_is_interrupted_at_the_limit():
    t = time.monotonic()
    with pytest.raises(CaseTimeout), time_limit(0.2):
        time.sleep(5)
    assert time.monotonic() - t < 2


@pytest.mark.parametrize(
    "code, err",
    [
        (1, "hadar: error: x\n"),  # exit code outside 0/2/3
        (2, "hadar: error: x\nhadar: error: y\n"),  # two lines
        (2, "usage: hadar ...\nhadar: error: x\n"),  # argparse's usage block
        (2, "Traceback (most recent call last):\n"),
        (3, ""),  # no message
    ],
)
def test_the_contract_refuses(code, err):
    with pytest.raises(AssertionError):
        check_contract(Outcome(("simulate",), code, "", err))


def test_the_contract_accepts_one_line():
    check_contract(
        Outcome(
            ("simulate",), 2, "", "hadar: error: c.yaml: nodes[0].gpus: missing required field\n"
        )
    )
    check_contract(Outcome(("simulate",), 0, "table", ""))
