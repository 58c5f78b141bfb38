"""The input boundary's shared pieces (``hadar/core/validation.py``): a JSON key given twice is
refused as YAML's is, a file the system cannot look up is named for what it is, and a value an
error echoes is cut to ``SHOWN_CHARS``, so a 5,000-character field stays a short line."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pytest

from hadar.core.errors import SHOWN_CHARS, InputError
from hadar.core.validation import load_json, read_text, shown_value
from tests.fixtures.cli import hadar_cli
from tests.hadar.commands.helpers import refused

R18 = "ResNet-18 (batch size 64)"


def test_a_json_key_given_twice_is_refused_naming_it(tmp_path: Path) -> None:
    f = tmp_path / "t.json"
    f.write_text('{"v100": {"a": 1}, "k80": {"b": {"c": 1, "c": 2}}}')
    with pytest.raises(InputError, match=r"t\.json: malformed JSON: duplicate key 'c'$"):
        load_json(f, "throughputs file")
    f.write_text('{"v100": {"a": 1}, "k80": {"b": {"c": 1, "d": 2}}}')
    assert load_json(f, "throughputs file") == {"v100": {"a": 1}, "k80": {"b": {"c": 1, "d": 2}}}


def test_throughputs_with_a_key_given_twice_are_refused_by_the_cli(tmp_path: Path) -> None:
    table = resources.files("estimators").joinpath("data/gavel_throughputs.json").read_text()
    (tmp_path / "t.json").write_text(table.rstrip()[:-1] + ', "v100": {}}')
    assert json.loads((tmp_path / "t.json").read_text())["v100"] == {}  # json: the last wins
    res = hadar_cli(
        "simulate", "--workload", "philly-5", "--throughputs", "t.json", "--out", "o", cwd=tmp_path
    )
    refused(res, "t.json: malformed JSON: duplicate key 'v100'")
    assert not (tmp_path / "o").exists()


def test_a_symbolic_link_loop_is_no_missing_file(tmp_path: Path) -> None:
    (tmp_path / "a.csv").symlink_to("b.csv")
    (tmp_path / "b.csv").symlink_to("a.csv")
    with pytest.raises(InputError, match=r"^workload file: .*a\.csv: a symbolic link loop"):
        read_text(tmp_path / "a.csv", "workload file")
    with pytest.raises(InputError, match=r"^workload file: .*\.\.\.x+\.csv: file name too long$"):
        read_text(tmp_path / ("x" * 300 + ".csv"), "workload file")


def test_shown_values_are_cut() -> None:
    assert shown_value("a" * 5000) == repr("a" * SHOWN_CHARS + "...")
    assert shown_value(int("9" * 4000)) == "9" * SHOWN_CHARS + "..."
    assert shown_value("v100") == "'v100'" and shown_value(2.5) == "2.5"


LONG = "a" * 5000
DIGITS = "9" * 5000


@pytest.mark.parametrize(
    "cluster, jobs, needles",
    [
        (f"name: {LONG}\nnodes:\n  - {{name: a, gpus: {{v100: 4}}}}\n", None, ["c.yaml: name"]),
        (
            f"name: c\nnodes:\n  - {{name: {LONG}, gpus: {{v100: 4}}}}\n",
            None,
            ["c.yaml: nodes[0].name"],
        ),
        (
            f"name: c\nnodes:\n  - {{name: a, gpus: {{v100: '{DIGITS}'}}}}\n",
            None,
            ["c.yaml: nodes[0].gpus", "GPU count"],
        ),
        (None, f"id,type,gpus,steps\n0,{R18},1,{DIGITS}\n", ["jobs.csv: row[0].steps"]),
        (None, f"id,type,gpus,steps\n0,{R18},{LONG},100\n", ["jobs.csv: row[0].gpus"]),
        (None, f"id,type,gpus,steps,weight\n0,{R18},1,100,{DIGITS}\n", ["row[0].weight"]),
    ],
    ids=["cluster name", "node name", "gpu count", "steps", "gpus", "weight"],
)
def test_a_5000_character_field_is_echoed_cut(tmp_path: Path, cluster, jobs, needles) -> None:
    (tmp_path / "c.yaml").write_text(cluster or "name: c\nnodes:\n  - {name: a, gpus: {v100: 4}}\n")
    (tmp_path / "jobs.csv").write_text(jobs or f"id,type,gpus,steps\n0,{R18},1,100\n")
    res = hadar_cli(
        *("simulate", "--cluster", "c.yaml", "--workload", "jobs.csv", "--out", "o"),
        cwd=tmp_path,
    )
    refused(res, *needles, "...")  # a short line: the value cut
    assert not (tmp_path / "o").exists()


def test_a_yaml_merge_key_merges_and_its_keys_may_be_overridden(tmp_path: Path) -> None:
    """``<<: *base`` was "could not determine a constructor for the tag ...merge": the duplicate
    key check constructed the merge key itself. A key given twice beside a merge is still one."""
    from hadar.core.validation import load_yaml

    f = tmp_path / "c.yaml"
    f.write_text(
        "name: c\nprovider: simulated\nnodes:\n"
        "  - &base {name: a, gpus: {v100: 2}, pcie_gen: 4}\n"
        "  - {<<: *base, name: b}\n"
    )
    nodes = load_yaml(f, "cluster")["nodes"]
    assert nodes[1] == {"name": "b", "gpus": {"v100": 2}, "pcie_gen": 4}
    f.write_text(
        "name: c\nnodes:\n  - &base {name: a, gpus: {v100: 2}}\n  - {<<: *base, name: b, name: c}\n"
    )
    with pytest.raises(
        InputError, match=r"c\.yaml: malformed YAML at line 4, column \d+: duplicate key 'name'$"
    ):
        load_yaml(f, "cluster")
