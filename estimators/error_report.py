"""How far the cold-start estimate (Eq. 10) is from a measured table, with honest hold-outs.

Every measured cell (job type, GPU type, W, placement) with a positive figure is predicted by a
:class:`PmiEstimator` built on a copy of the table from which the cell's information is removed:

- ``cell``: the (job type, GPU type) pair is hidden at every W and placement, so X_ref comes
  from another GPU type (the reference; when the reference itself is predicted, the measured
  GPU type of nearest PMI). This is Eq. 10's PMI part, the case of a GPU missing from the table.
- ``gang``: (W > 1 only) the job's W > 1 figures are hidden on every GPU type, so the estimate is
  the reference's W = 1 figure x the gang-scaling knob x the PMI ratio.
- ``job``: the job type is hidden everywhere, so X_ref comes from its family at other batch sizes
  (the batch factor) or, with no other family member in the table, the generic prior.
- ``family``: every job type of the family is hidden: the generic prior and the class factors
  alone (the pure cold start of a model nobody measured). The prior's one constant was set from
  this table, so this row is in-sample for that constant.

Ranking agreement asks whether the estimate orders a job's GPU types like the measurement, in the
realistic cold start where only the reference GPU was measured for that job.
"""

from __future__ import annotations

import math
import re
import statistics
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from itertools import combinations
from pathlib import Path
from typing import Any

from estimators.pmi import PmiEstimator, PmiParams
from estimators.throughput import GavelThroughputTable, TableKey
from hadar.core.errors import InputError
from hadar.core.io import replaced_together, write_csv, write_json
from hadar.core.job_profile import parse_job_type

HOLDOUTS = ("cell", "gang", "job", "family")


@dataclass(frozen=True)
class ErrorRow:
    """One predicted cell."""

    holdout: str
    job_type: str
    gpu_type: str
    num_gpus: int
    consolidated: bool
    measured: float
    estimated: float
    anchor_kind: str
    anchor: str

    @property
    def ape(self) -> float:
        """Absolute percentage error, 100 x |estimate - measured| / measured."""
        return 100.0 * abs(self.estimated - self.measured) / self.measured

    @property
    def ratio(self) -> float:
        return self.estimated / self.measured


@dataclass(frozen=True)
class Summary:
    """Error statistics of one group of cells (``gpu_type == "all"`` pools the GPU types)."""

    holdout: str
    gpu_type: str
    num_gpus: int
    consolidated: bool
    cells: int
    median_ape: float
    mean_ape: float
    median_ratio: float
    within_25: float
    """Share of cells whose estimate is within 25 % of the measurement."""
    worst_job: str
    worst_ape: float


@dataclass(frozen=True)
class Ranking:
    """Order agreement over the job types measured on at least two GPU types at gang size W."""

    num_gpus: int
    jobs: int
    full_order: float
    """Share of job types whose whole GPU-type order matches."""
    pairwise: float
    """Share of (job type, GPU pair) orders that match."""
    top1: float
    """Share of job types whose estimated fastest GPU type is the measured fastest."""
    disagreements: tuple[str, ...] = ()


@dataclass
class ErrorReport:
    source: str
    params: PmiParams
    rows: list[ErrorRow]
    summaries: list[Summary]
    rankings: list[Ranking]
    skipped_zero: int = 0
    """Measured cells of 0 (cannot run) left out."""
    gpu_types: tuple[str, ...] = field(default_factory=tuple)

    def summary(
        self, holdout: str, gpu_type: str, num_gpus: int = 1, consolidated: bool = True
    ) -> Summary | None:
        for s in self.summaries:
            if (s.holdout, s.gpu_type, s.num_gpus, s.consolidated) == (
                holdout,
                gpu_type,
                num_gpus,
                consolidated,
            ):
                return s
        return None

    def worst(self, holdout: str = "cell", n: int = 8) -> list[ErrorRow]:
        return sorted((r for r in self.rows if r.holdout == holdout), key=lambda r: -r.ape)[:n]

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "params": self.params.as_dict(),
            "gpu_types": list(self.gpu_types),
            "skipped_zero_cells": self.skipped_zero,
            "summaries": [asdict(s) for s in self.summaries],
            "rankings": [
                asdict(r) | {"disagreements": list(r.disagreements)} for r in self.rankings
            ],
            "worst_cell_holdout": [_row_dict(r) for r in self.worst("cell")],
        }


