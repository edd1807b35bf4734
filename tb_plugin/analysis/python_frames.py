"""Python frames of a trace (``python_function`` events, ``with_stack=True``) in the user's terms: per frame, its
nearest **user** frame (a file that is neither a library, the standard library nor generated code:
``analysis.sources.classify``), the frame just inside that one (the call the user's line makes; frames that only
forward a call, such as ``Module._call_impl``, skipped) and its nearest ``nn.Module`` frame. The diagnosis says where
a cause lives with it (``diagnosis/location.py``); a rank summary compares its ranks' Python functions with it
(``rank_summary.own_work``). Nested by time per thread (the parent-id chain is sometimes cut), one numpy pass per
nesting level; memoised per model.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ..model.derived import memoized
from ..model.nesting import nest
from ..model.order import preorder
from ..model.tables import TraceModel
from .sources import FRAME, classify, library_roots

# Library functions that only forward a call (the API is the one below them).
PLUMBING = re.compile(r"\): (?:_call_impl|_wrapped_call_impl|__call__|inner|wrapper|_fn|decorate_context|"
                      r"_use_grad|maybe_fallback|_compile|run_fn)$")
_BUILTIN = re.compile(r"^<built-in (?:method (\w+)(?: of (\w+) object)?|function (\w+))")
_INSTALLED = re.compile(r"^.*/(?:site-packages|dist-packages|lib/python\d+(?:\.\d+)?)/")


@dataclass(frozen=True)
class PyFrames:
    """The trace's ``python_function`` frames in preorder per thread, with per frame its nearest user frame, the
    frame just inside that one (the API the user's line calls) and its nearest module frame (indices, -1: none)."""

    rows: np.ndarray  # event rows
    name: np.ndarray
    pid: np.ndarray
    tid: np.ndarray
    start: np.ndarray
    end: np.ndarray
    parent: np.ndarray
    user: np.ndarray
    called: np.ndarray
    module: np.ndarray

    @property
    def size(self) -> int:
        return len(self.name)


def _kinds(model: TraceModel, names: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per distinct name code of ``names``: is it a user source frame, a module frame, a plumbing frame."""
    codes = np.unique(names)
    texts = [model.strings[int(c)] if c >= 0 else "" for c in codes.tolist()]
    paths = [m.group(1) if (m := FRAME.match(t)) else None for t in texts]
    roots = library_roots([p for p in paths if p])
    user = np.array([p is not None and classify(p, roots) == "user" for p in paths], dtype=bool)
    module = np.array([t.startswith("nn.Module: ") for t in texts], dtype=bool)
    plumbing = np.array([PLUMBING.search(t) is not None for t in texts], dtype=bool)
    pos = np.searchsorted(codes, names)
    return user[pos], module[pos], plumbing[pos]


@memoized
def python_frames(model: TraceModel) -> PyFrames:
    """The frames of the module docstring, nested by time per thread (the parent-id chain is sometimes cut)."""
    ev = model["events"]
    rows = model["python"]["row"]
    start = ev["ts"][rows]
    dur = np.nan_to_num(ev["dur"][rows], nan=0.0).clip(min=0.0)
    pid, tid = ev["pid"][rows], ev["tid"][rows]
    order = preorder(pid, tid, start, dur)
    rows, start, dur, pid, tid = rows[order], start[order], dur[order], pid[order], tid[order]
    end = start + dur
    parent, depth = nest(pid, tid, start, end) if len(rows) else (np.zeros(0, np.int64), np.zeros(0, np.int64))
    name = ev["name"][rows].astype(np.int64)
    is_user, is_module, plumbing = _kinds(model, name) if len(rows) else (np.zeros(0, bool),) * 3
    n = len(rows)
    user, called, module = (np.full(n, -1, dtype=np.int32) for _ in range(3))  # frame indices: 4 bytes each
    by_depth = np.argsort(depth, kind="stable")  # each level's frames ascending, as np.flatnonzero(depth == d)
    bounds = np.searchsorted(depth[by_depth], np.arange(int(depth.max(initial=-1)) + 2))
    for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist()):  # parents before children
        at = by_depth[lo:hi]
        up = parent[at]
        has = up >= 0
        upc = np.maximum(up, 0)
        user[at] = np.where(is_user[at], at, np.where(has, user[upc], -1))
        # the frame right inside the user frame; a frame that only forwards the call leaves it to the next one
        below_user = has & is_user[upc]
        inherited = np.where(has & ~is_user[upc], called[upc], -1)
        forwarded = inherited >= 0
        forwarded[forwarded] = plumbing[inherited[forwarded]]
        called[at] = np.where(is_user[at], -1, np.where(below_user | forwarded, at, inherited))
        module[at] = np.where(is_module[at], at, np.where(has, module[upc], -1))
    return PyFrames(rows=rows, name=name, pid=pid, tid=tid, start=start, end=end, parent=parent, user=user,
                    called=called, module=module)


def short_frame(frame: str) -> str:
    """``train.py(107): train_step`` → ``train.py:107 (train_step)``."""
    m = FRAME.match(frame.strip())
    return f"{m.group(1)}:{m.group(2)} ({m.group(3)})" if m else frame


def module_name(frame: str) -> str:
    """``nn.Module: Linear_0`` → ``nn.Module Linear``."""
    return "nn.Module " + re.sub(r"_\d+$", "", frame.removeprefix("nn.Module: "))


def api_name(frame: str) -> str:
    """A Python frame as the API a user calls: ``torch/cuda/memory.py(222): empty_cache`` →
    ``torch.cuda.memory.empty_cache``; ``<built-in method item of Tensor object at 0x…>`` → ``Tensor.item``;
    ``<built-in function print>`` → ``print``; ``nn.Module: Linear_0`` → ``Linear.forward``."""
    if frame.startswith("nn.Module: "):
        return re.sub(r"_\d+$", "", frame.removeprefix("nn.Module: ")) + ".forward"
    b = _BUILTIN.match(frame)
    if b:
        if b.group(3):
            return b.group(3)
        if not b.group(2):
            return b.group(1)
        owner = {"type": "torch", "Tensor": "Tensor"}.get(b.group(2), b.group(2))
        return f"{owner}.{b.group(1)}"
    m = FRAME.match(frame.strip())
    if not m:
        return frame
    path = _INSTALLED.sub("", m.group(1).replace("\\", "/"))
    module = re.sub(r"\.py$", "", path).replace("/", ".").removesuffix(".__init__")
    return f"{module}.{m.group(3)}"
