"""ColumnMatrix (primal_dual/column_matrix.py): the column-wise matrix scipy.sparse would build,
array for array, so HiGHS gets the same model without scipy's construction."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import sparse

from primal_dual.column_matrix import ColumnMatrix


def _same(ours: ColumnMatrix, ref: ColumnMatrix) -> None:
    assert ours.n_rows == ref.n_rows and ours.n_cols == ref.n_cols
    for field in ("start", "index", "value"):
        assert np.array_equal(getattr(ours, field), getattr(ref, field)), field


@pytest.mark.parametrize("seed", range(40))
def test_from_entries_is_the_matrix_scipy_builds(seed):
    rng = np.random.default_rng(seed)
    n_rows, n_cols = (int(v) for v in rng.integers(1, 12, 2))
    cells = rng.permutation(n_rows * n_cols)[: int(rng.integers(0, n_rows * n_cols + 1))]
    rows, cols = cells // n_cols, cells % n_cols
    values = rng.normal(size=cells.size)
    values[rng.random(cells.size) < 0.2] = 0.0  # explicit zeros stay, as in scipy
    ref = sparse.csr_matrix((values, (rows, cols)), shape=(n_rows, n_cols))
    _same(
        ColumnMatrix.from_entries(rows, cols, values, (n_rows, n_cols)),
        ColumnMatrix.from_sparse(ref),
    )


def test_two_entries_in_one_cell_are_refused():
    with pytest.raises(ValueError, match="two entries in one cell"):
        ColumnMatrix.from_entries(np.array([0, 1, 0]), np.array([0, 0, 0]), np.ones(3), (2, 1))


def test_pairs_is_the_matrix_scipy_builds():
    rng = np.random.default_rng(3)
    groups, types = 7, 3
    gi, ki = np.nonzero(rng.random((groups, types)) < 0.7)
    gang = rng.choice([1.0, 2.0, 8.0], gi.size)
    rows = np.concatenate([gi, groups + ki])
    cols = np.concatenate([np.arange(gi.size)] * 2)
    ref = ColumnMatrix.from_sparse(
        sparse.csr_matrix(
            (np.concatenate([np.ones(gi.size), gang]), (rows, cols)),
            shape=(groups + types, gi.size),
        )
    )
    ours = ColumnMatrix.pairs(gi, groups + ki, gang, groups + types)
    assert ours.n_cols == gi.size
    _same(ours, ref)
