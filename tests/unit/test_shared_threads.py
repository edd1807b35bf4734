"""The Module view asks ``innermost_containing`` only about the threads spans and points share; the answers are
those of asking about everything (a point only ever matches a span of its own thread), with a few threads (compared
one by one) and with many (matched by thread numbers). Its spans come in the host tree's preorder (module frames,
operators), so it skips their sort: here too."""

from __future__ import annotations

import numpy as np
import pytest

from tb_plugin.analysis.modules import _innermost_on_shared_threads
from tb_plugin.model.optree import innermost_containing
from tb_plugin.model.order import preorder


@pytest.mark.parametrize(("span_threads", "point_threads"), [(3, 5), (50, 60), (1, 1)])
def test_same_answers_as_over_all_threads(span_threads: int, point_threads: int) -> None:
    rng = np.random.default_rng(span_threads)
    n, m = 4000, 3000
    span_pid, span_tid = rng.integers(1, 3, n), rng.integers(0, span_threads, n) * 7 + 10**12
    start = rng.uniform(0, 1000, n)
    end = start + rng.choice([0.0, 1.0, 5.0, 50.0], n)
    order = preorder(span_pid, span_tid, start, end - start)
    span_pid, span_tid, start, end = span_pid[order], span_tid[order], start[order], end[order]
    pid, tid = rng.integers(1, 3, m), rng.integers(0, point_threads, m) * 7 + 10**12
    ts = rng.uniform(0, 1000, m)
    got = _innermost_on_shared_threads(span_pid, span_tid, start, end, pid, tid, ts)
    want = innermost_containing(span_pid, span_tid, start, end, pid, tid, ts)
    assert got.tolist() == want.tolist()
    assert (want >= 0).sum() > m // 4  # most points have a span around them
    if point_threads > span_threads:
        assert (want[np.isin(tid, span_tid, invert=True)] == -1).all()
