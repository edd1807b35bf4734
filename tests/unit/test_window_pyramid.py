"""The Trace view's multi-resolution lane summaries (``timeline/pyramid``) and the merge of sub-pixel events:
hand-checked numbers, and the same answers as a plain reference where the data are random."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tb_plugin.timeline import index as index_module
from tb_plugin.timeline import window as window_module
from tb_plugin.timeline.index import most_common
from tb_plugin.timeline.lanes import Names as _Names
from tb_plugin.timeline.lanes import _boxes
from tb_plugin.timeline.pyramid import Level, LongEvents, _coarser, _long_events, pyramid_of


def test_most_common_name_per_group_smallest_code_of_equals() -> None:
    group = np.array([0, 0, 0, 1, 1, 2, 3, 3, 3, 3])
    name = np.array([5, 3, 5, 7, 2, 9, 4, 4, 1, 1], dtype=np.int32)
    top, count = most_common(group, name)
    # group 0: 5 twice; group 1: 7 and 2 once each -> 2; group 2: 9; group 3: 4 and 1 twice each -> 1
    assert top.tolist() == [5, 2, 9, 1]
    assert count.tolist() == [2, 1, 1, 2]


def test_most_common_matches_a_counter_on_random_groups() -> None:
    rng = np.random.default_rng(7)
    group = np.sort(rng.integers(0, 300, 5000))
    group = np.unique(group, return_inverse=True)[1]  # no gaps
    name = rng.integers(0, 12, 5000).astype(np.int32)
    top, count = most_common(group, name)
    for g in range(int(group.max()) + 1):
        counts = Counter(name[group == g].tolist())
        most = max(counts.values())
        assert (top[g], count[g]) == (min(n for n, c in counts.items() if c == most), most)


def test_a_coarser_level_merges_four_buckets() -> None:
    level = Level(shift=0, bucket=np.array([0, 1, 2, 5, 8, 11]), count=np.array([3, 1, 4, 2, 6, 6]),
                  busy=np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0]), top=np.array([10, 11, 12, 13, 14, 15], np.int32),
                  top_count=np.array([2, 1, 3, 2, 4, 4]))
    up = _coarser(level)
    # buckets 0-3 -> 0, 4-7 -> 1, 8-11 -> 2
    assert up.shift == 2
    assert up.bucket.tolist() == [0, 1, 2]
    assert up.count.tolist() == [8, 2, 12]
    assert up.busy.tolist() == [6.0, 4.0, 11.0]
    # the name of the bucket with the highest top_count; of equals (buckets 8 and 11) the earliest
    assert up.top.tolist() == [12, 13, 14]
    assert up.top_count.tolist() == [3, 2, 4]


def _brute_long(long: LongEvents, px: float, t0: float, t1: float) -> list[int]:
    keep = (long.dur >= px) & (long.start < t1) & (long.start + long.dur > t0)
    return long.pos[keep].tolist()  # type: ignore[no-any-return]


def test_long_events_of_a_window_either_way_round() -> None:
    rng = np.random.default_rng(3)
    start = np.sort(rng.uniform(0, 1000, 400))
    dur = rng.exponential(5.0, 400).astype(np.float32)
    ix: Any = type("Ix", (), {"start": start, "dur": dur})()
    long = _long_events(ix, np.arange(400))
    assert (np.diff(long.dur_desc) >= 0).all()
    for px, t0, t1 in ((0.1, 100.0, 120.0), (20.0, 0.0, 1000.0), (8.0, 500.0, 900.0), (1.0, -5.0, 3.0),
                       (50.0, 10.0, 11.0)):
        assert long.at_least(px, t0, t1).tolist() == _brute_long(long, px, t0, t1)
    # hand-checked: [0, 10) long 10, [5, 6) long 1, [20, 50) long 30
    hand = _long_events(type("Ix", (), {"start": np.array([0.0] * 7 + [0.0, 5.0, 20.0]),
                                        "dur": np.array([0.0] * 7 + [10.0, 1.0, 30.0], np.float32)})(),
                        np.array([7, 8, 9]))
    assert hand.at_least(5.0, 8.0, 25.0).tolist() == [7, 9]
    assert hand.at_least(15.0, 0.0, 100.0).tolist() == [9]
    assert hand.at_least(0.5, 10.0, 20.0).tolist() == []  # [0, 10) ends at 10, [20, 50) starts at 20


def test_boxes_merge_runs_of_adjacent_pixels() -> None:
    model: Any = type("M", (), {"strings": ["a", "b", "c"]})()
    names = _Names(model)
    # px 1 from t0 0: events in pixels 0, 1, 1 (ends in 2), then a gap, then 5 and 5
    start = np.array([0.2, 1.0, 1.5, 5.0, 5.5])
    dur = np.array([0.5, 0.25, 0.75, 0.25, 0.25])
    name = np.array([0, 1, 1, 2, 0], dtype=np.int32)
    boxes, lanes = _boxes(start, dur, name, 0.0, 1.0, names, hit=np.array([True, False, True, False, False]))
    assert lanes.tolist() == [0, 0]
    assert boxes["count"] == [3, 2]
    assert boxes["t"] == [0.2, 5.0]
    assert boxes["d"] == [2.05, 1.0]  # 0.2 .. 2.25; 5.0 .. 5.75 is less than a pixel: one pixel
    assert boxes["busy"] == [round(1.5 / 2.05, 3), 0.5]
    assert [names.table()[i] for i in boxes["n"]] == ["b", "a"]  # b twice; a and c once each: the smaller code
    assert boxes["hl"] == [2, 0]


def test_boxes_of_several_lanes_never_span_two() -> None:
    model: Any = type("M", (), {"strings": ["a", "b", "c"]})()
    names = _Names(model)
    # lane 0: pixels 0 and 1 (one box); lane 1 (in start order): an event long before the window (a lane window
    # holds such events after a long one), which without the lane's own reach would join lane 0's box, then pixels
    # 2 and 3 (adjacent: one box)
    start = np.array([0.2, 1.0, -50.0, 2.5, 3.0])
    dur = np.array([0.5, 0.5, 0.5, 0.25, 0.5])
    name = np.array([0, 0, 2, 1, 2], dtype=np.int32)
    boxes, lanes = _boxes(start, dur, name, 0.0, 1.0, names, lane=np.array([0, 0, 1, 1, 1]))
    assert lanes.tolist() == [0, 1, 1]
    assert boxes["count"] == [2, 1, 2]
    assert boxes["t"] == [0.2, -50.0, 2.5]
    assert boxes["d"] == [1.3, 1.0, 1.0]
    alone = [_boxes(start[:2], dur[:2], name[:2], 0.0, 1.0, names)[0],
             _boxes(start[2:], dur[2:], name[2:], 0.0, 1.0, names)[0]]
    assert [alone[0]["count"] + alone[1]["count"], alone[0]["t"] + alone[1]["t"]] == [boxes["count"], boxes["t"]]


@pytest.fixture()
def summarised(h200_transformer: tuple[Path, Any], monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any]:
    """The transformer trace's index with every lane of more than 10 events summarised, used by the window."""
    _, model = h200_transformer
    monkeypatch.setattr(index_module, "SUMMARY_MIN_EVENTS", 10)
    monkeypatch.setattr(window_module, "SUMMARY_FACTOR", 0)
    ix = index_module.timeline_index.__wrapped__(model)
    monkeypatch.setattr(window_module, "timeline_index", lambda _m: ix)
    return model, ix


