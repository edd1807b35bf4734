"""The memory curve's downsampling keeps, per bucket, the first, the last, and the first lowest and highest point:
the same indices as a loop of ``argmax``/``argmin`` over the buckets, ties and NaN included."""

from __future__ import annotations

import numpy as np
import pytest

from tb_plugin.analysis.memory import _downsample


def _loop(t: np.ndarray, alloc: np.ndarray, max_points: int) -> list[int]:
    if len(t) <= max_points:
        return list(range(len(t)))
    buckets = max(1, max_points // 4)
    edges = np.linspace(t[0], t[-1], buckets + 1)
    b = np.clip(np.searchsorted(edges, t, side="right") - 1, 0, buckets - 1)
    keep: set[int] = set()
    for k in np.unique(b).tolist():
        idx = np.flatnonzero(b == k)
        s, e = int(idx[0]), int(idx[-1]) + 1
        keep |= {s, e - 1, s + int(np.argmax(alloc[s:e])), s + int(np.argmin(alloc[s:e]))}
    return sorted(keep)


@pytest.mark.parametrize("seed", range(4))
def test_downsampling_keeps_the_loops_points(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = 20_000
    t = np.sort(rng.uniform(0, 1e6, n))
    alloc = rng.integers(0, 50, n).astype(np.float64)  # many ties: the first extreme of a bucket must win
    if seed == 3:
        alloc[rng.integers(0, n, 30)] = np.nan
    kept = _downsample(t, alloc, alloc, 400).tolist()
    assert kept == _loop(t, alloc, 400)
    assert 300 < len(kept) < 401
