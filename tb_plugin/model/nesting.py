"""Nesting by time: which earlier interval of the same thread contains each interval (parent and depth).

The host tree, the Trace view's lanes and the module and communication analyses all nest intervals by the rule of
one stack walk per thread (:func:`_nest_walk`), computed here with numpy pointer jumps (exact, partial overlaps
included) and, for threads of millions of events, in chunks on several threads (numpy's sorts, gathers and
comparisons over large arrays release the GIL).
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

_TOLERANCE_US = 1e-3  # timestamps carry nanoseconds; float rounding must not break nesting
_CHUNK_EVENTS = 1 << 17  # a thread with at least two chunks' worth of intervals is nested chunk by chunk


def nest(pid: np.ndarray, tid: np.ndarray, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Parent and depth of each interval in preorder arrays (sorted by thread, start, longest first).

    The rule is a stack walk per thread (:func:`_nest_walk`): an interval's parent is the innermost earlier one
    still open at its start that also reaches its end; a partial overlap is no container. The walk is a Python
    loop per interval (seconds on a large trace recorded with stacks, whose python functions overlap operators
    partially), so every thread is nested at once with numpy by :func:`_nest_jumps`, which gives the walk's
    answer on every input; only an input that needs too many jumps is walked. A thread of millions of events (the
    main thread of a 2 GB trace) is nested in chunks on threads of its own (:func:`_nest_chunked`).
    """
    n = len(start)
    if n == 0:
        return np.full(0, -1, dtype=np.int64), np.zeros(0, dtype=np.int32)
    first = np.concatenate([[True], (pid[1:] != pid[:-1]) | (tid[1:] != tid[:-1])])
    found = _nest_long_threads(start, end, first) if n >= 2 * _CHUNK_EVENTS else None
    if found is None:
        found = _nest_jumps(start, end, np.cumsum(first))
    if found is not None:
        return found
    parent = np.full(n, -1, dtype=np.int64)
    depth = np.zeros(n, dtype=np.int32)
    bounds = np.append(np.flatnonzero(first), n)
    for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        p, d = _nest_walk(start[lo:hi], end[lo:hi])
        parent[lo:hi] = np.where(p >= 0, p + lo, -1)
        depth[lo:hi] = d
    return parent, depth


