"""A sparse constraint matrix column-wise, as HiGHS takes it, built without scipy.sparse: the
round's LPs and integer programs are small and built hundreds of times per simulation, where
scipy's construction and conversion cost more than the solve."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class ColumnMatrix:
    """A sparse constraint matrix column-wise, as HiGHS takes it: column ``c``'s entries are
    ``value[start[c]:start[c + 1]]`` in rows ``index[start[c]:start[c + 1]]`` (ascending)."""

    start: np.ndarray
    index: np.ndarray
    value: np.ndarray
    n_rows: int

    @classmethod
    def from_sparse(cls, a: Any) -> ColumnMatrix:
        """From a scipy sparse matrix (what ``scipy.optimize.milp`` hands HiGHS)."""
        from scipy import sparse

        csc = sparse.csc_array(a)
        csc.sort_indices()
        return cls(csc.indptr, csc.indices, csc.data.astype(np.float64), int(csc.shape[0]))

    @classmethod
    def from_entries(
        cls, rows: np.ndarray, cols: np.ndarray, values: np.ndarray, shape: tuple[int, int]
    ) -> ColumnMatrix:
        """From ``(row, column, value)`` entries, at most one per cell: the matrix
        ``scipy.sparse.csr_matrix((values, (rows, cols)), shape)`` holds, in the same order."""
        n_rows, n_cols = shape
        rows, cols = np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64)
        order = np.lexsort((rows, cols))  # by column, then row
        rows, cols = rows[order], cols[order]
        if rows.size and bool(((np.diff(cols) == 0) & (np.diff(rows) == 0)).any()):
            raise ValueError("ColumnMatrix.from_entries: two entries in one cell")
        start = np.zeros(n_cols + 1, dtype=np.int32)
        np.cumsum(np.bincount(cols, minlength=n_cols), out=start[1:])
        value = np.asarray(values, dtype=np.float64)[order]
        return cls(start, rows.astype(np.int32), value, n_rows)

    @classmethod
    def pairs(
        cls, first: np.ndarray, second: np.ndarray, weight: np.ndarray, n_rows: int
    ) -> ColumnMatrix:
        """Columns of two entries each: 1 in row ``first[c]``, ``weight[c]`` in row
        ``second[c]`` (each ``second[c] > first[c]``): a job or group row and a GPU type row."""
        nv = len(first)
        index = np.empty(2 * nv, dtype=np.int32)
        index[0::2], index[1::2] = first, second
        value = np.empty(2 * nv)
        value[0::2], value[1::2] = 1.0, weight
        return cls(np.arange(0, 2 * nv + 1, 2, dtype=np.int32), index, value, n_rows)

    @property
    def n_cols(self) -> int:
        return len(self.start) - 1