def _row_dict(r: ErrorRow) -> dict[str, Any]:
    return asdict(r) | {"ape": r.ape, "ratio": r.ratio}


# -- table plumbing ---------------------------------------------------------------------------
def table_entries(table: GavelThroughputTable) -> dict[TableKey, float]:
    """Every measurement of ``table`` (through its public lookups)."""
    out: dict[TableKey, float] = {}
    for jt in table.job_types:
        for w in table.gang_sizes(jt):
            for g in table.gpu_types:
                for cons in (True, False):
                    v = table.measured(jt, g, w, cons)
                    if v is not None:
                        out[TableKey(jt, g, w, cons)] = v
    return out


def masked(
    entries: dict[TableKey, float], hide: Callable[[TableKey], bool], source: str
) -> GavelThroughputTable:
    """A table with the entries for which ``hide`` is true removed."""
    return GavelThroughputTable({k: v for k, v in entries.items() if not hide(k)}, source=source)


# -- evaluation -------------------------------------------------------------------------------
def _targets(
    entries: dict[TableKey, float], gpu_types: Sequence[str]
) -> tuple[list[TableKey], int]:
    keys, zero = [], 0
    for k, v in sorted(
        entries.items(),
        key=lambda kv: (kv[0].job_type, kv[0].gpu_type, kv[0].num_gpus, not kv[0].consolidated),
    ):
        if k.gpu_type not in gpu_types or (k.num_gpus == 1 and not k.consolidated):
            continue  # W = 1 "unconsolidated" duplicates the consolidated figure
        if v <= 0:
            zero += 1
            continue
        keys.append(k)
    return keys, zero


def _hider(holdout: str, target: TableKey) -> tuple[tuple[str, ...], Callable[[TableKey], bool]]:
    jt, g = target.job_type, target.gpu_type
    if holdout == "cell":
        return (jt, g), lambda k: k.job_type == jt and k.gpu_type == g
    if holdout == "gang":
        return (jt,), lambda k: k.job_type == jt and k.num_gpus > 1
    if holdout == "job":
        return (jt,), lambda k: k.job_type == jt
    if holdout == "family":
        fam = parse_job_type(jt)[0]
        if fam is None:
            return (jt,), lambda k: k.job_type == jt
        return (fam,), lambda k: parse_job_type(k.job_type)[0] == fam
    raise InputError(f"--holdout: unknown hold-out {holdout!r} (choose from {', '.join(HOLDOUTS)})")


def evaluate(
    table: GavelThroughputTable,
    params: PmiParams | None = None,
    holdout: str = "cell",
    gpu_types: Sequence[str] | None = None,
) -> tuple[list[ErrorRow], int]:
    """Predict every positive measured cell under ``holdout``; returns rows and #zero cells."""
    params = params or PmiParams()
    entries = table_entries(table)
    gpus = tuple(gpu_types) if gpu_types is not None else tuple(sorted(table.gpu_types))
    targets, zero = _targets(entries, gpus)
    estimators: dict[tuple[str, ...], PmiEstimator] = {}
    rows = []
    for t in targets:
        if holdout == "gang" and t.num_gpus == 1:
            continue
        group, hide = _hider(holdout, t)
        est = estimators.get(group)
        if est is None:
            est = PmiEstimator(masked(entries, hide, table.source), params)
            estimators[group] = est
        e = est.estimate(t.job_type, t.gpu_type, num_gpus=t.num_gpus, consolidated=t.consolidated)
        for a in (e.anchor, e.network):  # honesty: nothing hidden may have been used
            assert a is None or not hide(
                TableKey(a.job_type, a.gpu_type, a.num_gpus, a.consolidated)
            )
        rows.append(
            ErrorRow(
                holdout,
                t.job_type,
                t.gpu_type,
                t.num_gpus,
                t.consolidated,
                entries[t],
                e.value,
                e.anchor.kind,
                e.source,
            )
        )
    return rows, zero


