"""Allocator snapshots: the reader that runs no code, the columns, and the numbers the Memory view shows.

The snapshots are synthetic (``tests/snapshots.py``: a small model of the caching allocator that writes torch's
exact format, since CPU torch records no CUDA history); every expected number comes from that model's own
bookkeeping or straight from the snapshot dict, never from the code under test.
"""

from __future__ import annotations

import gzip
import os
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tb_plugin.analysis.snapshot_categories import categories
from tb_plugin.analysis.snapshot_history import device_history
from tb_plugin.analysis.snapshot_segments import layout_at
from tb_plugin.analysis.snapshot_timeline import timeline_window
from tb_plugin.analysis.snapshot_view import allocation, live_set, segments_view, snapshot_summary
from tb_plugin.loader.snapshot import SnapshotError, decode_snapshot, decode_snapshot_bytes, load_snapshot
from tb_plugin.loader.unpickle import Refused, load_data
from tb_plugin.model.memory_categories import CATEGORIES
from tests.snapshots import Allocator, OutOfMemory, S, big_history, training


class RunsCode:
    """A pickle that would run a shell command when loaded with pickle.load."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, (f"touch {self.marker}",))


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_a_pickle_that_would_run_code_is_refused_and_runs_nothing(tmp_path: Path, protocol: int) -> None:
    marker = tmp_path / "pwned"
    evil = {"segments": [], "device_traces": [[{"action": "alloc", "frames": [RunsCode(marker)]}]]}
    path = tmp_path / "snapshot.pickle"
    path.write_bytes(pickle.dumps(evil, protocol=protocol))
    with pytest.raises(SnapshotError) as err:
        load_snapshot(str(path))
    assert not marker.exists()
    message = str(err.value)
    assert message.startswith("snapshot.pickle: refused: it asks to import posix.system")
    assert "was not loaded" in message
    pickle.loads(path.read_bytes())  # the check that the file would indeed run the command
    assert marker.exists()


def test_only_plain_data_is_admitted() -> None:
    assert load_data(pickle.dumps({"a": (1, 2.5, "x", None, True), "b": {1, 2}, "c": frozenset([3])}, 2)) == \
        {"a": (1, 2.5, "x", None, True), "b": {1, 2}, "c": frozenset([3])}
    for other in (np.arange(3), Path("/etc/passwd"), bytearray(b"x")):
        with pytest.raises(Refused, match="asks to import"):
            load_data(pickle.dumps({"segments": other}, protocol=2))

    class Persistent(pickle.Pickler):
        def persistent_id(self, obj: Any) -> Any:
            return "outside" if obj == "ref" else None

    import io
    buf = io.BytesIO()
    Persistent(buf).dump({"segments": "ref"})
    with pytest.raises(Refused, match="persistent objects"):
        load_data(buf.getvalue())


@pytest.mark.parametrize(("data", "reason"), [
    (b"", "the file is empty"),
    (pickle.dumps(training().dump())[:-200], "cut short"),
    (pickle.dumps([1, 2, 3]), "not a PyTorch allocator snapshot (a pickled list"),
    (pickle.dumps({"segments": 5}), "'segments' is a int, not a list"),
    (pickle.dumps({"segments": [], "device_traces": [[{"action": "alloc", "addr": "x"}]]}),
     "a 'addr' is 'x', not a whole number"),
    (gzip.compress(b"\x80\x04junk", mtime=0)[:-10], "gzip data is cut short"),  # mtime: one test id in every worker
    (b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03\xff\xff\xff\xff", "gzip data is corrupt"),
])
def test_what_is_not_a_snapshot_says_why_naming_the_file(data: bytes, reason: str) -> None:
    with pytest.raises(SnapshotError) as err:
        decode_snapshot_bytes(data, "mine.pickle")
    assert str(err.value).startswith("mine.pickle: ") and reason in str(err.value), str(err.value)


def cpp_spelling(snapshot: dict[str, Any]) -> dict[str, Any]:
    """What torch's C++ dump (memory_snapshot.cpp) says differently: ``active_pending_free``."""
    for seg in snapshot["segments"]:
        for b in seg["blocks"]:
            if b["state"] == "active_allocated" and b["requested_size"] % 2:
                b["state"] = "active_pending_free"
    return snapshot


