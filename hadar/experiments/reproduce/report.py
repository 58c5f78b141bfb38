"""A reproduction as text: values in their units and the Markdown table the docs quote."""

from __future__ import annotations

from hadar.experiments.reproduce import AT_LEAST, Reproduction, Row


def value_text(v: float | None, unit: str) -> str:
    """``3,470 s``, ``1.17x``, ``80.0 %``; ``-`` when not measured."""
    if v is None:
        return "-"
    if unit == "s":
        return f"{v:,.0f} s"
    if unit == "%":
        return f"{100 * v:.1f} %"
    return f"{v:.2f}x"


def tolerance_text(row: Row) -> str:
    """``+-10 %``, or ``>= 1.71x`` for a row whose paper figure is a bound."""
    if row.rule == AT_LEAST:
        return f">= {value_text(row.paper * (1 - row.tolerance), row.unit)}"
    return f"+-{100 * row.tolerance:.0f} %"


def markdown(result: Reproduction) -> str:
    """The rows as a Markdown table under the set-up line (what ``docs/results.md`` quotes)."""
    lines = [
        f"Set-up{' (--quick)' if result.quick else ''}: {result.setup}.",
        "",
        "| figure | paper | ours | tolerance | within |",
        "|---|---:|---:|---:|:---:|",
    ]
    for r in result.rows:
        note = f" ({r.note})" if r.note else ""
        lines.append(
            f"| {r.figure}{note} | {value_text(r.paper, r.unit)} | {value_text(r.ours, r.unit)} "
            f"| {tolerance_text(r)} | {'yes' if r.within else '**no**'} |"
        )
    lines += [""] + [f"- {n}" for n in result.notes]
    return "\n".join(lines).rstrip() + "\n"
