"""Older spellings still work where a user could have used them (hadar/core/renames.py): the
Python API's keywords, a plug-in policy reading ``RoundContext``'s old attributes, a run
directory whose ``run.json`` was saved with ``slot_s``; each says the new name."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from hadar import api
from hadar.core.errors import InputError
from hadar.core.renames import RENAMED, current_keys
from hadar.policy import RoundContext
from hadar.runtime.config import RunConfig, load_config, save_config
from hadar.scenario import load_scenario


def _summary(sim: api.Simulation) -> dict[str, object]:
    timing = ("avg_decision_s", "median_decision_s", "max_decision_s")
    return {k: v for k, v in sim.summary.items() if k not in timing}


def test_simulate_and_compare_take_the_old_keywords_with_a_warning() -> None:
    new = api.simulate(
        "sim-60gpu", "philly-8", "hadar", seed=2, round_s=180.0, restart_penalty_s=0.0
    )
    with pytest.warns(DeprecationWarning, match=r"round_length= is deprecated, use round_s="):
        old = api.simulate(
            "sim-60gpu", "philly-8", "hadar", seed=2, round_length=180.0, restart_penalty=0.0
        )
    assert _summary(old) == _summary(new)
    assert set(old.rounds["duration"]) == {180.0}  # not the default 360 s
    with pytest.warns(DeprecationWarning, match="restart_penalty= is deprecated"):
        cmp = api.compare(
            "sim-60gpu", "philly-8", ["hadar"], seed=2, round_s=180.0, restart_penalty=0.0
        )
    assert _summary(cmp.runs["hadar"]) == _summary(new)


def test_old_and_new_spelling_together_is_an_error() -> None:
    with pytest.warns(DeprecationWarning), pytest.raises(InputError, match="one setting"):
        api.simulate("sim-60gpu", "philly-8", round_length=60.0, round_s=90.0)


def test_a_policy_reading_an_old_attribute_gets_the_new_one() -> None:
    cluster, jobs, throughput = load_scenario("sim-60gpu", "philly-8")
    ctx = RoundContext(0.0, 0, 120.0, cluster, (), {}, throughput, restart_penalty_s=4.0)
    with pytest.warns(
        DeprecationWarning, match=r"RoundContext.round_length is deprecated, use round_s"
    ):
        assert ctx.round_length == 120.0
    with pytest.warns(DeprecationWarning):
        assert ctx.restart_penalty == 4.0
    with pytest.raises(AttributeError, match="no attribute 'round_lenght'"):
        ctx.round_lenght  # noqa: B018 (a typo is still an AttributeError)


def test_a_run_json_saved_with_slot_s_still_loads(tmp_path: Path) -> None:
    cfg = RunConfig(
        run_id="r", cluster="c.yaml", workload="w.csv", round_s=12.0, started_at=time.time()
    )
    save_config(cfg, tmp_path)
    saved = json.loads((tmp_path / "run.json").read_text())
    assert "slot_s" not in saved and saved["round_s"] == 12.0
    saved["slot_s"] = saved.pop("round_s")
    (tmp_path / "run.json").write_text(json.dumps(saved))
    assert load_config(tmp_path) == cfg
    saved["round_s"] = 15.0
    (tmp_path / "run.json").write_text(json.dumps(saved))
    with pytest.raises(InputError, match=r"run\.json: 'slot_s' and 'round_s' are one setting"):
        load_config(tmp_path)


def test_current_keys_maps_every_old_name_and_nothing_else() -> None:
    given = {old: i for i, old in enumerate(sorted(set(RENAMED) - {"slot_s"}))} | {"seed": 9}
    assert current_keys(given, "x") == {
        "restart_penalty_s": 0,
        "round_s": 1,
        "seed": 9,
    }