def summarize(rows: Iterable[ErrorRow]) -> list[Summary]:
    """Statistics per (hold-out, GPU type, W, placement), plus pooled ``"all"`` GPU rows."""
    groups: dict[tuple[str, str, int, bool], list[ErrorRow]] = defaultdict(list)
    for r in rows:
        groups[(r.holdout, r.gpu_type, r.num_gpus, r.consolidated)].append(r)
        groups[(r.holdout, "all", r.num_gpus, r.consolidated)].append(r)
    out = []
    for (h, g, w, c), rs in groups.items():
        apes = [r.ape for r in rs]
        worst = max(rs, key=lambda r: r.ape)
        out.append(
            Summary(
                h,
                g,
                w,
                c,
                len(rs),
                statistics.median(apes),
                statistics.fmean(apes),
                math.exp(statistics.median(math.log(r.ratio) for r in rs)),
                sum(a <= 25.0 for a in apes) / len(apes),
                worst.job_type,
                worst.ape,
            )
        )
    order = {h: i for i, h in enumerate(HOLDOUTS)}
    out.sort(
        key=lambda s: (
            order.get(s.holdout, 9),
            s.num_gpus,
            not s.consolidated,
            s.gpu_type == "all",
            s.gpu_type,
        )
    )
    return out


def _other_gpus_of(job_type: str, ref: str) -> Callable[[TableKey], bool]:
    """Hides every entry of ``job_type`` except those on the reference GPU ``ref``."""
    return lambda k: k.job_type == job_type and k.gpu_type != ref


def rank_agreement(
    table: GavelThroughputTable, params: PmiParams | None = None, num_gpus: int = 1
) -> Ranking | None:
    """Order agreement at gang size W (consolidated), reference measured and the rest estimated."""
    params = params or PmiParams()
    ref = params.reference_gpu
    entries = table_entries(table)
    jobs = full = top = 0
    pairs = agree = 0
    bad = []
    for jt in sorted(table.job_types):
        meas = {g: entries.get(TableKey(jt, g, num_gpus, True), 0.0) for g in table.gpu_types}
        meas = {g: v for g, v in meas.items() if v > 0}
        if ref not in meas or len(meas) < 2:
            continue
        est_model = PmiEstimator(masked(entries, _other_gpus_of(jt, ref), table.source), params)
        est = {g: est_model.estimate(jt, g, num_gpus=num_gpus).value for g in meas}
        jobs += 1
        m_order = sorted(meas, key=lambda g: -meas[g])
        e_order = sorted(est, key=lambda g: -est[g])
        full += m_order == e_order
        top += m_order[0] == e_order[0]
        for a, b in combinations(sorted(meas), 2):
            pairs += 1
            agree += (meas[a] > meas[b]) == (est[a] > est[b])
        if m_order != e_order:
            bad.append(f"{jt}: measured {'>'.join(m_order)}, estimated {'>'.join(e_order)}")
    if jobs == 0:
        return None
    return Ranking(num_gpus, jobs, full / jobs, agree / pairs, top / jobs, tuple(bad))


def build_report(
    table: GavelThroughputTable,
    params: PmiParams | None = None,
    holdouts: Sequence[str] = HOLDOUTS,
) -> ErrorReport:
    """Rows, summaries and rankings for ``holdouts`` on every GPU type of ``table``."""
    params = params or PmiParams()
    if params.reference_gpu not in table.gpu_types:
        have = ", ".join(sorted(table.gpu_types))
        raise InputError(
            f"--reference: {params.reference_gpu} is not measured in {table.source} (has {have})"
        )
    rows: list[ErrorRow] = []
    zero = 0
    for h in holdouts:
        held_out, zero = evaluate(table, params, h)
        rows += held_out
    sizes = sorted({w for jt in table.job_types for w in table.gang_sizes(jt)})
    rankings = [r for w in sizes if (r := rank_agreement(table, params, w)) is not None]
    return ErrorReport(
        table.source, params, rows, summarize(rows), rankings, zero, tuple(sorted(table.gpu_types))
    )


