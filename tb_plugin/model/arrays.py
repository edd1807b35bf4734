"""Gathers over optional indices: the one way to look up ``values[index]`` where ``-1`` (or any negative) means
"none", so an empty table (a trace with no host operators, no steps) never turns a lookup into an IndexError."""

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


def unique_pairs(a: np.ndarray, b: np.ndarray) -> list[tuple[int, int]]:
    """The distinct (a, b) integer pairs, sorted: ``np.unique(axis=0)``'s answer by two 1-D uniques (which sort
    plain integers, many times faster than rows of a 2-D array)."""
    out: list[tuple[int, int]] = []
    for value in np.unique(a).tolist():
        out.extend((int(value), int(other)) for other in np.unique(b[a == value]).tolist())
    return out
