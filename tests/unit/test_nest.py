"""The vectorised nesting (model/optree.nest) against the reference stack walk, interval for interval.

``nest`` nests every thread at once with numpy pointer jumps and walks only an input that needs too many jumps; the
two must agree on every input: real traces (host trees and the Trace view's drawn events) and synthetic ones built to hit the edges (equal
starts, zero durations, children a fraction of the tolerance past their parent, partial overlaps).
"""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from tb_plugin.loader import load_trace
from tb_plugin.model import optree
from tb_plugin.model.kinds import Kind
from tb_plugin.model.nesting import _nest_jumps, _nest_walk, nest
from tb_plugin.model.optree import _innermost_walk, innermost_containing
from tests.conftest import parsed_trace

DATA = Path(__file__).resolve().parents[1] / "data"
TRACES = sorted(str(p) for p in DATA.rglob("*.pt.trace.json*"))


def walk_all(pid: np.ndarray, tid: np.ndarray, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The reference: the stack walk over each thread."""
    parent = np.full(len(start), -1, dtype=np.int64)
    depth = np.zeros(len(start), dtype=np.int32)
    bounds = np.flatnonzero(np.concatenate([[True], (pid[1:] != pid[:-1]) | (tid[1:] != tid[:-1]), [True]]))
    for lo, hi in itertools.pairwise(bounds):
        p, d = _nest_walk(start[lo:hi], end[lo:hi])
        parent[lo:hi] = np.where(p >= 0, p + lo, -1)
        depth[lo:hi] = d
    return parent, depth


def sorted_intervals(pid: np.ndarray, tid: np.ndarray, start: np.ndarray, dur: np.ndarray) -> tuple[np.ndarray, ...]:
    order = np.lexsort((-dur, start, tid, pid))
    return pid[order], tid[order], start[order], start[order] + dur[order]


def random_forest(rng: np.random.Generator, n: int, jitter: float = 0.0,
                  same: float = 0.3) -> tuple[np.ndarray, np.ndarray]:
    """About ``n`` properly nested intervals (children disjoint, inside their parent) in µs with ns precision; a
    fraction ``same`` of children start with their parent or are instants; ``jitter`` moves each end by up to that
    many µs (past the 1 ns tolerance: partial overlaps)."""
    start, dur = [], []
    todo = [(0.0, 1000.0)]
    while todo and len(start) < n:
        lo, hi = todo.pop(int(rng.integers(len(todo))))
        start.append(lo)
        dur.append(max(0.0, round(hi - lo + jitter * rng.uniform(-1, 1), 4)))
        children = int(rng.integers(0, 4)) if hi - lo > 0.5 else 0
        cuts = np.round(np.sort(rng.uniform(lo, hi, 2 * children)), 3)
        for a, b in zip(cuts[0::2], cuts[1::2]):
            if rng.random() < same:
                a = lo if rng.random() < 0.5 else b  # starts with its parent, or an instant
            todo.append((float(a), float(b)))
    return np.array(start), np.array(dur)


@pytest.mark.parametrize("seed", range(40))
def test_random_nested_and_jittered_threads_match_the_walk(seed: int) -> None:
    rng = np.random.default_rng(seed)
    pids, tids, starts, durs = [], [], [], []
    for thread in range(4):
        jitter = [0.0, 0.0004, 0.002, 0.5][thread]  # exact, within tolerance, past it, partial overlaps
        s, d = random_forest(rng, int(rng.integers(40, 400)), jitter)
        pids.append(np.full(len(s), 7))
        tids.append(np.full(len(s), thread))
        starts.append(s)
        durs.append(d)
    pid, tid, start, end = sorted_intervals(*(np.concatenate(x) for x in (pids, tids, starts, durs)))
    got, want = nest(pid, tid, start, end), walk_all(pid, tid, start, end)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])


def test_exactly_nested_threads_take_the_vectorised_path() -> None:
    rng = np.random.default_rng(1)
    s, d = random_forest(rng, 500, same=0.05)
    _, _, start, end = sorted_intervals(np.zeros(len(s)), np.zeros(len(s)), s, d)
    found = _nest_jumps(start, end, np.zeros(len(start), dtype=np.int64))
    assert found is not None
    np.testing.assert_array_equal(found[0], _nest_walk(start, end)[0])
    np.testing.assert_array_equal(found[1], _nest_walk(start, end)[1])
    assert found[1].max() >= 3  # a real tree, not a flat list


def test_hand_checked_edges() -> None:
    # A [0, 10] holds B [0, 4] (same start, longer first) and C [4, 10.0005] (past A's end by less than the
    # tolerance: still inside); D [4, 4] is an instant inside C; E [9, 12] partially overlaps C and A: no container.
    start = np.array([0.0, 0.0, 4.0, 4.0, 9.0] + [20.0 + k for k in range(40)])
    end = np.array([10.0, 4.0, 10.0005, 4.0, 12.0] + [20.5 + k for k in range(40)])
    pid = np.zeros(len(start))
    parent, depth = nest(pid, pid, start, end)
    assert parent[:5].tolist() == [-1, 0, 0, 2, -1]
    assert depth[:5].tolist() == [0, 1, 1, 2, 0]
    assert (parent[5:] == -1).all() and (depth[5:] == 0).all()


@pytest.mark.parametrize("path", TRACES, ids=lambda p: Path(p).parent.name + "/" + Path(p).name[:24])
def test_real_traces_match_the_walk(path: str) -> None:
    model = parsed_trace(path)
    ev = model["events"]
    host = np.isin(ev["kind"], optree.TREE_KINDS) & np.isfinite(ev["ts"])
    drawn = np.isfinite(ev["ts"]) & ~np.isin(ev["kind"], (Kind.MEMORY, Kind.TRACE))
    for rows in (np.flatnonzero(host), np.flatnonzero(drawn)):
        dur = np.nan_to_num(ev["dur"][rows], nan=0.0, posinf=0.0, neginf=0.0).clip(min=0.0)
        pid, tid, start, end = sorted_intervals(ev["pid"][rows], ev["tid"][rows], ev["ts"][rows], dur)
        got, want = nest(pid, tid, start, end), walk_all(pid, tid, start, end)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])


@pytest.mark.parametrize("path", [p for p in TRACES if "/h200/" in p][:3], ids=lambda p: Path(p).parent.name)
def test_recent_traces_are_nested_with_numpy(path: str) -> None:
    """Host trees and the Trace view's drawn events, python functions included (they overlap operators partially),
    are nested by the pointer jumps: no thread is walked."""
    model = parsed_trace(path)
    ev = model["events"]
    drawn = np.flatnonzero(np.isfinite(ev["ts"]) & ~np.isin(ev["kind"], (Kind.MEMORY, Kind.TRACE)))
    host = np.flatnonzero(np.isin(ev["kind"], optree.TREE_KINDS) & np.isfinite(ev["ts"]))
    for rows in (host, drawn):
        dur = np.nan_to_num(ev["dur"][rows], nan=0.0).clip(min=0.0)
        pid, tid, start, end = sorted_intervals(ev["pid"][rows], ev["tid"][rows], ev["ts"][rows], dur)
        thread = np.cumsum(np.concatenate([[True], (pid[1:] != pid[:-1]) | (tid[1:] != tid[:-1])]))
        assert len(rows) > 1000 and _nest_jumps(start, end, thread) is not None


@pytest.mark.parametrize("seed", range(30))
def test_innermost_containing_matches_the_sweep(seed: int) -> None:
    """Spans nested, overlapping, zero-length and repeated, on three threads; points on span edges, inside, outside
    and on a thread without spans: the numpy answer is the stack sweep's, point for point."""
    rng = np.random.default_rng(seed)
    starts, durs = [], []
    for thread in range(3):
        s, d = random_forest(rng, int(rng.integers(5, 300)), jitter=[0.0, 0.0, 3.0][thread])
        starts.append(s)
        durs.append(d)
    s_pid = np.concatenate([np.full(len(s), 1) for s in starts])
    s_tid = np.concatenate([np.full(len(s), k) for k, s in enumerate(starts)])
    s_start, s_dur = np.concatenate(starts), np.concatenate(durs)
    dup = rng.integers(0, len(s_start), 10)  # exact duplicates
    s_pid, s_tid = np.append(s_pid, s_pid[dup]), np.append(s_tid, s_tid[dup])
    s_start, s_dur = np.append(s_start, s_start[dup]), np.append(s_dur, s_dur[dup])
    perm = rng.permutation(len(s_start))  # any input order
    s_pid, s_tid, s_start, s_end = s_pid[perm], s_tid[perm], s_start[perm], s_start[perm] + s_dur[perm]
    n = 600
    p_tid = rng.integers(0, 4, n)  # thread 3 has no spans
    edges = np.concatenate([s_start, s_end])
    p_ts = np.where(rng.random(n) < 0.4, rng.choice(edges, n), rng.uniform(-10, 1010, n))
    p_pid = np.full(n, 1)
    got = innermost_containing(s_pid, s_tid, s_start, s_end, p_pid, p_tid, p_ts)
    want = _innermost_walk(s_pid, s_tid, s_start, s_end, p_pid, p_tid, p_ts)
    # equal spans (duplicates) are interchangeable: compare the spans' intervals, not their indices
    for answer in (got, want):
        assert answer.dtype == np.int64
    assert ((got >= 0) == (want >= 0)).all()
    both = want >= 0
    np.testing.assert_array_equal(s_start[got[both]], s_start[want[both]])
    np.testing.assert_array_equal(s_end[got[both]], s_end[want[both]])
    assert both.sum() > n // 4 and (~both).sum() > 10


@pytest.mark.parametrize("path", [p for p in TRACES if "/h200/" in p][:3], ids=lambda p: Path(p).parent.name)
def test_innermost_operator_of_each_kernel_launch_matches_the_sweep(path: str) -> None:
    """As the Module and Memory views ask: which host operator encloses each runtime call."""
    model = parsed_trace(path)
    tree = optree.host_tree(model)
    ev = model["events"]
    ops = np.flatnonzero(tree.kind == Kind.CPU_OP)
    calls = np.flatnonzero(tree.kind == Kind.RUNTIME)
    args = (ev["pid"][tree.rows[ops]], ev["tid"][tree.rows[ops]], tree.start[ops], tree.end[ops],
            ev["pid"][tree.rows[calls]], ev["tid"][tree.rows[calls]], tree.start[calls])
    got, want = innermost_containing(*args), _innermost_walk(*args)
    np.testing.assert_array_equal(got, want)
    assert (got >= 0).mean() > 0.9
    # the tree's operators are in its preorder: the spans' sort is skipped, the answer is the same (memory records)
    np.testing.assert_array_equal(innermost_containing(*args, ordered=True), want)
    mem = model["memory"]["row"]
    assert len(mem)
    points = (ev["pid"][mem], ev["tid"][mem], ev["ts"][mem])
    np.testing.assert_array_equal(innermost_containing(*args[:4], *points, ordered=True),
                                  _innermost_walk(*args[:4], *points))


def random_overlapping(seed: int, at_least: int) -> tuple[np.ndarray, np.ndarray]:
    """One thread of ``at_least``..299 intervals with no structure, sorted (start, end)."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(at_least, 300))
    scale = float(rng.choice([0.0005, 0.002, 1.0, 100.0]))
    start = np.round(rng.uniform(0, 10, n) * scale, 4) if seed % 2 else np.round(rng.integers(0, 20, n) * scale * 5e-4, 6)
    dur = np.round(rng.exponential(scale, n) * (rng.random(n) < 0.8), 5)
    _, _, start, end = sorted_intervals(np.zeros(n), np.zeros(n), start, dur)
    return start, end


@pytest.mark.parametrize("seed", range(200))
def test_random_overlapping_intervals_near_the_tolerance_match_the_walk(seed: int) -> None:
    """No structure at all: random starts on a grid as fine as the 1 ns tolerance or coarse, durations zero or
    exponential at that scale, so ties, instants, sub-tolerance overhangs and partial overlaps all occur."""
    start, end = random_overlapping(seed, 1)
    got = _nest_jumps(start, end, np.zeros(len(start), dtype=np.int64))
    want = _nest_walk(start, end)
    assert got is not None
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])


@pytest.fixture
def chunked(monkeypatch: pytest.MonkeyPatch) -> None:
    """Long threads are nested in chunks on threads: make 'long' a few dozen intervals, and four workers on any
    machine, so that the chunked path is the one these tests take."""
    from tb_plugin.model import nesting

    monkeypatch.setattr(nesting, "_CHUNK_EVENTS", 16)
    monkeypatch.setattr(nesting, "workers", lambda: 4)


@pytest.mark.parametrize("seed", range(40))
def test_chunked_threads_match_the_walk(seed: int, chunked: None) -> None:
    from tb_plugin.model import nesting

    rng = np.random.default_rng(seed)
    pids, tids, starts, durs = [], [], [], []
    for thread in range(4):
        jitter = [0.0, 0.0004, 0.002, 0.5][thread]
        s, d = random_forest(rng, int(rng.integers(10, 400)), jitter)
        while thread == 0 and len(s) < 40:  # at least one thread long enough for chunks
            s, d = random_forest(rng, 400, jitter)
        pids.append(np.full(len(s), 7))
        tids.append(np.full(len(s), thread))
        starts.append(s)
        durs.append(d)
    pid, tid, start, end = sorted_intervals(*(np.concatenate(x) for x in (pids, tids, starts, durs)))
    first = np.concatenate([[True], (pid[1:] != pid[:-1]) | (tid[1:] != tid[:-1])])
    assert nesting._nest_long_threads(start, end, first) is not None  # the chunked path, not a fallback
    got, want = nest(pid, tid, start, end), walk_all(pid, tid, start, end)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])


@pytest.mark.parametrize("seed", range(100))
def test_chunked_random_overlaps_near_the_tolerance_match_the_walk(seed: int, chunked: None) -> None:
    from tb_plugin.model import nesting

    start, end = random_overlapping(seed, 40)
    found = nesting._nest_chunked(start, end, 4)
    want = _nest_walk(start, end)
    assert found is not None
    np.testing.assert_array_equal(found[0], want[0])
    np.testing.assert_array_equal(found[1], want[1])


@pytest.mark.parametrize("path", [p for p in TRACES if "/h200/" in p][:3], ids=lambda p: Path(p).parent.name)
def test_chunked_real_traces_match_the_walk(path: str, chunked: None) -> None:
    model = load_trace(path)
    ev = model["events"]
    drawn = np.flatnonzero(np.isfinite(ev["ts"]) & ~np.isin(ev["kind"], (Kind.MEMORY, Kind.TRACE)))
    dur = np.nan_to_num(ev["dur"][drawn], nan=0.0).clip(min=0.0)
    pid, tid, start, end = sorted_intervals(ev["pid"][drawn], ev["tid"][drawn], ev["ts"][drawn], dur)
    got, want = nest(pid, tid, start, end), walk_all(pid, tid, start, end)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])
