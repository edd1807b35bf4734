"""Whose code each frame of a snapshot's stacks is, and the user's frame that made each allocation.

torch records a stack per allocation, innermost first, of Python frames (absolute file paths, as ``co_filename``
has them) and, with ``stacks="all"`` (the default), C++ frames (``??`` or a ``.cpp`` path, a demangled name). The
views lead with the user's own frame (``train.py:63 train_step``), so each distinct file is classified once with
the rules of :mod:`.sources` (site-packages and the standard library are libraries, TorchInductor's cache is
generated code); a C++ frame is a library frame. An allocation is coloured and grouped by its innermost user frame.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..model.snapshot import AllocatorSnapshot, snapshot_memo
from .sources import classify, library_roots

KINDS = ("user", "library", "generated", "cpp")
USER, LIBRARY, GENERATED, CPP = range(4)
# an autograd node's C++ frame: ``torch::autograd::generated::MmBackward0::apply(...)``
_AUTOGRAD_NODE = re.compile(r"(?:autograd::generated::)?(\w*Backward\d*)::apply")
_AUTOGRAD_ENGINE = "torch::autograd::Engine::"


def is_python_file(path: str) -> bool:
    """A Python frame's file (``.py``, or ``<frozen os>``/``<eval_with_key>.3``); else a C++ frame."""
    return path.endswith((".py", ".pyw")) or (path.startswith("<") and path.endswith(">")) or \
        path.startswith("<eval_with_key>")


@dataclass(frozen=True)
class FrameKinds:
    kind: np.ndarray  # i1 per frame: index into KINDS
    user_frame: np.ndarray  # i4 per stack: its innermost user frame, -1 when it has none
    python_frame: np.ndarray  # i4 per stack: its innermost Python frame (user or library), -1 when none
    origin: np.ndarray  # i4 per stack: the frame that made it (user, else Python, else the autograd node or engine)

    def origin_of(self, stacks: np.ndarray) -> np.ndarray:
        """The origin frame of each stack index (-1 for none or no stack)."""
        out = np.full(len(stacks), -1, dtype=np.int32)
        has = stacks >= 0
        out[has] = self.origin[stacks[has]]
        return out


@snapshot_memo
def frame_kinds(snap: AllocatorSnapshot) -> FrameKinds:
    files = [snap.strings[int(c)] for c in np.unique(snap.frame_file).tolist()]
    roots = library_roots([f for f in files if is_python_file(f) and f.startswith("/")])
    kind_of = {f: (KINDS.index(classify(f, roots)) if is_python_file(f) else CPP) for f in files}
    by_code = np.full(len(snap.strings), CPP, dtype=np.int8)
    for code in np.unique(snap.frame_file).tolist():
        by_code[code] = kind_of[snap.strings[int(code)]]
    kind = by_code[snap.frame_file] if len(snap.frame_file) else np.empty(0, dtype=np.int8)
    n_stacks = len(snap.stack_offsets) - 1
    user = _innermost(snap, kind == USER, n_stacks)
    python = _innermost(snap, kind != CPP, n_stacks)
    node = np.array([_AUTOGRAD_NODE.search(snap.strings[int(c)]) is not None for c in snap.frame_name.tolist()],
                    dtype=bool).reshape(len(kind))
    autograd = _innermost(snap, node & (kind == CPP), n_stacks)
    engine = np.array([_AUTOGRAD_ENGINE in snap.strings[int(c)] for c in snap.frame_name.tolist()],
                      dtype=bool).reshape(len(kind))
    autograd = np.where(autograd >= 0, autograd, _innermost(snap, engine & (kind == CPP), n_stacks))
    origin = np.where(user >= 0, user, np.where(python >= 0, python, autograd)).astype(np.int32)
    return FrameKinds(kind=kind, user_frame=user, python_frame=python, origin=origin)


def _innermost(snap: AllocatorSnapshot, wanted: np.ndarray, n_stacks: int) -> np.ndarray:
    """Per stack, its first (innermost) frame where ``wanted`` holds, -1 where none does."""
    out = np.full(n_stacks, -1, dtype=np.int32)
    if not len(snap.stack_frames):
        return out
    hit = np.flatnonzero(wanted[snap.stack_frames])
    owner = np.searchsorted(snap.stack_offsets, hit, side="right") - 1
    first = np.unique(owner, return_index=True)[1]
    out[owner[first]] = snap.stack_frames[hit[first]]
    return out


def frame_label(snap: AllocatorSnapshot, f: int) -> str:
    """``train.py:63 train_step`` (the file's base name): how a frame is named in legends and tables."""
    if f < 0:
        return "(no stack recorded)"
    path = snap.strings[int(snap.frame_file[f])]
    name = snap.strings[int(snap.frame_name[f])]
    line = int(snap.frame_line[f])
    node = _AUTOGRAD_NODE.search(name)
    if node is not None and not is_python_file(path):
        return f"{node.group(1)} (autograd)"
    if _AUTOGRAD_ENGINE in name and not is_python_file(path):
        return "autograd engine (C++)"
    return f"{posixpath.basename(path) or path}:{line} {name}" if line >= 0 else f"{posixpath.basename(path)} {name}"


def frame_dict(snap: AllocatorSnapshot, f: int) -> dict[str, Any]:
    kinds = frame_kinds(snap)
    return {"file": snap.strings[int(snap.frame_file[f])], "line": int(snap.frame_line[f]),
            "name": snap.strings[int(snap.frame_name[f])], "kind": KINDS[int(kinds.kind[f])]}


def stack_frames(snap: AllocatorSnapshot, s: int, limit: int = 200) -> list[dict[str, Any]]:
    """The frames of stack ``s``, innermost first (at most ``limit``), each with its kind."""
    return [frame_dict(snap, int(f)) for f in snap.stack(s)[:limit].tolist()]