@pytest.mark.parametrize("version", ["2.0", "2.1", "2.11"])
@pytest.mark.parametrize("protocol", [2, 4, 5])
def test_every_format_gives_the_allocators_own_numbers(version: str, protocol: int) -> None:
    a = training(version=version, steps=3)
    snap = decode_snapshot_bytes(pickle.dumps(a.dump(), protocol=protocol), "s.pickle")
    h = device_history(snap, 0)
    assert h.n == len(a.trace)
    assert h.live_after.tolist() == a.truth_live  # live bytes after every entry, as the allocator counted them
    for p in range(h.n):
        assert set(h.addr[h.live_mask(p)].tolist()) == a.truth_addresses[p], p
    assert h.peak_bytes == max(a.truth_live)
    assert np.isnan(snap.ev_time_us).all() == (version == "2.0")
    assert ("torch 2.0" in " ".join(snap.notes)) == (version == "2.0")


def requested_of_live_blocks(segments: list[dict[str, Any]]) -> int:
    """Straight from a snapshot's segments (torch 2.1+ spelling): what its active blocks asked for."""
    return sum(b["requested_size"] for s in segments for b in s["blocks"]
               if b["state"] in ("active_allocated", "active_awaiting_free", "active_pending_free"))


def test_live_bytes_at_the_peak_equal_the_live_blocks_of_the_segments_then() -> None:
    a = training(steps=4, batch=2)
    d = a.dump()
    snap = decode_snapshot(d, "s.pickle")
    h = device_history(snap, 0)
    summary = snapshot_summary(snap, 0)
    assert summary["peak"]["position"] == a.peak_entry
    assert summary["peak_live_bytes"] == requested_of_live_blocks(a.peak_segments)
    assert summary["live_bytes"] == requested_of_live_blocks(d["segments"]) == int(h.live_after[-1])
    assert summary["reserved_bytes"] == sum(s["total_size"] for s in d["segments"])
    live = live_set(snap, 0, a.peak_entry)
    assert live["live_bytes"] == summary["peak_live_bytes"]
    assert sum(g["bytes"] for g in live["groups"]) == live["live_bytes"]
    assert sum(c["bytes"] for c in live["categories"]) == live["live_bytes"]


def test_memory_allocated_before_the_history_counts_from_the_start() -> None:
    a = Allocator()
    a.recording = False
    kept = a.malloc(8 << 20, S["param"])
    freed = a.malloc(2 << 20, S["act_fc1"])
    a.recording = True
    x = a.malloc(1 << 20, S["input"])
    a.free(freed, S["grad"])
    a.free(x, S["loss"])
    snap = decode_snapshot(a.dump(), "s.pickle")
    h = device_history(snap, 0)
    assert h.live_before == (8 << 20) + (2 << 20)
    assert h.live_after.tolist() == a.truth_live
    pre = h.start < 0
    assert sorted(h.size[pre].tolist()) == [2 << 20, 8 << 20]
    assert h.stack_is_free[h.size == 2 << 20].all() and not h.stack_is_free[h.size == 8 << 20].any()
    assert int(h.addr[h.size == 8 << 20][0]) == kept
    assert CATEGORIES[categories(snap, 0)[h.size == 2 << 20][0]] == "activation"  # freed in backward (rule 6)


def fragmenting(limit: int = 100 << 20) -> Allocator:
    """4 MiB blocks fill five 20 MiB segments; every other one is freed: 40 MiB free, in 4 MiB holes. A 12 MiB
    request then needs a segment of its own, which the limit refuses: fragmentation."""
    a = Allocator(limit=limit)
    blocks = [a.malloc(4 << 20, S["act_fc1"]) for _ in range(25)]
    for b in blocks[::2]:
        a.free(b, S["grad"])
    with pytest.raises(OutOfMemory):
        a.malloc(12 << 20, S["act_block"])
    return a


