"""Gathers over optional indices: the one way to look up ``values[index]`` where ``-1`` (or any negative) means
"none", so an empty table (a trace with no host operators, no steps) never turns a lookup into an IndexError;
and grouping by integer columns without ``np.unique(axis=0)`` (a sort of rows, many times slower than of integers)."""

from __future__ import annotations

from typing import Any

import numpy as np


def take(values: np.ndarray, index: np.ndarray, missing: Any) -> np.ndarray:
    """``values[index]`` where ``index >= 0``, else ``missing``; safe when ``values`` is empty."""
    index = np.asarray(index)
    if len(values) == 0:
        return np.full(index.shape, missing, dtype=np.result_type(values.dtype, np.min_scalar_type(missing)))
    out: np.ndarray = np.where(index >= 0, values[np.clip(index, 0, len(values) - 1)], missing)
    return out


def concat(pieces: list[np.ndarray], dtype: Any) -> np.ndarray:
    """``np.concatenate(pieces)`` as ``dtype``, also of no pieces at all."""
    return np.concatenate(pieces).astype(dtype, copy=False) if pieces else np.empty(0, dtype)


def unique_pairs(a: np.ndarray, b: np.ndarray) -> list[tuple[int, int]]:
    """The distinct (a, b) integer pairs, sorted: ``np.unique(axis=0)``'s answer by two 1-D uniques (which sort
    plain integers, many times faster than rows of a 2-D array)."""
    out: list[tuple[int, int]] = []
    for value in np.unique(a).tolist():
        out.extend((int(value), int(other)) for other in np.unique(b[a == value]).tolist())
    return out


_PACKED = 1 << 62


def group_rows(keys: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Group rows by integer key columns: (each group's first row, group id per row), groups in the order of
    their keys: ``np.unique(np.stack(keys, axis=1), axis=0, return_index=True, return_inverse=True)[1:]``.

    The columns, each shifted to start at 0, are packed into one integer per row (a key times the next column's
    span plus that column keeps the order); where the product of spans would pass 62 bits, the key so far and
    then the column are first renumbered densely (``np.unique``'s inverse, which keeps the order too).
    """
    n = len(keys[0])
    if n == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    key = np.zeros(n, dtype=np.int64)
    key_span = 1
    for values in keys:
        column = values.astype(np.int64)
        lo = int(column.min())
        span = int(column.max()) - lo + 1
        if key_span * span >= _PACKED:
            key, key_span = _dense(key)
            if key_span * span >= _PACKED:
                (column, span), lo = _dense(column), 0
        key = key * span + (column - lo)
        key_span *= span
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    return first.astype(np.int64), inverse.reshape(-1).astype(np.int64)


def _dense(values: np.ndarray) -> tuple[np.ndarray, int]:
    """``values`` renumbered 0, 1, … in their order, and how many distinct there are."""
    distinct, inverse = np.unique(values, return_inverse=True)
    return inverse.reshape(-1).astype(np.int64), len(distinct)


def unique_ints(values: np.ndarray, return_inverse: bool = False, return_counts: bool = False) -> Any:
    """``np.unique(values, return_inverse=…, return_counts=…)`` of a 1-D integer array, exactly (the same values,
    dtypes and order), without sorting where the values span a small range (string codes, node and step numbers):
    a count per value of the range, whose running total numbers the distinct values. A sort of the millions of
    names of a big trace took a tenth of a second each, and the diagnosis asks for dozens."""
    v = np.asarray(values)
    lo = int(v.min()) if v.ndim == 1 and len(v) and v.dtype.kind in "iu" else 0
    span = int(v.max()) - lo + 1 if v.ndim == 1 and len(v) and v.dtype.kind in "iu" else -1
    if span < 0 or span > max(2 * len(v), 1 << 16):
        unique: Any = np.unique  # its overloads want literal flags
        return unique(v, return_inverse=return_inverse, return_counts=return_counts)
    shifted = (v - lo) if v.dtype.kind == "i" and v.dtype.itemsize == 8 else v.astype(np.int64) - lo
    counts = np.bincount(shifted, minlength=span)
    present = counts > 0
    out: list[np.ndarray] = [(np.flatnonzero(present) + lo).astype(v.dtype)]
    if return_inverse:
        out.append((np.cumsum(present) - 1)[shifted])
    if return_counts:
        out.append(counts[present])
    return out[0] if len(out) == 1 else tuple(out)


def isin_ints(values: np.ndarray, test: Any) -> np.ndarray:
    """``np.isin(values, test)``, exactly, for a 1-D integer array: where its values are small codes (an event's kind,
    a string code, -1 for none), one lookup in a table of the codes tested instead of ``np.isin``'s range checks and
    int64 temporaries of the whole column: 1.4-1.8× its speed over the 5.3 M events of a 2 GB trace (warm), whose
    Overview asks it 80 times."""
    v, t = np.asarray(values), np.asarray(test)
    if v.ndim != 1 or v.dtype.kind not in "iu" or (t.size and (t.dtype.kind not in "iu" or t.dtype == np.uint64)):
        found: np.ndarray = np.isin(v, t)
        return found
    codes = t.ravel().astype(np.int64)
    if not len(codes):  # no string matched a name predicate: often
        return np.zeros(v.shape, dtype=bool)
    if v.dtype == np.uint8:  # the kinds: their range known, no pass over them to find it
        lo, hi = 0, 255
    else:
        lo, hi = (int(v.min()), int(v.max())) if len(v) else (0, -1)
    if lo < -1 or hi >= max(2 * len(v), 1 << 16):
        wide: np.ndarray = np.isin(v, t)
        return wide
    table = np.zeros(hi + 2, dtype=bool)  # the last slot is -1's: ``np.take`` wraps it there
    table[codes[(codes >= -1) & (codes <= hi)]] = True
    looked: np.ndarray = np.take(table, v, mode="wrap")
    return looked
