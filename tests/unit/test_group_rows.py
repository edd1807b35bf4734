"""``arrays.group_rows`` gives ``np.unique(axis=0)``'s groups (first rows, group per row, in key order);
``arrays.unique_ints`` and ``arrays.isin_ints`` give ``np.unique``'s and ``np.isin``'s answers."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tb_plugin.model.arrays import group_rows, isin_ints, unique_ints


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


INT_DTYPES = [np.uint8, np.int8, np.int16, np.uint16, np.int32, np.uint32, np.int64]


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(INT_DTYPES), st.integers(-3, 5), st.integers(0, 70_000), st.integers(0, 60),
       st.lists(st.integers(-6, 70_100), max_size=6), st.sampled_from([np.int64, np.int32, np.uint8, np.float64,
                                                                       np.uint64]),
       st.sampled_from(["tuple", "list", "array"]), st.integers(0, 2**32 - 1))
def test_isin_ints_is_np_isin(dtype: type, low: int, span: int, n: int, test: list[int], test_dtype: type,
                              form: str, seed: int) -> None:
    """``arrays.isin_ints`` (a lookup table over small codes, ``np.isin`` beyond) answers what ``np.isin`` does,
    dtype and shape included: codes from -1 ("none") to past the table, tests of any integer dtype, out of range,
    negative, repeated or none, as a tuple (the kinds), a list or an array (string codes)."""
    info = np.iinfo(dtype)
    lo = max(low if info.min < 0 else 0, int(info.min))
    hi = min(lo + span, int(info.max))
    values = np.random.default_rng(seed).integers(lo, hi, n, endpoint=True).astype(dtype)
    codes = np.asarray(test)
    if test_dtype in (np.uint8, np.uint64):
        codes = np.clip(np.abs(codes), 0, 255 if test_dtype is np.uint8 else None)
    codes = codes.astype(test_dtype)
    asked = tuple(codes.tolist()) if form == "tuple" else codes.tolist() if form == "list" else codes
    got, want = isin_ints(values, asked), np.isin(values, asked)
    assert got.dtype == want.dtype and got.shape == want.shape and np.array_equal(got, want)


def test_isin_ints_reads_a_table_for_small_codes() -> None:
    """Kinds (uint8) and string codes (from -1) take the table: no ``np.isin`` call."""
    kinds = np.array([1, 2, 7, 2, 12], dtype=np.uint8)
    names = np.array([-1, 4, 1685, 3, -1], dtype=np.int32)
    import unittest.mock as mock

    with mock.patch.object(np, "isin", side_effect=AssertionError("np.isin called")):
        assert isin_ints(kinds, (2, 12)).tolist() == [False, True, False, True, True]
        assert isin_ints(names, [-1, 3]).tolist() == [True, False, False, True, True]
        assert isin_ints(names, []).tolist() == [False] * 5
