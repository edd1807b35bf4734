"""model/order.preorder is np.lexsort((-dur, start, tid, pid)) computed faster: it must be that order exactly."""

from __future__ import annotations

import numpy as np
import pytest

from tb_plugin.model.order import preorder, sweep_order, thread_rank


@pytest.mark.parametrize("seed", range(25))
def test_preorder_is_the_four_key_lexsort(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 3000))
    # textual ids are encoded far below zero (model.ids); mixed with small ones the id range is huge
    pids = np.array([562, 0, 7, -9223372036854774978, 2**40])[: int(rng.integers(1, 6))]
    pid = rng.choice(pids, n)
    tid = rng.choice(np.array([562, 639, 7, 1, -9223372036854774975])[: int(rng.integers(1, 6))], n)
    start = np.round(np.sort(rng.uniform(0, 100, n)) + rng.normal(0, 3, n), int(rng.integers(0, 3)))  # ties
    dur = np.round(rng.exponential(5, n) * (rng.random(n) < 0.9), 1)  # equal durations and zeros too
    np.testing.assert_array_equal(preorder(pid, tid, start, dur), np.lexsort((-dur, start, tid, pid)))


def test_thread_rank_orders_pairs_by_pid_then_tid() -> None:
    pid = np.array([5, 5, -9223372036854774978, 5, 9])
    tid = np.array([2, 1, 3, 2, 0])
    # distinct pairs in order: (-9.2e18, 3), (5, 1), (5, 2), (9, 0)
    assert thread_rank(pid, tid).tolist() == [2, 1, 0, 2, 3]


@pytest.mark.parametrize("seed", range(10))
def test_sweep_order_is_the_five_key_lexsort(seed: int) -> None:
    """As innermost_containing sorts spans and points together: time ties by kind, then longest first."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 2000))
    pid = rng.choice(np.array([3, 9]), n)
    tid = rng.choice(np.array([1, 2, -9223372036854774975]), n)
    t = np.round(rng.uniform(0, 50, n), 0)  # many ties
    kind = rng.integers(0, 2, n).astype(np.int8)
    length = np.where(kind == 0, np.round(rng.exponential(3, n), 0), 0.0)
    np.testing.assert_array_equal(sweep_order(pid, tid, t, (-length, kind)),
                                  np.lexsort((-length, kind, t, tid, pid)))


@pytest.mark.parametrize("seed", range(10))
def test_thread_rank_over_runs_is_the_pairs_rank(seed: int) -> None:
    """Ranked by its runs' first rows: equal to ranking every row's pair (runs long and short, ids huge and few)."""
    rng = np.random.default_rng(seed)
    runs = int(rng.integers(0, 300))
    length = rng.integers(1, 6 if seed % 2 else 200, runs)
    pid = np.repeat(rng.choice(np.array([7, 3, -9223372036854774978, 1 << 40]), runs), length)
    tid = np.repeat(rng.choice(np.array([0, 2, 5, -9223372036854774970]), runs), length)
    pairs = np.stack([pid, tid], axis=1)
    expected = np.unique(pairs, axis=0, return_inverse=True)[1].ravel() if len(pid) else np.zeros(0, np.int64)
    assert thread_rank(pid, tid).tolist() == expected.tolist()
