"""``optree.launch_rows`` (the launch of each device event without building the host tree, which the Trace view's
first window and the GPU views use) is exactly the host tree's join, on every real trace and on a hand-checked one
with repeated and missing correlation ids."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tb_plugin.analysis.launches import device_work
from tb_plugin.loader import load_trace
from tb_plugin.model import optree
from tb_plugin.model.arrays import take, unique_pairs
from tests.conftest import distinct_trace_files, parsed_trace, write_trace

TRACES = [str(p) for p in distinct_trace_files()]


@pytest.mark.parametrize("path", TRACES, ids=lambda p: Path(p).parent.name + "/" + Path(p).name[:24])
def test_launch_rows_are_the_host_trees_join(path: str) -> None:
    model = parsed_trace(path)
    tree = optree.build_host_tree(model)  # not memoised: launch_rows must not read it
    want = take(tree.rows, tree.device_launch, -1)
    got = optree.launch_rows(model)
    np.testing.assert_array_equal(got, want)
    assert len(model["device_events"]["row"]) == 0 or (got >= 0).mean() > 0.5  # most device events have launches
    work = device_work(model)  # its launch times are the launch events' own
    np.testing.assert_array_equal(work.launch_start, take(tree.start, tree.device_launch, np.nan))
    np.testing.assert_array_equal(work.launch_end, take(tree.end, tree.device_launch, np.nan))


def test_repeated_and_missing_correlations(tmp_path: Path) -> None:
    def launch(ts: float, corr: int, tid: int = 1) -> dict[str, object]:
        return {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": tid, "ts": ts,
                "dur": 2, "args": {"correlation": corr}}

    def kernel(ts: float, corr: int) -> dict[str, object]:
        return {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": ts, "dur": 1,
                "args": {"correlation": corr, "device": 0, "stream": 7}}

    # correlation 5 is launched twice (thread 2 first, then thread 1 earlier in time: the tree's order is by
    # thread, so thread 1's wins); 9 has no launch; the last kernel has no correlation at all
    events = [launch(10, 5, tid=2), launch(3, 5, tid=1), launch(20, 6), kernel(30, 5), kernel(31, 6), kernel(32, 9),
              {**kernel(33, 0), "args": {"device": 0, "stream": 7}}]
    model = load_trace(str(write_trace(tmp_path / "w.1.pt.trace.json", events)))
    ev = model["events"]
    got = optree.launch_rows(model)
    assert [float(ev["ts"][r]) if r >= 0 else None for r in got] == [3.0, 20.0, None, None]
    tree = optree.build_host_tree(model)
    np.testing.assert_array_equal(got, take(tree.rows, tree.device_launch, -1))


@pytest.mark.parametrize("seed", range(20))
def test_unique_pairs_are_numpys_unique_rows(seed: int) -> None:
    """The devices of the memory counters and the streams of the GPU views: np.unique(axis=0)'s pairs, sorted."""
    rng = np.random.default_rng(seed)
    a = rng.integers(-2, 4, int(rng.integers(0, 60)))
    b = rng.integers(-3, 9, len(a))
    want = [tuple(r) for r in np.unique(np.stack([a, b], axis=1), axis=0).tolist()] if len(a) else []
    assert unique_pairs(a, b) == want