def _nest_walk(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The reference rule for one thread's intervals (sorted by start, longest first): a stack walk."""
    starts, ends = start.tolist(), end.tolist()
    parents, depths = [-1] * len(starts), [0] * len(starts)
    stack: list[int] = []
    tol = _TOLERANCE_US
    for i, (s, e) in enumerate(zip(starts, ends)):
        while stack and ends[stack[-1]] <= s + tol:
            stack.pop()
        k = len(stack) - 1
        while k >= 0 and ends[stack[k]] < e - tol:  # a partial overlap: not a container
            k -= 1
        if k >= 0:
            p = stack[k]
            parents[i] = p
            depths[i] = depths[p] + 1
        stack.append(i)
    return np.asarray(parents, dtype=np.int64), np.asarray(depths, dtype=np.int32)


def _nest_jumps(start: np.ndarray, end: np.ndarray, thread: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Parent and depth by :func:`_parents_by_jumps`; None where it gives up."""
    parent = _parents_by_jumps(start, end, thread)
    return None if parent is None else (parent, _climb(parent)[0])


def _parents_by_jumps(start: np.ndarray, end: np.ndarray, thread: np.ndarray) -> np.ndarray | None:
    """:func:`_nest_walk`'s answer for every thread at once, with numpy; None if an input needs too many jumps.

    The walk's stack holds every earlier interval still open (end > s + tol): one is popped only once closed, and
    the top is open after the pops. So for an interval with e − tol > s + tol the walk picks the latest earlier
    interval of its thread with end ≥ e − tol (such an interval is open, and a closed one left in the stack cannot
    qualify); for a shorter one it picks the top, the latest interval with end > s + tol. Both are "the latest
    earlier interval whose end reaches a threshold", found from the interval before by following links to the
    nearest earlier interval ending strictly later (each link skips only intervals ending sooner).
    """
    n = len(start)
    tol = _TOLERANCE_US
    if not (np.isfinite(start).all() and np.isfinite(end).all()):
        return None
    long = end - tol > start + tol
    threshold = np.where(long, end - tol, np.nextafter(start + tol, np.inf))
    later = previous_later_end(end, thread)
    if later is None:
        return None
    parent = np.arange(n) - 1
    parent[np.flatnonzero(np.concatenate([[True], thread[1:] != thread[:-1]]))] = -1
    active = np.flatnonzero(parent >= 0)
    for _ in range(MAX_JUMPS):
        active = active[end[parent[active]] < threshold[active]]
        if not len(active):
            return parent
        parent[active] = later[parent[active]]
        active = active[parent[active] >= 0]
    return None


MAX_JUMPS = 512  # pointer-jump rounds before an input is taken for pathological (then walked or swept)


def previous_later_end(ends: np.ndarray, thread: np.ndarray) -> np.ndarray | None:
    """Per span (in sweep order): the nearest earlier span of its thread that ends strictly later, -1 if none.

    Pointer jumping: each link starts at the span before and jumps along links while the target ends no later; a
    target's own link only skips spans ending no later than the target, so every jump keeps the answer ahead.
    """
    n = len(ends)
    link = np.arange(n) - 1
    link[np.flatnonzero(np.concatenate([[True], thread[1:] != thread[:-1]]))] = -1
    active = np.flatnonzero(link >= 0)  # links that may still point at a span ending no later
    for _ in range(MAX_JUMPS):
        active = active[ends[link[active]] <= ends[active]]
        if not len(active):
            return link
        link[active] = link[link[active]]
        active = active[link[active] >= 0]
    return None


def workers() -> int:
    """Threads a big computation may use (a long thread's chunks, a trace's tracks): the cores this process may
    run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _climb(up: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Along parent links (-1: none): how many ancestors each node has, and its topmost ancestor (itself for a
    root). Pointer doubling: each round joins every node's covered stretch of its chain with the next one."""
    n = len(up)
    count = (up >= 0).astype(np.int32)
    top = np.where(up >= 0, up, np.arange(n))
    nxt = up.copy()
    active = np.flatnonzero(nxt >= 0)
    while len(active):
        ahead = nxt[active]  # every right side below is read before any write: a synchronous round
        count[active] += count[ahead]
        top[active] = top[ahead]
        nxt[active] = nxt[ahead]
        active = active[nxt[active] >= 0]
    return count, top


@dataclass(frozen=True)
class _Chunk:
    parent: np.ndarray  # thread-local index of each interval's parent, -1 for none
    inner: np.ndarray  # ancestors inside the chunk
    exit: np.ndarray  # the nearest ancestor before the chunk, -1 for none


def _nest_long_threads(start: np.ndarray, end: np.ndarray, first: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Threads of at least two chunks nested chunk by chunk (:func:`_nest_chunked`), the others all at once."""
    bounds = np.append(np.flatnonzero(first), len(start))
    long = [(lo, hi) for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist()) if hi - lo >= 2 * _CHUNK_EVENTS]
    cores = workers()
    if not long or cores < 2:
        return None
    parent = np.full(len(start), -1, dtype=np.int64)
    depth = np.zeros(len(start), dtype=np.int32)
    rest = np.ones(len(start), dtype=bool)
    for lo, hi in long:
        found = _nest_chunked(start[lo:hi], end[lo:hi], cores)
        if found is None:
            return None
        parent[lo:hi] = np.where(found[0] >= 0, found[0] + lo, -1)
        depth[lo:hi] = found[1]
        rest[lo:hi] = False
    idx = np.flatnonzero(rest)
    if len(idx):
        found = _nest_jumps(start[idx], end[idx], np.cumsum(first)[idx])
        if found is None:
            return None
        parent[idx] = np.where(found[0] >= 0, idx[np.maximum(found[0], 0)], -1)
        depth[idx] = found[1]
    return parent, depth


def _nest_chunked(start: np.ndarray, end: np.ndarray, workers: int) -> tuple[np.ndarray, np.ndarray] | None:
    """One thread's parents and depths from independent chunks, on threads.

    A parent of an interval in the chunk starting at position a is in the chunk or open at a's start: its end
    reaches the interval's threshold, past a's start plus the tolerance. So each chunk is nested together with the
    intervals open at its start (the latest one meeting a threshold is the same among those as among all earlier
    ones), and an interval's depth is its ancestors inside the chunk plus one more than the depth of its nearest
    ancestor before the chunk, taken chunk after chunk.
    """
    n = len(start)
    chunks = max(2, min(workers, n // _CHUNK_EVENTS))
    cuts = np.linspace(0, n, chunks + 1).astype(np.int64).tolist()
    with ThreadPoolExecutor(chunks, thread_name_prefix="pytorch-profiler-nest") as pool:
        done = list(pool.map(lambda k: _chunk(start, end, cuts[k], cuts[k + 1]), range(chunks)))
    if any(c is None for c in done):
        return None
    depth = np.zeros(n, dtype=np.int32)
    for k, c in enumerate(done):
        assert c is not None
        outer = np.where(c.exit >= 0, depth[np.maximum(c.exit, 0)] + 1, 0)  # the exits are in earlier chunks
        depth[cuts[k]:cuts[k + 1]] = c.inner + outer
    return np.concatenate([c.parent for c in done if c is not None]), depth


def _chunk(start: np.ndarray, end: np.ndarray, a: int, b: int) -> _Chunk | None:
    prefix = np.flatnonzero(end[:a] > start[a] + _TOLERANCE_US)  # open at the chunk's first start
    idx = np.concatenate([prefix, np.arange(a, b)])
    local = _parents_by_jumps(start[idx], end[idx], np.zeros(len(idx), dtype=np.int8))
    if local is None:
        return None
    local = local[len(prefix):]
    parent = np.where(local >= 0, idx[np.maximum(local, 0)], -1)
    inner, top = _climb(np.where(parent >= a, parent - a, -1))
    return _Chunk(parent=parent, inner=inner, exit=parent[top])