def test_an_out_of_memory_from_fragmentation_is_told_with_the_snapshots_own_numbers() -> None:
    a = fragmenting()
    d = a.dump()
    oom_entries = [(i, e) for i, e in enumerate(d["device_traces"][0]) if e["action"] == "oom"]
    (where, entry), = oom_entries
    snap = decode_snapshot(d, "oom.pickle")
    oom = snapshot_summary(snap, 0)["oom"]
    assert oom["position"] == where and oom["requested_bytes"] == entry["size"] == 12 << 20
    assert oom["device_free_bytes"] == entry["device_free"] == a.limit - a.reserved
    assert oom["time_us"] == entry["time_us"]
    assert oom["live_bytes"] == a.truth_live[where] == 12 * (4 << 20)
    assert oom["reserved_bytes"] == 100 << 20
    # 13 of the 25 blocks freed, none beside another in its segment (no segment is wholly free to give back)
    assert oom["free_in_reserved_bytes"] == 13 * (4 << 20) and oom["largest_free_bytes"] == 4 << 20
    assert oom["reason"] == "fragmentation"
    finding = snapshot_summary(snap, 0)["findings"][0]
    assert finding["kind"] == "oom_fragmentation"
    assert "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True" in finding["advice"]
    assert "52.0 MiB of the 100.0 MiB reserved was free, but in blocks of at most 4.0 MiB" in finding["headline"]
    assert snapshot_summary(snap, 0)["focus"] == {"position": where, "why": "oom"}


def test_an_out_of_memory_of_live_data_is_told_so() -> None:
    a = Allocator(limit=60 << 20)
    for _ in range(3):
        a.malloc(18 << 20, S["act_fc1"])
    with pytest.raises(OutOfMemory):
        a.malloc(12 << 20, S["act_block"])
    snap = decode_snapshot(a.dump(), "oom.pickle")
    oom = snapshot_summary(snap, 0)["oom"]
    assert oom["reason"] == "live_data" and oom["requested_bytes"] == 12 << 20
    assert oom["live_bytes"] == 3 * (18 << 20) and oom["free_in_reserved_bytes"] == 0
    assert snapshot_summary(snap, 0)["findings"][0]["kind"] == "oom_live_data"


def test_segments_replayed_to_the_end_agree_with_the_snapshots_own_blocks() -> None:
    for a in (training(steps=3), fragmenting()):
        snap = decode_snapshot(a.dump(), "s.pickle")
        h = device_history(snap, 0)
        exact = layout_at(snap, 0, h.n - 1)
        replayed = layout_at(snap, 0, h.n - 1, replay=True)
        assert exact.exact and not replayed.exact
        assert (exact.reserved, exact.free, exact.largest_free) == (replayed.reserved, replayed.free,
                                                                    replayed.largest_free)
        assert exact.gap_start.tolist() == replayed.gap_start.tolist()


def test_segments_at_a_moment_are_the_allocators_segments_then() -> None:
    a = fragmenting()
    snap = decode_snapshot(a.dump(), "s.pickle")
    h = device_history(snap, 0)
    first_frees = next(i for i, e in enumerate(a.trace) if e["action"] == "free_completed")
    view = segments_view(snap, 0, first_frees - 1)  # 25 blocks live, none freed yet
    assert view["live_bytes"] == 25 * (4 << 20)
    assert view["reserved_bytes"] == 5 * (20 << 20) and view["free_bytes"] == 0
    assert view["segment_count"] == 5 and all(len(s["blocks"]) == 5 for s in view["segments"])
    assert h.reserved_at(-1) == 0


def test_categories_follow_the_stacks() -> None:
    a = training(steps=3)
    snap = decode_snapshot(a.dump(), "s.pickle")
    h = device_history(snap, 0)
    cats = [CATEGORIES[c] for c in categories(snap, 0)]
    by_stack: dict[str, set[str]] = {}
    stack_of = {id(fr): name for name, fr in S.items()}
    allocs = [e for e in a.trace if e["action"] == "alloc"]
    for e in allocs:
        i = int(np.flatnonzero((h.addr == e["addr"]) & (h.start == a.trace.index(e)))[0])
        by_stack.setdefault(stack_of[id(e["frames"])], set()).add(cats[i])
    assert by_stack == {
        "param": {"parameter"}, "input": {"input"}, "act_fc1": {"activation"}, "act_block": {"activation"},
        "loss": {"activation"}, "seed": {"autograd_detail"}, "grad": {"gradient"},
        "opt_state": {"optimizer_state"}, "opt_tmp": {"temporary"},
    }


