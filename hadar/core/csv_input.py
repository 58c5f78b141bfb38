"""Reading a user's CSV file safely: one :class:`InputError` line for a malformed record, a field
over the ``csv`` module's size limit, a header naming a column twice, or a row with more fields
than the header; every message names the file and the physical line (the header is line 1)."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from typing import TYPE_CHECKING

from hadar.core.errors import InputError, shorten

if TYPE_CHECKING:
    from _csv import Reader  # what csv.reader returns (typeshed's name)


def read_csv(
    text: str, source: str, *, strip_header: bool = False, delimiter: str = ","
) -> tuple[list[str], Iterator[tuple[int, list[str]]]]:
    """The header's column names (line 1; empty for an empty file; each stripped of surrounding
    blanks with ``strip_header``) and a lazy iterator of ``(line, fields)`` over the records after
    it, blank lines skipped. ``line`` is the physical line a record ends on. Raises InputError
    naming ``source`` and the line for a malformed record (a field over the ``csv`` module's limit
    included) and for a header that names a column twice (unnamed columns, a spreadsheet's
    trailing commas, may repeat). ``delimiter`` separates fields (Slurm's parsable output: ``|``)."""
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    header = _next(reader, source) or []
    names = [h.strip() for h in header] if strip_header else header
    seen: set[str] = set()
    for name in names:
        if name and name in seen:
            raise InputError(f"{source}: line 1 (header): column {shorten(name)!r} is named twice")
        seen.add(name)
    return names, _records(reader, source)


def read_csv_dicts(
    text: str, source: str
) -> tuple[list[str], Iterator[tuple[int, dict[str, str]]]]:
    """:func:`read_csv` with each record as ``{column: field}``: a record with fewer fields than
    the header lacks the last columns' keys (a missing field, for the caller to judge); one with
    more is refused (``FILE: line N: 7 fields, the header has 5``), and so is a value under an
    unnamed column (empty ones there are dropped)."""
    names, records = read_csv(text, source)
    unnamed = [i for i, name in enumerate(names) if not name]

    def dicts() -> Iterator[tuple[int, dict[str, str]]]:
        for line, row in records:
            if len(row) > len(names):
                raise InputError(
                    f"{source}: line {line}: {len(row)} fields, the header has {len(names)}"
                )
            for i in unnamed:
                if i < len(row) and row[i].strip():
                    raise InputError(
                        f"{source}: line {line}: field {i + 1} ({shorten(row[i])!r}) is under a "
                        "column the header does not name"
                    )
            yield line, {name: field for name, field in zip(names, row, strict=False) if name}

    return names, dicts()


def _records(reader: Reader, source: str) -> Iterator[tuple[int, list[str]]]:
    while True:
        row = _next(reader, source)
        if row is None:
            return
        if row:  # a blank line is no record (as csv.DictReader has it)
            yield reader.line_num, row


def _next(reader: Reader, source: str) -> list[str] | None:
    try:
        return next(reader, None)
    except csv.Error as exc:
        # ``line_num`` counts the lines read so far, the failing one included: the physical line
        # of the bad record (csv.DictReader's own ``line_num`` lags one record behind).
        raise InputError(f"{source}: line {reader.line_num}: malformed CSV: {exc}") from None
