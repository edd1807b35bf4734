"""Call stacks as a frame tree (a trie of frames): what the flame graph draws and the folded-stacks export writes.

A frame is a path from the root: Python frames (outermost first), then the operators and ``record_function``
annotations that ran inside the innermost Python frame (``aten::linear`` → ``aten::addmm``), then, for device
work, the kernel, memcpy or memset that the innermost of them launched. Each host-tree node (operator,
annotation, runtime or driver call), each device event and each ``[memory]`` record maps to one frame; the
weights (:mod:`.flamegraph`) are then a ``bincount`` over those frame numbers, so no per-event object lives.

Where a node's Python stack comes from:

* its own ``Call stack`` arg (PyTorch 1.8–1.10 traces, and 2.x traces that write it again): the frames as
  ``torch.profiler`` itself reports them, the same ``export_stacks`` writes;
* else the innermost ``python_function`` frame enclosing it on its thread (2.x ``with_stack``), whose chain of
  ``Python parent id`` gives the stack;
* else none: the node's operator chain starts at the root (autograd's backward thread has no Python frames).

An operator continues its parent operator's chain when both have the same Python stack; otherwise (a Python
frame ran between them, or the parent is a ``record_function`` region entered elsewhere) it starts from its own
stack, as ``torch.profiler`` attributes it.

``merge`` builds the tree from function names instead: line numbers and the object addresses of built-in
methods (``<built-in method to of Tensor object at 0x7f…>``) are dropped, so one function is one frame.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import IntEnum

import numpy as np

from ..model.arrays import isin_ints
from ..model.derived import memoized
from ..model.kinds import Kind
from ..model.lookups import side_row
from ..model.optree import HostTree, host_tree
from ..model.order import preorder
from ..model.tables import TraceModel

ROOT = -1
WEIGHTED_HOST_KINDS = (Kind.CPU_OP, Kind.USER_ANNOTATION)
_LAUNCH_KINDS = (Kind.RUNTIME, Kind.DRIVER)
_MAX_PYTHON_DEPTH = 1024


class FrameKind(IntEnum):
    """What a frame is; the view colours them apart (the user's own code against library code)."""

    USER = 0  # Python source outside any installed package
    LIBRARY = 1  # torch, site-packages, the standard library
    BUILTIN = 2  # <built-in method …>, C functions
    MODULE = 3  # nn.Module: Linear_0
    OPERATOR = 4  # aten::…, autograd::…
    ANNOTATION = 5  # record_function regions, ProfilerStep#N
    RUNTIME = 6  # cudaLaunchKernel and other runtime / driver calls
    DEVICE = 7  # kernels, memcpy, memset
    OTHER = 8


_SOURCE = re.compile(r"^(?P<file>.+?)\((?P<line>\d+)\): (?P<function>.*)$")
_LIBRARY = re.compile(r"(?:^|/)(?:torch|torchvision|torchaudio|torchtext|triton|numpy|lightning|pytorch_lightning|"
                      r"transformers|accelerate|apex|deepspeed)/|site-packages/|dist-packages/|/lib/python\d|"
                      r"^<frozen |^(?:threading|contextlib|functools|runpy|abc|typing|copy|weakref|"
                      r"collections/__init__|concurrent/futures/\w+|multiprocessing/\w+)\.py$")
_ADDRESS = re.compile(r" (?:of (?:[\w.]+ )?object )?at 0x[0-9a-fA-F]+")
_LINE = re.compile(r"\(\d+\): ")
# ';' separates frames and a line ends a stack in the folded format: both become '_', as export_stacks does (which
# also turns spaces into '_'; flamegraph.pl and speedscope read spaces, so names keep theirs)
_FOLDED_UNSAFE = str.maketrans(";\t\n\r", "____")


def python_frame_kind(name: str) -> FrameKind:
    """User, library, built-in or module: from the frame's text as the profiler writes it."""
    if name.startswith("nn.Module: "):
        return FrameKind.MODULE
    if name.startswith("<built-in") or name.startswith("<method") or name.startswith("<slot wrapper"):
        return FrameKind.BUILTIN
    source = _SOURCE.match(name)
    if source is None:
        return FrameKind.OTHER
    return FrameKind.LIBRARY if _LIBRARY.search(source.group("file")) else FrameKind.USER


def function_name(name: str) -> str:
    """The frame's name without its line number and without the object address of a built-in method."""
    return _ADDRESS.sub("", _LINE.sub(": ", name, count=1))


@dataclass(frozen=True)
class FrameTree:
    """Frames and where each event lands; frame arrays are indexed by frame number (parents come first)."""

    names: list[str]  # the frames' string table
    name_kind: np.ndarray  # FrameKind per name
    name: np.ndarray  # per frame: index into names
    parent: np.ndarray  # per frame: parent frame, ROOT for a top frame
    depth: np.ndarray  # per frame: 0 for a top frame
    node_frame: np.ndarray  # per host-tree node: its frame (-1 for folded nodes)
    device_frame: np.ndarray  # per device_events row: its frame
    device_owner: np.ndarray  # per device_events row: the operator / annotation node that launched it, -1 if none
    python_stacks: bool  # whether any node had a Python stack (else the view explains with_stack)

    @property
    def size(self) -> int:
        return len(self.name)


class _Builder:
    """Interns names and frames: a frame is (parent frame, name), numbered in creation order."""

    def __init__(self, merge: bool) -> None:
        self.merge = merge
        self.names: list[str] = []
        self.kinds: list[int] = []
        self._name_ids: dict[str, int] = {}
        self._frames: dict[int, int] = {}
        self.parent: list[int] = []
        self.name: list[int] = []

    def name_id(self, text: str, kind: FrameKind) -> int:
        text = function_name(text) if self.merge and kind <= FrameKind.MODULE else text
        text = text.translate(_FOLDED_UNSAFE)
        found = self._name_ids.get(text)
        if found is None:
            found = self._name_ids[text] = len(self.names)
            self.names.append(text)
            self.kinds.append(int(kind))
        return found

    def name_ids(self, model: TraceModel, codes: np.ndarray, kind: FrameKind | None) -> np.ndarray:
        """Name ids for a column of string codes (one Python call per distinct code)."""
        uniq, inverse = np.unique(codes, return_inverse=True)
        ids = [self.name_id(model.strings[c] if c >= 0 else "(unnamed)",
                            kind if kind is not None else python_frame_kind(model.strings[c] if c >= 0 else ""))
               for c in uniq.tolist()]
        return np.asarray(ids, dtype=np.int64)[inverse.reshape(-1)] if len(codes) else np.zeros(0, np.int64)

    def children(self, parents: np.ndarray, names: np.ndarray) -> np.ndarray:
        """The frame (parent, name) for each pair, created where new (one Python call per distinct pair)."""
        if not len(parents):
            return np.zeros(0, dtype=np.int64)
        keys = (parents.astype(np.int64) + 1) * (1 << 32) + names.astype(np.int64)
        uniq, inverse = np.unique(keys, return_inverse=True)
        out = np.empty(len(uniq), dtype=np.int64)
        for i, key in enumerate(uniq.tolist()):
            frame = self._frames.get(key)
            if frame is None:
                frame = self._frames[key] = len(self.parent)
                self.parent.append((key >> 32) - 1)
                self.name.append(key & 0xFFFFFFFF)
            out[i] = frame
        return out[inverse.reshape(-1)]

    def path(self, frames: list[str]) -> int:
        """The frame of a stack given outermost first (ROOT for an empty one)."""
        frame = ROOT
        for text in frames:
            name = self.name_id(text, python_frame_kind(text))
            frame = int(self.children(np.asarray([frame]), np.asarray([name]))[0])
        return frame


def levels(parent: np.ndarray) -> list[np.ndarray]:
    """Indices grouped by depth in a forest given by ``parent`` (-1 for roots); members of a cycle, or deeper than
    the limit, are treated as roots."""
    n = len(parent)
    depth = np.full(n, -1, dtype=np.int64)
    depth[parent < 0] = 0
    for d in range(1, _MAX_PYTHON_DEPTH):
        pending = np.flatnonzero((depth < 0) & (parent >= 0))
        ready = pending[depth[parent[pending]] == d - 1]
        if not len(ready):
            break
        depth[ready] = d
    depth[depth < 0] = 0
    order = np.argsort(depth, kind="stable")
    bounds = np.searchsorted(depth[order], np.arange(int(depth.max(initial=0)) + 2))
    return [order[bounds[d]:bounds[d + 1]] for d in range(len(bounds) - 1) if bounds[d + 1] > bounds[d]]


def python_parents(model: TraceModel) -> np.ndarray:
    """Per row of the ``python`` table: the row of its ``Python parent id`` (-1 where the profiling window cut it)."""
    py = model["python"]
    n = len(py["row"])
    if not n:
        return np.zeros(0, dtype=np.int64)
    ids = py["python_id"]
    order = np.argsort(ids, kind="stable")
    pos = np.minimum(np.searchsorted(ids[order], py["parent_id"]), n - 1)
    found = (py["parent_id"] >= 0) & (ids[order][pos] == py["parent_id"])
    parent: np.ndarray = np.where(found, order[pos], -1)
    parent[parent == np.arange(n)] = -1
    return parent


def _python_frames(model: TraceModel, b: _Builder, parent: np.ndarray) -> np.ndarray:
    """The frame of each row of the ``python`` table, by its chain of ``Python parent id``."""
    py = model["python"]
    names = b.name_ids(model, model["events"]["name"][py["row"]], None)
    frame = np.full(len(parent), ROOT, dtype=np.int64)
    for level in levels(parent):
        up = parent[level]
        base = np.where(up >= 0, frame[np.maximum(up, 0)], ROOT)
        frame[level] = b.children(base, names[level])
    return frame


def _enclosing(pid: np.ndarray, tid: np.ndarray, start: np.ndarray,
               end: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Intervals that nest, sorted by thread, start and longest first: ``(order, up, thread_starts)`` with ``up`` the
    position (in that order) of each one's innermost container on its thread, -1 if none.

    An interval's container is the one before it or an enclosing one of that: each round moves every unresolved
    pointer one step outwards (to its target's pointer), so no interval between a pointer and its interval ever
    contains the interval, and the first pointer that does is the innermost. Rounds grow with the depth, not the
    count. Same tolerance as :func:`~tb_plugin.model.optree.nest`.
    """
    n = len(start)
    order = preorder(pid, tid, start, end - start)  # np.lexsort((-(end - start), start, tid, pid)), sooner
    s, e = start[order], end[order]
    same = np.concatenate([[False], (pid[order][1:] == pid[order][:-1]) & (tid[order][1:] == tid[order][:-1])])
    up = np.where(same, np.arange(n) - 1, -1)
    tol = 1e-3
    active = np.flatnonzero(up >= 0)  # only the pointers not yet at a container are looked at again
    for _ in range(4 * _MAX_PYTHON_DEPTH):
        f = up[active]
        active = active[(e[f] <= s[active] + tol) | (e[f] < e[active] - tol)]
        if not len(active):
            break
        up[active] = up[up[active]]
        active = active[up[active] >= 0]
    return order, up, np.flatnonzero(~same)


def innermost_python(model: TraceModel, pid: np.ndarray, tid: np.ndarray, ts: np.ndarray) -> np.ndarray:
    """Per point (pid, tid, ts): the row of the innermost ``python_function`` frame on that thread with
    start ≤ ts < end, -1 if none.

    Python frames nest in time, so the answer is the last frame to start at or before ``ts`` or one of its
    enclosing frames: one ``searchsorted`` per thread, then a few vectorised steps outwards (instead of a Python
    sweep over every frame and point, which costs a second on a 500k-event trace). Enclosing is by time, as
    :func:`~tb_plugin.model.optree.innermost_containing` has it: the ``Python parent id`` chain sometimes skips a frame.
    """
    ev = model["events"]
    rows = model["python"]["row"]
    out = np.full(len(ts), -1, dtype=np.int64)
    if not len(rows) or not len(ts):
        return out
    f_pid, f_tid, start = ev["pid"][rows], ev["tid"][rows], ev["ts"][rows]
    end = start + np.nan_to_num(ev["dur"][rows], nan=0.0).clip(min=0.0)
    order, up, firsts = _enclosing(f_pid, f_tid, start, end)
    s, e = start[order], end[order]
    bounds = np.append(firsts, len(order))
    for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        points = np.flatnonzero((pid == f_pid[order[a]]) & (tid == f_tid[order[a]]))
        if not len(points):
            continue
        at = ts[points]
        cand = np.searchsorted(s[a:b], at, side="right") - 1 + a  # the last to start; shortest last at a tie
        cand[cand < a] = -1
        for _ in range(4 * _MAX_PYTHON_DEPTH):
            ended = np.flatnonzero((cand >= 0) & (e[np.maximum(cand, 0)] <= at))
            if not len(ended):
                break
            cand[ended] = up[cand[ended]]
        out[points] = np.where(cand >= 0, order[np.maximum(cand, 0)], -1)
    return out


def _arg_frames(model: TraceModel, b: _Builder, codes: np.ndarray) -> np.ndarray:
    """The frame of each ``Call stack`` arg (innermost first, ``;``-separated, as the profiler writes it)."""
    uniq, inverse = np.unique(codes, return_inverse=True)
    frames = [b.path([f for f in reversed(model.strings[c].split(";")) if f.strip()]) if c >= 0 else ROOT
              for c in uniq.tolist()]
    return np.asarray(frames, dtype=np.int64)[inverse.reshape(-1)] if len(codes) else np.zeros(0, np.int64)


def _bases(model: TraceModel, b: _Builder, nodes: np.ndarray) -> tuple[np.ndarray, bool]:
    """Per host-tree node in ``nodes``: the frame of its Python stack (ROOT if none), and whether any had one."""
    tree = host_tree(model)
    ev = model["events"]
    rows = tree.rows[nodes]
    ops_row = side_row(model, "ops")[rows]
    arg = np.where(ops_row >= 0, model["ops"]["call_stack"][np.maximum(ops_row, 0)], -1) if len(rows) else ops_row
    base = np.full(len(nodes), ROOT, dtype=np.int64)
    has_arg = arg >= 0
    if has_arg.any():
        base[has_arg] = _arg_frames(model, b, arg[has_arg])
    rest = np.flatnonzero(~has_arg)  # no arg of its own: the Python frames around it, if the trace has them
    if not len(model["python"]["row"]) or not len(rest):
        return base, bool(has_arg.any())
    py_frame = _python_frames(model, b, python_parents(model))
    inner = innermost_python(model, ev["pid"][rows[rest]], ev["tid"][rows[rest]], tree.start[nodes[rest]])
    base[rest] = np.where(inner >= 0, py_frame[np.maximum(inner, 0)], ROOT)
    return base, bool(has_arg.any() or (inner >= 0).any())


@memoized(closed=True)
def frame_tree(model: TraceModel, merge: bool = False) -> FrameTree:
    """The frame tree of a trace (computed once per ``merge``; the merged one from the other, frame by frame)."""
    if merge:
        return _merged(frame_tree(model, False))
    b = _Builder(merge)
    tree = host_tree(model)
    ev = model["events"]
    kind = tree.kind
    in_tree = tree.parent >= -1
    hosted = np.flatnonzero(in_tree & isin_ints(kind, WEIGHTED_HOST_KINDS + _LAUNCH_KINDS))
    base = np.full(tree.size, ROOT, dtype=np.int64)
    weighted = hosted[isin_ints(kind[hosted], WEIGHTED_HOST_KINDS)]
    base[weighted], has_python = _bases(model, b, weighted)
    name_kind = np.select([kind == Kind.CPU_OP, kind == Kind.USER_ANNOTATION], [FrameKind.OPERATOR,
                                                                                 FrameKind.ANNOTATION],
                          FrameKind.RUNTIME)
    names = np.zeros(tree.size, dtype=np.int64)
    for k in (FrameKind.OPERATOR, FrameKind.ANNOTATION, FrameKind.RUNTIME):
        sel = hosted[name_kind[hosted] == k]
        names[sel] = b.name_ids(model, ev["name"][tree.rows[sel]], k)
    is_weighted = np.zeros(tree.size, dtype=bool)
    is_weighted[weighted] = True
    node_frame = np.full(tree.size, -1, dtype=np.int64)
    for level in levels(_hosted_parent(tree, hosted)):
        nodes = hosted[level]
        up = tree.parent[nodes]
        up_ok = (up >= 0) & is_weighted[np.maximum(up, 0)]
        # a launch continues its operator's chain; an operator only where the Python stack is the same
        launch = ~is_weighted[nodes]
        chain = up_ok & (launch | (base[np.maximum(up, 0)] == base[nodes]))
        start = np.where(chain, node_frame[np.maximum(up, 0)], np.where(launch, ROOT, base[nodes]))
        node_frame[nodes] = b.children(start, names[nodes])
    device_owner, device_frame = _device_frames(model, b, node_frame, is_weighted)
    return FrameTree(names=b.names, name_kind=np.asarray(b.kinds, dtype=np.int8),
                     name=np.asarray(b.name, dtype=np.int64), parent=np.asarray(b.parent, dtype=np.int64),
                     depth=_frame_depth(np.asarray(b.parent, dtype=np.int64)), node_frame=node_frame,
                     device_frame=device_frame, device_owner=device_owner, python_stacks=has_python)


def _hosted_parent(tree: HostTree, hosted: np.ndarray) -> np.ndarray:
    """Parents of the ``hosted`` nodes as positions within ``hosted`` (-1 when the parent is not among them)."""
    parent = tree.parent[hosted]
    pos = np.full(tree.size, -1, dtype=np.int64)
    pos[hosted] = np.arange(len(hosted))
    out: np.ndarray = np.where(parent >= 0, pos[np.maximum(parent, 0)], -1)
    return out


def _device_frames(model: TraceModel, b: _Builder, node_frame: np.ndarray,
                   is_weighted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each device event under the operator or annotation whose launch call launched it (a top frame if none)."""
    tree = host_tree(model)
    ev = model["events"]
    launch = tree.device_launch
    up = np.where(launch >= 0, tree.parent[np.maximum(launch, 0)], -1) if len(launch) else launch
    owner = np.where((up >= 0) & is_weighted[np.maximum(up, 0)], up, -1) if len(up) else up
    names = b.name_ids(model, ev["name"][model["device_events"]["row"]], FrameKind.DEVICE)
    start = np.where(owner >= 0, node_frame[np.maximum(owner, 0)], ROOT) if len(owner) else owner
    return owner.astype(np.int64), b.children(start, names)


def _frame_depth(parent: np.ndarray) -> np.ndarray:
    """Depth per frame; parents are numbered before their children, so one pass in order suffices."""
    depth = np.zeros(len(parent), dtype=np.int32)
    for level in levels(parent):
        up = parent[level]
        depth[level] = np.where(up >= 0, depth[np.maximum(up, 0)] + 1, 0)
    return depth


def _merged(tree: FrameTree) -> FrameTree:
    """The tree by function: each frame re-interned under its merged parent with its merged name, so frames that
    differ only by line number or object address become one (a few thousand frames, not the events)."""
    b = _Builder(True)
    name_map = np.asarray([b.name_id(text, FrameKind(k)) for text, k in zip(tree.names, tree.name_kind.tolist())],
                          dtype=np.int64)
    new = np.full(tree.size, ROOT, dtype=np.int64)
    for level in levels(tree.parent):
        up = tree.parent[level]
        new[level] = b.children(np.where(up >= 0, new[np.maximum(up, 0)], ROOT), name_map[tree.name[level]])
    parent = np.asarray(b.parent, dtype=np.int64)
    return FrameTree(names=b.names, name_kind=np.asarray(b.kinds, dtype=np.int8), name=np.asarray(b.name, np.int64),
                     parent=parent, depth=_frame_depth(parent),
                     node_frame=np.where(tree.node_frame >= 0, new[np.maximum(tree.node_frame, 0)], -1),
                     device_frame=new[tree.device_frame] if len(new) else tree.device_frame,
                     device_owner=tree.device_owner, python_stacks=tree.python_stacks)
