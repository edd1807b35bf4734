"""Call stacks of 2.x traces from ``python_function`` events, with numpy where the rules allow.

PyTorch 2.x records no ``Call stack`` arg; the stack of an operator call is the chain of Python frames enclosing
it on its thread, innermost first, keeping source frames (``file(line): function``) only. Two steps, each exactly
the answer of the walk it replaces (kept below as the fallback and compared in ``tests/unit/test_python_stacks.py``):

- :func:`innermost_frames`: per operator, the innermost open frame of its thread. The sweep pushed frames in the
  order thread, start, longest first (frames before operators at ties) and popped closed ones (end < start) off
  the top; what it answers is the **last frame pushed before the operator that is still open** at its start
  (every frame pushed later is closed, so popped; that one never is). Found from the last frame before the
  operator by following "previous frame ending later" links, which skip only closed frames: pointer jumps.
- :func:`stack_table`: per distinct innermost frame, the text of its chain. A text depends only on the nearest
  source frame of the chain, and a source frame's text is its name before its nearest source ancestor's: one
  string per source frame used, built once, instead of a walk up the whole chain per operator's frame. Chains
  longer than :data:`MAX_FRAMES` (or cycles of parent ids), which the walk cuts, still take the walk.

On the 164 MB trace (146 k frames, 172 k operators) this is what the Operator view's first answer spent its time
on: 0.6 of its 0.85 s under a profiler (a Python sweep over 318 k rows and a regex per frame of 16 k chains).
What depends on the frames alone (their sweep order and links, :func:`frame_sweep`; their chains of source
frames, :func:`source_chains`) is made once, while the operators are (``operators.call_stacks``): the operators
are then found among the sorted frames per thread, not sorted again together with them (the walk's order,
:func:`_sweep_order`, stays the reference and the fallback).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ..model.arrays import isin_ints
from ..model.nesting import MAX_JUMPS, previous_later_end
from ..model.order import common_threads, sweep_order
from ..model.tables import TraceModel

SOURCE_FRAME = re.compile(r"\(\d+\): ")
MAX_FRAMES = 512  # the walk up a chain of parent ids stops after this many frames (also a guard against cycles)


def _sweep_order(model: TraceModel, op_rows: np.ndarray) -> dict[str, np.ndarray]:
    """Frames and operators in the sweep's order (thread, start, longest first, frames first): what the walk
    (:func:`_innermost_walk`, the fallback and the tests' reference) steps through."""
    ev = model["events"]
    py_rows = model["python"]["row"]
    rows = np.concatenate([py_rows, op_rows])
    is_py = np.concatenate([np.ones(len(py_rows), bool), np.zeros(len(op_rows), bool)])
    which = np.concatenate([np.arange(len(py_rows)), np.arange(len(op_rows))])
    start = ev["ts"][rows]
    end = start + np.nan_to_num(ev["dur"][rows], nan=0.0).clip(min=0.0)
    pid, tid = ev["pid"][rows], ev["tid"][rows]
    order = sweep_order(pid, tid, start, (~is_py, -(end - start)))  # frames first at ties
    pid, tid = pid[order], tid[order]
    new_thread = np.concatenate([[True], (pid[1:] != pid[:-1]) | (tid[1:] != tid[:-1])]) if len(order) else order
    return {"thread": np.cumsum(new_thread), "start": start[order], "end": end[order], "is_py": is_py[order],
            "which": which[order], "pid": pid, "tid": tid}


@dataclass(frozen=True)
class FrameSweep:
    """The trace's Python frames in the sweep's order (thread, start, longest first): each one's index in the
    ``python`` table, thread, start and end, and the nearest earlier frame of its thread ending later (``link``,
    ``nesting.previous_later_end``; None where its jumps did not settle). None of it depends on the operators: it is
    computed while they are (``operators.call_stacks``), the frames sorted once, not again among the operators."""

    which: np.ndarray
    pid: np.ndarray
    tid: np.ndarray
    start: np.ndarray
    end: np.ndarray
    link: np.ndarray | None


def frame_sweep(model: TraceModel) -> FrameSweep:
    ev = model["events"]
    rows = model["python"]["row"]
    start = ev["ts"][rows]
    end = start + np.nan_to_num(ev["dur"][rows], nan=0.0).clip(min=0.0)
    pid, tid = ev["pid"][rows], ev["tid"][rows]
    order = sweep_order(pid, tid, start, (-(end - start),))  # as _sweep_order orders the frames among operators
    pid, tid, start, end = pid[order], tid[order], start[order], end[order]
    new_thread = np.concatenate([[True], (pid[1:] != pid[:-1]) | (tid[1:] != tid[:-1])]) if len(order) else \
        np.zeros(0, dtype=bool)
    return FrameSweep(which=order, pid=pid, tid=tid, start=start, end=end,
                      link=previous_later_end(end, np.cumsum(new_thread)))


def innermost_frames(model: TraceModel, op_rows: np.ndarray, sweep: FrameSweep | None = None) -> np.ndarray:
    """Per operator row: the index (into the ``python`` table) of the innermost Python frame enclosing it on its
    thread, -1 when none (see the module's docstring for the rule); ``sweep``: :func:`frame_sweep`'s, if made."""
    f = sweep if sweep is not None else frame_sweep(model)
    out = np.full(len(op_rows), -1, dtype=np.int64)
    if not len(f.which) or not len(op_rows):
        return out
    if f.link is None:
        return _innermost_walk(_sweep_order(model, op_rows))
    ev = model["events"]
    when = ev["ts"][op_rows]
    end = when + np.nan_to_num(ev["dur"][op_rows], nan=0.0).clip(min=0.0)
    cand = _last_frame_before(f, ev["pid"][op_rows], ev["tid"][op_rows], when, end)
    active = np.flatnonzero(cand >= 0)  # operators whose candidate may be closed
    for _ in range(MAX_JUMPS):
        active = active[f.end[cand[active]] < when[active]]
        if not len(active):
            found: np.ndarray = np.where(cand >= 0, f.which[np.maximum(cand, 0)], -1)
            return found
        cand[active] = f.link[cand[active]]
        active = active[cand[active] >= 0]
    return _innermost_walk(_sweep_order(model, op_rows))


def _last_frame_before(f: FrameSweep, pid: np.ndarray, tid: np.ndarray, start: np.ndarray, end: np.ndarray
                       ) -> np.ndarray:
    """Per operator: the last frame before it in the sweep's order if on its thread, else -1. That order is by
    thread, then start (untimed last), then longest first, frames first where all of that ties: within a thread's
    frames, (start, -duration) pairs sorted, which a complex number compares as (numpy orders complex numbers by
    real part, then imaginary); the operators are searched among them one thread at a time."""
    f_rank, o_rank = common_threads(f.pid, f.tid, pid, tid)
    f_key, o_key = _sweep_key(f.start, f.end), _sweep_key(start, end)
    cand = np.full(len(pid), -1, dtype=np.int64)
    by_thread = np.argsort(o_rank, kind="stable")
    heads = np.flatnonzero(np.concatenate([[True], o_rank[by_thread][1:] != o_rank[by_thread][:-1]]))
    for a, b in zip(heads.tolist(), np.append(heads[1:], len(by_thread)).tolist()):
        ops = by_thread[a:b]
        lo, hi = np.searchsorted(f_rank, [o_rank[ops[0]], o_rank[ops[0]] + 1]).tolist()
        at = lo + np.searchsorted(f_key[lo:hi], o_key[ops], side="right") - 1
        cand[ops] = np.where(at >= lo, at, -1)
    return cand


def _sweep_key(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """start + i·(start − end): the sweep's order within a thread; an untimed start after every timed one, all
    untimed ones equal (the sort ties them)."""
    untimed = np.isnan(start)
    key = np.empty(len(start), dtype=np.complex128)  # set part by part: 1j * -inf would make the real part NaN
    key.real = np.where(untimed, np.inf, start)
    key.imag = np.where(untimed, -np.inf, -(end - start))
    return key


def _innermost_walk(s: dict[str, np.ndarray]) -> np.ndarray:
    """The stack sweep over the sorted rows (one Python step per row): what :func:`innermost_frames` computes."""
    pid, tid = s["pid"].tolist(), s["tid"].tolist()
    s_list, e_list = s["start"].tolist(), s["end"].tolist()
    py_list, which_list = s["is_py"].tolist(), s["which"].tolist()
    innermost = np.full(int((~s["is_py"]).sum()), -1, dtype=np.int64)
    stack: list[int] = []  # indices into the sorted arrays of open Python frames
    prev = None
    for i in range(len(s_list)):
        thread = (pid[i], tid[i])
        if thread != prev:
            stack.clear()
            prev = thread
        while stack and e_list[stack[-1]] < s_list[i]:
            stack.pop()
        if py_list[i]:
            stack.append(i)
        elif stack:
            innermost[which_list[i]] = which_list[stack[-1]]
    return innermost


def parent_frames(python_id: np.ndarray, parent_id: np.ndarray) -> np.ndarray:
    """Per frame: the index of the frame whose ``python_id`` is its ``parent_id`` (the last such frame where ids
    repeat), -1 when none or negative."""
    valid = np.flatnonzero(python_id >= 0)
    order = valid[np.argsort(python_id[valid], kind="stable")]
    ids = python_id[order]
    last = np.concatenate([ids[1:] != ids[:-1], [True]]) if len(ids) else np.zeros(0, bool)
    ids, index = ids[last], order[last]
    if not len(ids):
        return np.full(len(parent_id), -1, dtype=np.int64)
    pos = np.minimum(np.searchsorted(ids, parent_id), len(ids) - 1)
    out: np.ndarray = np.where(ids[pos] == parent_id, index[pos], -1).astype(np.int64)
    return out


def _chain_lengths(parent: np.ndarray) -> np.ndarray:
    """Frames in each frame's chain up to its root (itself included); any value over ``MAX_FRAMES`` means the
    chain is longer than the walk follows (or a cycle). Pointer jumping: each round doubles the reach."""
    dist = np.ones(len(parent), dtype=np.int64)
    anc = parent.copy()
    active = np.flatnonzero(anc >= 0)
    for _ in range(int(np.log2(MAX_FRAMES)) + 1):
        if not len(active):
            break
        dist[active] += dist[anc[active]]
        anc[active] = anc[anc[active]]
        active = active[anc[active] >= 0]
    dist[active] = MAX_FRAMES + 1
    return dist


def _nearest_source(parent: np.ndarray, source: np.ndarray) -> np.ndarray:
    """Per frame: itself if a source frame, else its nearest source ancestor, -1 if none (exact wherever the
    chain is at most ``MAX_FRAMES`` long; longer ones take the walk)."""
    near = np.where(source, np.arange(len(parent)), parent)
    active = np.flatnonzero(near >= 0)
    active = active[~source[near[active]]]
    for _ in range(64):  # a chain of MAX_FRAMES resolves in 10 rounds; only cycles are left after 64
        if not len(active):
            break
        near[active] = near[near[active]]
        active = active[near[active] >= 0]
        active = active[~source[near[active]]]
    return near


@dataclass(frozen=True)
class SourceChains:
    """What every stack text is built from, per frame of the ``python`` table: its parent frame, name, chain
    length and nearest source frame; per source frame within the cut, the number of its chain of source frames,
    and per number the innermost frame's name and the outer chain's number (:func:`_stack_ids`). None of it depends
    on the operators: it is computed while they are (``operators.call_stacks``)."""

    parent: np.ndarray
    names: np.ndarray
    length: np.ndarray
    near: np.ndarray
    stack: np.ndarray
    stack_name: np.ndarray
    stack_up: np.ndarray


def source_chains(model: TraceModel) -> SourceChains:
    py = model["python"]
    parent = parent_frames(py["python_id"], py["parent_id"])
    names = model["events"]["name"][py["row"]].astype(np.int64)
    source = isin_ints(names, model.codes_where(lambda s: SOURCE_FRAME.search(s) is not None))
    length = _chain_lengths(parent)
    near = _nearest_source(parent, source)
    above = np.where(parent >= 0, near[np.maximum(parent, 0)], -1)  # a source frame's nearest source ancestor
    stack, stack_name, stack_up = _stack_ids(source & (length <= MAX_FRAMES), above, names)
    return SourceChains(parent=parent, names=names, length=length, near=near, stack=stack, stack_name=stack_name,
                        stack_up=stack_up)


def stack_table(model: TraceModel, frames: np.ndarray, chains: SourceChains | None = None
                ) -> tuple[np.ndarray, list[str]]:
    """Per frame of ``frames`` (indices into the ``python`` table, distinct, ascending, ≥ 0): the code of its call
    stack in ``texts`` (numbered in the order of ``frames``), -1 where the chain holds no source frame;
    ``chains``: :func:`source_chains`'s, if made."""
    c = chains if chains is not None else source_chains(model)
    # per frame: the stack of its nearest source frame, -1 for none, or -2 - position where the walk decides
    key = np.where(c.near[frames] >= 0, c.stack[np.maximum(c.near[frames], 0)], -1)
    key = np.where(c.length[frames] > MAX_FRAMES, -2 - np.arange(len(frames)), key)
    distinct, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    strings, names_list, parent_list = model.strings, c.names.tolist(), c.parent.tolist()
    name_list, up_list = c.stack_name.tolist(), c.stack_up.tolist()
    text_of: dict[int, str] = {}

    def text(k: int) -> str:  # the text of stack k, its outer part first
        chain = []
        while k >= 0 and k not in text_of:
            chain.append(k)
            k = up_list[k]
        out = text_of[k] if k >= 0 else ""
        for k in reversed(chain):
            out = text_of[k] = strings[name_list[k]] + (";" + out if out else "")
        return out

    texts: list[str] = []
    index: dict[str, int] = {}
    code = np.full(len(distinct), -1, dtype=np.int64)
    for d in np.argsort(first, kind="stable").tolist():  # texts numbered as the frames first meet them
        k = int(distinct[d])
        t = text(k) if k >= 0 else _walk_text(int(frames[first[d]]), parent_list, names_list, strings) if k < -1 \
            else ""
        if t:
            code[d] = index.setdefault(t, len(texts))
            if code[d] == len(texts):
                texts.append(t)
    return code[inverse.reshape(-1)], texts


def _stack_ids(nodes: np.ndarray, above: np.ndarray, names: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Numbers for the chains of source frames: per frame of the mask ``nodes`` (source frames whose chain is
    within the cut), the number of its chain of source frames, equal for equal (name, outer chain) pairs; and per
    number its innermost frame's name and its outer chain's number (-1 at the top). Level by level from the top,
    one ``np.unique`` each, so a text is built once per chain, not once per frame."""
    stack = np.full(len(above), -1, dtype=np.int64)
    level = _chain_lengths(above)  # source frames on the chain, the frame itself included
    members = np.flatnonzero(nodes)
    members = members[np.argsort(level[members], kind="stable")]
    bounds = np.searchsorted(level[members], np.arange(1, int(level[members].max(initial=0)) + 2))
    stack_name, stack_up, count = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)], 0
    for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        at = members[lo:hi]
        outer = np.where(above[at] >= 0, stack[np.maximum(above[at], 0)], -1)
        distinct, first, inverse = np.unique(names[at] * (count + 1) + outer + 1, return_index=True,
                                             return_inverse=True)
        stack[at] = count + inverse.reshape(-1)
        stack_name.append(names[at][first])
        stack_up.append(outer[first])
        count += len(distinct)
    return stack, np.concatenate(stack_name), np.concatenate(stack_up)


def _walk_text(frame: int, parent: list[int], names: list[int], strings: list[str]) -> str:
    """The source frames of a chain, innermost first, over at most ``MAX_FRAMES`` frames: the walk."""
    frames: list[str] = []
    k = frame
    seen = 0
    while k >= 0 and seen < MAX_FRAMES:
        if SOURCE_FRAME.search(strings[names[k]]):
            frames.append(strings[names[k]])
        k = parent[k]
        seen += 1
    return ";".join(frames)
