"""The Trace view window's arrows and counters, prepared once per model (``timeline/flows``, ``timeline/counters``):
the same answers as the per-window computation they replace, and hand-checked numbers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tb_plugin.loader import load_trace
from tb_plugin.model import intervals as iv
from tb_plugin.model.optree import launch_rows
from tb_plugin.model.series import areas, integral, max_per_bucket, sample_positions
from tb_plugin.timeline.flows import MAX_FLOWS, flows
from tb_plugin.timeline.index import depth_of_rows, timeline_index
from tb_plugin.timeline.window import window
from tests.conftest import write_trace


def _reference_flows(model: Any, ix: Any, visible: np.ndarray, t0: float) -> tuple[list[list[Any]], bool]:
    """The window's arrows as they were computed before: a mask of every event, tested for each device event."""
    dev = model["device_events"]
    launch = launch_rows(model)
    visible_set = np.zeros(model.n_events, dtype=bool)
    visible_set[visible] = True
    has = launch >= 0
    pick = np.flatnonzero(has & (visible_set[dev["row"]] | visible_set[np.maximum(launch, 0)]))
    truncated = len(pick) > MAX_FLOWS
    pick = pick[:MAX_FLOWS]
    ev = model["events"]
    lookup = {(tr.pid, tr.tid): tr.id for tr in ix.tracks}
    depth = depth_of_rows(model)
    out = []
    for a, b in zip(launch[pick].tolist(), dev["row"][pick].tolist()):
        out.append([a, lookup.get((int(ev["pid"][a]), int(ev["tid"][a])), -1), round(float(ev["ts"][a] - t0), 3),
                    b, lookup.get((int(ev["pid"][b]), int(ev["tid"][b])), -1), round(float(ev["ts"][b] - t0), 3),
                    int(depth[a]), int(depth[b])])
    return out, truncated


def _drawn_rows(answer: dict[str, Any]) -> np.ndarray:
    return np.array([i for tr in answer["tracks"] for lane in tr["lanes"] for i in lane["events"]["id"]], np.int64)


def test_flows_are_the_per_window_masks_answer(h200_transformer: tuple[Path, Any]) -> None:
    _, model = h200_transformer
    ix = timeline_index(model)
    span = ix.t_max - ix.t_min
    arrows = 0
    for frac, at in ((1.0, 0.0), (0.1, 0.3), (0.01, 0.55), (0.001, 0.7)):
        t0 = ix.t_min + at * span
        answer = window(model, t0, t0 + frac * span, 2000)
        drawn = _drawn_rows(answer)
        got, cut = flows(model, ix, drawn, t0)
        want, want_cut = _reference_flows(model, ix, drawn, t0)
        assert cut == want_cut
        assert len(got) == len(want), frac
        for g, w in zip(got, want):  # rows, tracks and depths exact; starts to the rounding (numpy's, Python's)
            assert g[:2] + g[3:5] + g[6:] == w[:2] + w[3:5] + w[6:]
            assert g[2] == pytest.approx(w[2], abs=1e-3) and g[5] == pytest.approx(w[5], abs=1e-3)
        assert answer["flows"] == got
        arrows += len(got)
    assert arrows > 100


def test_one_launch_draws_the_arrows_of_all_its_kernels(tmp_path: Path) -> None:
    """A launch whose correlation two kernels carry (a graph launch) draws both arrows, drawn from either end."""
    def launch(ts: float, corr: int) -> dict[str, object]:
        return {"ph": "X", "cat": "cuda_runtime", "name": "cudaGraphLaunch", "pid": 1, "tid": 1, "ts": ts,
                "dur": 2, "args": {"correlation": corr}}

    def kernel(ts: float, corr: int) -> dict[str, object]:
        return {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": ts, "dur": 1,
                "args": {"correlation": corr, "device": 0, "stream": 7}}

    events = [launch(10, 5), launch(40, 6), kernel(20, 5), kernel(25, 5), kernel(50, 6), kernel(60, 9)]
    model = load_trace(str(write_trace(tmp_path / "w.1.pt.trace.json", events)))
    ix = timeline_index(model)
    ev = model["events"]
    row_at = {float(t): r for r, t in enumerate(ev["ts"].tolist())}
    from_launch, _ = flows(model, ix, np.array([row_at[10.0]]), 0.0)
    assert [(f[2], f[5]) for f in from_launch] == [(10.0, 20.0), (10.0, 25.0)]
    from_kernel, _ = flows(model, ix, np.array([row_at[50.0], row_at[60.0]]), 0.0)
    assert [(f[2], f[5]) for f in from_kernel] == [(40.0, 50.0)]  # the kernel of correlation 9 has no launch
    assert flows(model, ix, np.empty(0, np.int64), 0.0) == ([], False)