# -- variants (to justify the defaults) ------------------------------------------------------
VARIANTS: dict[str, dict[str, Any]] = {
    "fp32, alpha 1 (default)": {},
    "tensor where present, alpha 1": {"tensor_weight": 1.0},
    "geometric fp32/tensor blend 0.5": {"tensor_weight": 0.5},
    "fp32, alpha 0.8": {"pmi_exponent": 0.8},
    "fp32, alpha 0.9": {"pmi_exponent": 0.9},
    "fp32, alpha 1.2": {"pmi_exponent": 1.2},
    "W-GPU anchors first (gang_anchor exact)": {"gang_anchor": "exact"},
    "multi-node = consolidated x 0.75 (no network bound)": {"network_bound": False},
}


@dataclass(frozen=True)
class VariantScore:
    label: str
    median_ape_w1: float
    mean_ape_w1: float
    median_ape_gang: float
    """Median APE of the W > 1 consolidated cells."""
    median_ape_multi: float
    """Median APE of the W > 1 multi-node cells."""
    pairwise_w1: float


def score_variants(
    table: GavelThroughputTable, base: PmiParams | None = None
) -> list[VariantScore]:
    """Cell hold-out error of a few PMI choices, all GPU types pooled."""
    base = base or PmiParams()
    out = []
    for label, changes in VARIANTS.items():
        p = replace(base, **changes)
        rows, _ = evaluate(table, p, "cell")
        w1 = [r.ape for r in rows if r.num_gpus == 1]
        gang = [r.ape for r in rows if r.num_gpus > 1 and r.consolidated] or [math.nan]
        multi = [r.ape for r in rows if not r.consolidated] or [math.nan]
        rank = rank_agreement(table, p, 1)
        out.append(
            VariantScore(
                label,
                statistics.median(w1),
                statistics.fmean(w1),
                statistics.median(gang),
                statistics.median(multi),
                rank.pairwise if rank else math.nan,
            )
        )
    return out


# -- output -----------------------------------------------------------------------------------
def make_out_dir(out_dir: str | Path) -> Path:
    """Create the output directory (one-line InputError when impossible)."""
    d = Path(out_dir)
    try:
        d.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"--out: cannot create {d}: {exc.strerror or exc}") from None
    return d


RESULT_FILES = ("estimate_error_cells.csv", "estimate_error_summary.csv", "estimate_error.json")
"""What :func:`write_outputs` writes."""


def write_outputs(
    report: ErrorReport, out_dir: str | Path, variants: Sequence[VariantScore] = ()
) -> list[Path]:
    """:data:`RESULT_FILES` in ``out_dir`` as one save: they replace the previous ones together
    or not at all (:func:`hadar.core.io.replaced_together`; a file that cannot be written or
    replaced is a one-line InputError naming it)."""
    d = make_out_dir(out_dir)
    with replaced_together(d, RESULT_FILES) as stage:
        _write_tables(report, stage, variants)
    return [d / name for name in RESULT_FILES]


def _write_tables(report: ErrorReport, d: Path, variants: Sequence[VariantScore]) -> None:
    """:data:`RESULT_FILES` into the folder ``d``."""
    cells, summ, js = (d / name for name in RESULT_FILES)
    write_csv(
        cells,
        [
            [
                r.holdout,
                r.job_type,
                r.gpu_type,
                r.num_gpus,
                r.consolidated,
                f"{r.measured:.6g}",
                f"{r.estimated:.6g}",
                f"{r.ape:.2f}",
                f"{r.ratio:.4f}",
                r.anchor_kind,
                r.anchor,
            ]
            for r in report.rows
        ],
        [
            "holdout",
            "job_type",
            "gpu_type",
            "num_gpus",
            "consolidated",
            "measured",
            "estimated",
            "ape_pct",
            "ratio",
            "anchor_kind",
            "anchor",
        ],
    )
    write_csv(
        summ,
        [
            [
                s.holdout,
                s.gpu_type,
                s.num_gpus,
                s.consolidated,
                s.cells,
                f"{s.median_ape:.2f}",
                f"{s.mean_ape:.2f}",
                f"{s.median_ratio:.4f}",
                f"{s.within_25:.3f}",
                s.worst_job,
                f"{s.worst_ape:.2f}",
            ]
            for s in report.summaries
        ],
        [
            "holdout",
            "gpu_type",
            "num_gpus",
            "consolidated",
            "cells",
            "median_ape_pct",
            "mean_ape_pct",
            "median_ratio",
            "within_25pct",
            "worst_job",
            "worst_ape_pct",
        ],
    )
    data = report.to_json()
    if variants:
        data["variants"] = [asdict(v) for v in variants]
    write_json(js, data, indent=1)