def test_pyramid_levels_keep_every_event(summarised: tuple[Any, Any]) -> None:
    model, ix = summarised
    lane = max(ix.summaries, key=lambda k: len(ix.summaries[k].bucket))
    pyramid = pyramid_of(model, ix, lane)
    assert pyramid is not None and pyramid is pyramid_of(model, ix, lane)  # built once
    events = int(ix.lane_offsets[lane + 1] - ix.lane_offsets[lane])
    for level in pyramid.levels:
        assert int(level.count.sum()) == events
        assert float(level.busy.sum()) == pytest.approx(float(pyramid.levels[0].busy.sum()))
    assert len(pyramid.levels[-1].bucket) == 1
    # the level a window reads: buckets at most a pixel wide, the coarsest such
    assert pyramid.level_for(ix.bucket_us, ix.bucket_us * 5).shift == 2
    assert pyramid.level_for(ix.bucket_us, ix.bucket_us * 3.9).shift == 0


def test_coarse_windows_account_for_every_event_at_every_level(summarised: tuple[Any, Any]) -> None:
    model, ix = summarised
    for width in (30, 120, 500, 2000):  # whole-trace windows read levels 3 down to 0 of the 32768 buckets
        answer = window_module.window(model, ix.t_min, ix.t_max, width)
        px = answer["px_us"]
        shown = sum(len(lane["events"]["id"]) for tr in answer["tracks"] for lane in tr["lanes"])
        merged = sum(sum(lane["boxes"]["count"]) for tr in answer["tracks"] for lane in tr["lanes"])
        assert shown + merged == len(ix.start), width
        assert shown == int((ix.dur.astype(np.float64) >= px).sum())
        for tr in answer["tracks"]:
            for lane in tr["lanes"]:
                t, d = lane["boxes"]["t"], lane["boxes"]["d"]
                assert all(0 <= x < width * px for x in t)
                assert all(a + b <= c + 1e-6 for a, b, c in zip(t, d, t[1:]))  # boxes never overlap


def test_a_window_far_wider_than_the_trace_still_counts_every_event(summarised: tuple[Any, Any]) -> None:
    """Any finite t0, t1 is a valid window: bucket numbers past int64 once wrapped (a RuntimeWarning, then an empty
    answer); they are clipped, so the whole trace falls in the window's boxes."""
    model, ix = summarised
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        answer = window_module.window(model, -1e300, 1e300, 2000)
    shown = sum(len(lane["events"]["id"]) for tr in answer["tracks"] for lane in tr["lanes"])
    merged = sum(sum(lane["boxes"]["count"]) for tr in answer["tracks"] for lane in tr["lanes"])
    assert shown + merged == len(ix.start) and merged > 0