def test_series_with_prepared_sums_are_the_plain_ones() -> None:
    # level 2 on [0, 4), 0 on [4, 6), 1 on [6, 10)
    levels = (np.array([0.0, 4.0, 6.0]), np.array([4.0, 6.0, 10.0]), np.array([2.0, 0.0, 1.0]))
    t = np.array([-1.0, 1.0, 5.0, 8.0, 12.0])
    assert integral(levels, t, areas(levels)).tolist() == [0.0, 2.0, 8.0, 10.0, 12.0]
    assert integral(levels, t).tolist() == [0.0, 2.0, 8.0, 10.0, 12.0]
    busy = (np.array([1.0, 5.0]), np.array([3.0, 9.0]))
    edges = np.array([0.0, 2.0, 6.0, 10.0])
    assert iv.lengths_within(busy, edges[:-1], edges[1:], iv.covered_before(busy)).tolist() == [1.0, 2.0, 3.0]
    assert iv.lengths_within(busy, edges[:-1], edges[1:]).tolist() == [1.0, 2.0, 3.0]


def test_max_per_bucket_reads_only_the_windows_samples() -> None:
    ts = np.array([0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0])
    values = np.array([9.0, 1.0, 5.0, 2.0, 8.0, 3.0, 4.0, 7.0])
    # buckets [2.5, 4), [4, 5.5), [5.5, 6.5): value in force at the start, then each sample inside
    got = max_per_bucket(ts, values, np.array([2.5, 4.0, 5.5, 6.5]))
    assert got.tolist() == [5.0, 8.0, 4.0]
    before = max_per_bucket(ts, values, np.array([-2.0, -1.0, 0.5]))
    assert np.isnan(before[0]) and before[1] == 9.0  # no sample yet; then the first sample (and none later)


def test_counters_keep_their_whole_trace_scale(h200_transformer: tuple[Path, Any]) -> None:
    _, model = h200_transformer
    ix = timeline_index(model)
    narrow = window(model, ix.t_min, ix.t_min + (ix.t_max - ix.t_min) / 100, 400)["counters"]
    whole = window(model, ix.t_min, ix.t_max, 400)["counters"]
    assert [c["name"] for c in narrow] == [c["name"] for c in whole]
    for a, b in zip(narrow, whole):
        assert a["max"] == b["max"]
        assert len(a["values"]) == 400
    allocated = next(c for c in whole if c["name"] == "GPU 0 memory allocated")
    assert allocated["max"] == max(v for v in allocated["values"] if v is not None)


def test_a_sample_on_a_bucket_edge_starts_that_bucket() -> None:
    """A sample exactly at a bucket's start is the value in force there (not the one before it), including one of
    several samples at the same time (the last of them holds)."""
    ts = np.array([0.0, 2.0, 2.0, 4.0])
    values = np.array([9.0, 1.0, 3.0, 2.0])
    edges = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    # [1, 2): 9 held; [2, 3): samples 1 and 3 at 2; [3, 4): 3 held; [4, 5): 2 at 4
    assert max_per_bucket(ts, values, edges).tolist() == [9.0, 3.0, 3.0, 2.0]
    before, left = sample_positions(ts, edges)
    assert before.tolist() == [0, 2, 2, 3] and left.tolist() == [1, 1, 3, 3, 4]
    falling = np.array([9.0, 1.0, 0.5, 2.0])  # after the tie the value held is the last sample's
    assert max_per_bucket(ts, falling, edges).tolist() == [9.0, 1.0, 0.5, 2.0]