def _short_job(job_type: str) -> str:
    """``ResNet-50 (batch size 256)`` as ``ResNet-50 b256``: a job type in a narrow column."""
    return re.sub(r" \(batch size (\d+)\)", r" b\1", job_type)


def _nodes(consolidated: bool) -> str:
    """The placement in a table cell that fits a narrow terminal: one node or several."""
    return "one" if consolidated else "several"


def render(report: ErrorReport, console: Any, variants: Sequence[VariantScore] = ()) -> None:
    """Print the report as rich tables."""
    from rich.table import Table

    ref = report.params.reference_gpu
    console.print(
        f"[bold]Cold-start estimate (Eq. 10) vs measured[/bold]: {report.source}, reference {ref}"
    )
    titles = {
        "cell": "hold-out = cell: X_ref from another GPU type (the case of a GPU missing from the table)",
        "gang": "hold-out = gang: W > 1 figures hidden, W = 1 reference x gang scaling",
        "job": "hold-out = job: the job type hidden everywhere, X_ref from its family or the prior",
        "family": "hold-out = family: the whole model family hidden, generic prior x class factors",
    }
    for h in HOLDOUTS:
        rows = [s for s in report.summaries if s.holdout == h]
        if not rows:
            continue
        t = Table(title=titles[h], title_justify="left")
        for col in (
            "GPU",
            "W",
            "nodes",
            "cells",
            "median APE %",
            "mean APE %",
            "est/meas median",
            "within 25 %",
            "worst: APE",
        ):
            left = col in ("GPU", "nodes", "worst: APE")
            # numbers in narrow columns (their titles wrap) leave the width to the worst job
            t.add_column(col, justify="left" if left else "right", max_width=None if left else 8)
        for s in rows:
            t.add_row(
                s.gpu_type,
                str(s.num_gpus),
                _nodes(s.consolidated),
                str(s.cells),
                f"{s.median_ape:.1f}",
                f"{s.mean_ape:.1f}",
                f"{s.median_ratio:.2f}",
                f"{100 * s.within_25:.0f} %",
                f"{_short_job(s.worst_job)}: {s.worst_ape:.0f} %",
                style="bold" if s.gpu_type == "all" else None,
            )
        console.print(t)
    t = Table(
        title=f"Ranking agreement (reference {ref} measured, other GPU types estimated)",
        title_justify="left",
    )
    for col in ("W", "job types", "full order", "pairwise", "fastest GPU"):
        t.add_column(col, justify="right")
    for r in report.rankings:
        t.add_row(
            str(r.num_gpus),
            str(r.jobs),
            f"{100 * r.full_order:.0f} %",
            f"{100 * r.pairwise:.0f} %",
            f"{100 * r.top1:.0f} %",
        )
    console.print(t)
    t = Table(title="Worst cells (hold-out = cell)", title_justify="left")
    for col in ("job type", "GPU", "W", "nodes", "measured", "estimated", "APE %", "from"):
        t.add_column(col)
    for row in report.worst("cell"):
        t.add_row(
            row.job_type,
            row.gpu_type,
            str(row.num_gpus),
            _nodes(row.consolidated),
            f"{row.measured:.2f}",
            f"{row.estimated:.2f}",
            f"{row.ape:.0f}",
            row.anchor,
        )
    console.print(t)
    if variants:
        t = Table(
            title="PMI variants (hold-out = cell, all GPU types pooled)", title_justify="left"
        )
        for col in (
            "variant",
            "median APE % W=1",
            "mean APE % W=1",
            "median APE % W>1",
            "median APE % multi-node",
            "pairwise order W=1",
        ):
            t.add_column(col)
        for v in variants:
            t.add_row(
                v.label,
                f"{v.median_ape_w1:.1f}",
                f"{v.mean_ape_w1:.1f}",
                f"{v.median_ape_gang:.1f}",
                f"{v.median_ape_multi:.1f}",
                f"{100 * v.pairwise_w1:.0f} %",
            )
        console.print(t)
    if report.skipped_zero:
        console.print(
            f"({report.skipped_zero} measured cells of 0 steps/s, i.e. cannot run, were left out)"
        )
