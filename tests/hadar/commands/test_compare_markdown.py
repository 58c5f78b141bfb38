"""``compare.md``: the tables ``hadar compare`` prints, as Markdown (what docs/results.md quotes),
one row per policy in the order compared, with the printed cells."""

from __future__ import annotations

from hadar.commands.compare import FAIRNESS_METRICS, METRICS, markdown_tables


def _row(policy: str, ttd_s: float, ratio: float | None, completed: int = 4) -> dict:
    row = {key: 0.5 for key, _, _ in METRICS + FAIRNESS_METRICS}
    row.update(policy=policy, jobs=4, completed=completed, ttd_s=ttd_s, ttd_s_ratio=ratio)
    return row


def test_markdown_tables_hold_the_printed_cells():
    rows = [_row("hadar", 81036.0, 1.0), _row("gavel", 102816.0, 102816.0 / 81036.0, 3)]
    text = markdown_tables(rows, "hadar", "default")
    lines = text.splitlines()
    assert lines[0] == "Ratios (x) are policy / hadar."
    tables = [t for t in "\n".join(lines[2:]).split("\n\n") if t.strip()]
    assert len(tables) == 2
    first = tables[0].splitlines()
    assert first[0].startswith("| policy | TTD | avg JCT |") and first[1].startswith("|---|---|")
    assert first[2].startswith("| hadar | 22.51 h (1.00x) |")
    assert first[3].startswith("| gavel (3/4 done) | 28.56 h (1.27x) |")
    assert all(line.count("|") == len(METRICS) + 2 for line in first)
    second = tables[1].splitlines()
    assert second[0] == "| policy | " + " | ".join(n for _, n, _ in FAIRNESS_METRICS) + " |"
    assert len(second) == 4


def test_gavel_compatible_mode_adds_gavels_utilisation():
    row = _row("gavel", 3600.0, None) | {"gpu_util_gavel": 0.875}
    first = markdown_tables([row], "gavel", "gavel-compatible").split("\n\n")[1].splitlines()
    assert first[0].endswith("| util (Gavel) |") and first[2].endswith("| 87.5% |")


def test_a_metric_no_policy_has_gets_no_column_and_one_that_some_have_keeps_it():
    """``batch / job`` exists only on elastic workloads: elsewhere its column would be all
    dashes; a metric one policy has keeps its column, with a dash for the others."""
    rows = [_row("hadar", 3600.0, 1.0), _row("gavel", 7200.0, 2.0)]
    for r in rows:
        r["avg_batch_per_job"] = None
    rows[1]["max_decision_s"] = None
    rows[0]["max_decision_s"] = 0.25
    first = markdown_tables(rows, "hadar", "default").split("\n\n")[1].splitlines()
    header = [c.strip() for c in first[0].strip("|").split("|")]
    assert "batch / job" not in header and "GPUs / job" in header
    assert all(line.count("|") == len(METRICS) + 1 for line in first)
    column = header.index("decision max")
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in first[2:]]
    assert [c[column] for c in cells] == ["0.250 s", "-"]
    rows[0]["avg_batch_per_job"] = 512.0
    again = markdown_tables(rows, "hadar", "default").split("\n\n")[1].splitlines()
    assert "| batch / job |" in again[0] and again[0].count("|") == len(METRICS) + 2


def test_rho_above_one_shows_a_few_unfair_jobs_as_more_than_zero():
    def shown(share: float) -> str:
        row = _row("hadar", 3600.0, 1.0) | {"rho_above_1": share}
        second = markdown_tables([row], "hadar", "default").split("\n\n")[2].splitlines()
        return second[2].strip("|").split("|")[-1].strip()

    assert shown(2 / 480) == "0.4%"
    assert shown(1 / 5000) == "0.1%"  # never rounded down to nothing
    assert shown(0.0) == "0%"
    assert shown(0.25) == "25%"