def test_the_timeline_stacks_to_the_live_bytes_in_every_column() -> None:
    a = training(steps=4, batch=2)
    snap = decode_snapshot(a.dump(), "s.pickle")
    h = device_history(snap, 0)
    w = timeline_window(snap, 0, None, None, 37, 300)
    assert max(w["live_bytes"]) == h.peak_bytes and w["y_max"] == h.peak_bytes
    assert w["at"][int(np.argmax(w["live_bytes"]))] == h.peak
    for c, at in enumerate(w["at"]):
        bands = [b for b in w["bands"] if b["first_column"] <= c < b["end_column"]]
        assert all(b["start"] <= at < b["end"] for b in bands)
        assert sum(b["size"] for b in bands) + w["other_bytes"][c] == w["live_bytes"][c] == a.truth_live[at]
        # each band's bottom is the bands below it (allocation order), to the pixel the steps keep
        below = 0
        for b in sorted(bands, key=lambda b: (b["start"], b["id"])):
            steps = b["steps"]
            offset = next(steps[k + 1] for k in range(len(steps) - 2, -1, -2) if steps[k] <= c)
            assert abs(offset - below) <= w["y_max"] / 300, (c, b["id"])
            below += b["size"]


def test_a_pinned_allocation_is_a_band_and_its_neighbours_are_listed() -> None:
    a = training(steps=2)
    snap = decode_snapshot(a.dump(), "s.pickle")
    h = device_history(snap, 0)
    tiny = int(np.flatnonzero((h.size == 4) & (h.start >= 0))[0])
    assert tiny not in {b["id"] for b in timeline_window(snap, 0, None, None, 50, 100)["bands"]}
    assert tiny in {b["id"] for b in timeline_window(snap, 0, None, None, 50, 100, pin=tiny)["bands"]}
    d = allocation(snap, 0, tiny, int(h.start[tiny]))
    assert d["size_bytes"] == 4 and d["frame"] == "train.py:62 train_step" and d["live_at_position"]
    assert [f["kind"] for f in d["stack"]][:3] == ["cpp", "cpp", "user"]
    live_then = set(np.flatnonzero(h.live_mask(int(h.start[tiny]))).tolist()) - {tiny}
    assert {r["id"] for r in d["below"] + d["above"]} <= live_then
    assert d["below"] and all(r["start"] <= d["start"] for r in d["below"])
    assert d["memory"]["block_bytes"] == 512 and d["memory"]["offset"] >= 0


def test_a_long_history_stays_columns_and_small_answers() -> None:
    d = big_history(20_000)
    snap = decode_snapshot(d, "big.pickle")
    h = device_history(snap, 0)
    assert h.n == len(d["device_traces"][0]) >= 20_000
    w = timeline_window(snap, 0, None, None, 800, 400)
    assert len(w["at"]) == 800 and len(w["bands"]) <= 1500
    assert sum(len(b["steps"]) for b in w["bands"]) < 800 * 1500
    assert max(w["live_bytes"]) == h.peak_bytes
    assert snap.nbytes < 5 << 20


def test_a_snapshot_without_history_still_shows_what_is_live_and_its_segments() -> None:
    """``torch.cuda.memory._snapshot()`` without ``_record_memory_history``: segments only."""
    a = fragmenting()
    d = a.dump()
    d["device_traces"] = [[]]
    snap = decode_snapshot(d, "state.pickle")
    assert "no allocation history" in snap.notes[0]
    summary = snapshot_summary(snap, 0)
    assert summary["positions"] == 0 and summary["oom"] is None and summary["peak"]["position"] == -1
    assert summary["live_bytes"] == summary["peak_live_bytes"] == requested_of_live_blocks(d["segments"])
    live = live_set(snap, 0, -1)
    assert live["live_bytes"] == summary["live_bytes"] and live["count"] == 12
    segments = segments_view(snap, 0, -1)
    assert segments["exact"] and segments["free_bytes"] == 13 * (4 << 20)
    assert timeline_window(snap, 0, None, None, 100)["bands"] == []