def test_mid_size_lanes_are_summarised_here(h200_transformer: tuple[Path, Any],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A lane the index leaves alone (fewer than SUMMARY_MIN_EVENTS events) gets its summary from the pyramid
    module once it holds more than MID_LANE_EVENTS: the index's buckets, each with its events' count, busy time and
    most common name, counted here one event at a time."""
    from tb_plugin.timeline import pyramid as pyramid_module

    _, model = h200_transformer
    ix = index_module.timeline_index.__wrapped__(model)
    sizes = np.diff(ix.lane_offsets)
    lane = int(np.argmax(sizes))
    assert lane not in (ix.summaries or {})
    assert pyramid_of(model, ix, lane) is None  # 1,755 events: below MID_LANE_EVENTS
    monkeypatch.setattr(pyramid_module, "MID_LANE_EVENTS", 1000)
    pyramid = pyramid_of(model, ix, lane)
    assert pyramid is not None
    level = pyramid.levels[0]
    lo, hi = int(ix.lane_offsets[lane]), int(ix.lane_offsets[lane + 1])
    per_bucket: dict[int, list[tuple[float, int]]] = {}
    for start, dur, name in zip(ix.start[lo:hi].tolist(), ix.dur[lo:hi].tolist(), ix.name[lo:hi].tolist()):
        bucket = min(int((start - ix.t_min) / ix.bucket_us), index_module.SUMMARY_BUCKETS - 1)
        per_bucket.setdefault(bucket, []).append((dur, name))
    assert level.bucket.tolist() == sorted(per_bucket)
    assert level.count.tolist() == [len(per_bucket[b]) for b in sorted(per_bucket)]
    assert level.busy == pytest.approx([sum(d for d, _ in per_bucket[b]) for b in sorted(per_bucket)])
    for b, top, top_count in zip(level.bucket.tolist(), level.top.tolist(), level.top_count.tolist()):
        counts = Counter(n for _, n in per_bucket[b])
        assert (top, top_count) == (min(n for n, c in counts.items() if c == max(counts.values())),
                                    max(counts.values()))
    wide = [lo + i for i, d in enumerate(ix.dur[lo:hi].tolist()) if d >= ix.bucket_us]
    assert pyramid.long.pos.tolist() == wide


def _resolved(lanes: list[dict[str, list[Any]]], names: Any) -> list[dict[str, list[Any]]]:
    table = names.table()
    return [{key: ([table[i] for i in values] if key == "n" else values) for key, values in lane.items()}
            for lane in lanes]


@pytest.mark.parametrize("category", [None, "Kernel", "CPU Exec"])
def test_lanes_together_are_each_lane_alone(summarised: tuple[Any, Any], category: str | None) -> None:
    """All lanes of a window in one numpy pass answer what each lane answers on its own (coarse lanes from their
    pyramids at several levels, fine lanes event by event), marks of a highlighted category included."""
    from tb_plugin.timeline.lanes import coarse_lanes, fine_lanes
    from tb_plugin.timeline.window import _lane_window, marked_events

    model, ix = summarised
    marked = marked_events(model, category) if category else None
    span = ix.t_max - ix.t_min
    for t0, t1, width in ((ix.t_min, ix.t_max, 100), (ix.t_min + 0.2 * span, ix.t_min + 0.5 * span, 700),
                          (ix.t_min + 0.6 * span, ix.t_min + 0.7 * span, 2000),  # levels 4, 1, 0
                          (ix.t_min + 0.4 * span, ix.t_min + 0.41 * span, 2000)):  # finer than the buckets
        px = (t1 - t0) / width
        ranges = [w for w in (_lane_window(ix, lane, t0, t1) for lane in range(len(ix.lane_depth))) if w[1] > w[0]]
        together = _Names(model)
        events, boxes, _ = fine_lanes(ix, ranges, t0, px, together, marked)
        for k, (lo, hi) in enumerate(ranges):
            alone = _Names(model)
            e1, b1, _ = fine_lanes(ix, [(lo, hi)], t0, px, alone, marked)
            assert _resolved(e1, alone) == _resolved(events[k:k + 1], together)
            assert _resolved(b1, alone) == _resolved(boxes[k:k + 1], together)
        if px < ix.bucket_us:
            continue
        lanes = [(pyramid_of(model, ix, lane), (int(ix.lane_offsets[lane]), int(ix.lane_offsets[lane + 1])))
                 for lane in sorted(ix.summaries)]
        together = _Names(model)
        events, boxes, _ = coarse_lanes(ix, lanes, t0, t1, px, width, together, marked)  # type: ignore[arg-type]
        assert sum(len(b["count"]) for b in boxes) > len(lanes)
        for k, lane in enumerate(lanes):
            alone = _Names(model)
            e1, b1, _ = coarse_lanes(ix, [lane], t0, t1, px, width, alone, marked)  # type: ignore[list-item]
            assert _resolved(e1, alone) == _resolved(events[k:k + 1], together)
            assert _resolved(b1, alone) == _resolved(boxes[k:k + 1], together)
            if marked is not None:
                assert len(b1[0]["hl"]) == len(b1[0]["count"])
