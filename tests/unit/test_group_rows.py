"""``arrays.group_rows`` gives ``np.unique(axis=0)``'s groups (first rows, group per row, in key order)."""

from __future__ import annotations

import numpy as np
import pytest

from tb_plugin.model.arrays import group_rows, unique_ints


def _reference(keys: list[np.ndarray]) -> tuple[list[int], list[int]]:
    stacked = np.stack([k.astype(np.int64) for k in keys], axis=1)
    _, first, inverse = np.unique(stacked, axis=0, return_index=True, return_inverse=True)
    return first.tolist(), inverse.reshape(-1).tolist()


@pytest.mark.parametrize("seed", range(6))
def test_groups_equal_np_unique_rows(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = 5000
    keys = [rng.integers(0, 40, n), rng.integers(-1, 5, n).astype(np.int32),  # -1: "none", as in stack codes
            rng.integers(-(1 << 40), 1 << 40, n) // (1 << 37),  # few distinct values over a wide span
            rng.integers(0, 3, n)]
    for width in range(1, len(keys) + 1):
        first, group = group_rows(keys[:width])
        assert (first.tolist(), group.tolist()) == _reference(keys[:width])
    assert len(first) > 100  # groups of several rows and single rows both occur
    assert np.bincount(group).max() > 1


def test_columns_too_wide_to_pack_are_renumbered_first() -> None:
    rng = np.random.default_rng(7)
    wide = [rng.choice(np.array([-(1 << 62), -5, 0, 1 << 40, (1 << 62) - 1]), 3000) for _ in range(4)]
    first, group = group_rows(wide)
    assert (first.tolist(), group.tolist()) == _reference(wide)
    assert len(first) > 200


def test_no_rows() -> None:
    first, group = group_rows([np.zeros(0, np.int64), np.zeros(0, np.int32)])
    assert len(first) == 0 and len(group) == 0


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64, np.uint16])
@pytest.mark.parametrize("span", [1, 7, 70_000, 1 << 40])
def test_unique_ints_is_np_unique(dtype: type, span: int) -> None:
    """``arrays.unique_ints`` (counts over a small range, a sort beyond) gives ``np.unique``'s values, inverse and
    counts, dtypes included; -1 ("none") among the values as in name and node columns."""
    rng = np.random.default_rng(span)
    hi = min(span, int(np.iinfo(dtype).max))
    for n in (0, 1, 3000):
        values = rng.integers(0 if dtype is np.uint16 else -1, hi, n, endpoint=True).astype(dtype)
        for inverse in (False, True):
            for counts in (False, True):
                got = unique_ints(values, return_inverse=inverse, return_counts=counts)
                want = np.unique(values, return_inverse=inverse, return_counts=counts)
                got, want = (got, want) if isinstance(want, tuple) else ((got,), (want,))
                assert len(got) == len(want)
                for a, b in zip(got, want):
                    assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)
