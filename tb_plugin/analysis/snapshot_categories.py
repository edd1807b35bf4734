"""Memory by category in an allocator snapshot: the Memory view's categories, inferred from the stacks.

The trace's inference (:mod:`.memory_categories`) reads training phases from operators; a snapshot has no
operators but a stack per allocation, which says the phase outright. The same categories, by the same rules:

- the phase of an allocation: the optimizer when a frame is in ``torch/optim/``; backward when a frame is
  ``Tensor.backward``/``torch.autograd.backward`` or the autograd engine (its C++ frames: on the engine's own
  thread the backward allocations have no Python frame at all, so an allocation without Python frames right after
  backward ones is backward too); set-up when a frame is ``Module._apply``/``to``/``__init__`` (parameters made or
  moved); forward otherwise when it has Python frames;
- runs of one phase along the history are its windows (a backward, an optimizer step);
1. freed by the Python function that made it (the innermost Python frames of its alloc and its free agree, with
   ``context="all"``'s free stacks) → temporary;
2. backward → gradient when it outlives its backward window, else autograd detail;
3. optimizer → optimizer state when it outlives its optimizer window, else temporary;
4. forward → input when copied to the device (a ``_to_copy``/``copy_`` C++ frame or ``torch/utils/data``) outside
   a module call, temporary when freed inside its window, else activation;
5. set-up → parameter while it lives to the end, else temporary;
6. allocated before the history, known by its free only → by where it is freed: in the optimizer (``zero_grad``)
   a gradient, in backward an activation, else unknown; live at the end with its allocation stack → rules 2–5 as
   if still in its window; without any stack → unknown.
"""

from __future__ import annotations

from enum import IntEnum

import numpy as np

from ..model.memory_categories import CATEGORIES
from ..model.snapshot import AllocatorSnapshot, snapshot_memo
from .snapshot_frames import CPP, frame_kinds
from .snapshot_history import device_history

C = {name: i for i, name in enumerate(CATEGORIES)}


class StackPhase(IntEnum):
    UNKNOWN = 0  # no Python frame and no autograd engine frame
    FORWARD = 1
    BACKWARD = 2
    OPTIMIZER = 3
    SETUP = 4


_BACKWARD_PY = {("torch/_tensor.py", "backward"), ("torch/autograd/__init__.py", "backward"),
                ("torch/autograd/__init__.py", "grad"), ("torch/autograd/graph.py", "_engine_run_backward")}
_SETUP_PY = {"_apply", "to", "cuda", "__init__", "reset_parameters", "load_state_dict", "_load_from_state_dict"}
_MODULE_CALL = {"_call_impl", "_wrapped_call_impl"}
_COPY_CPP = ("_to_copy", "copy_", "pin_memory")


def _torch_rel(path: str) -> str:
    """``torch/optim/adam.py`` for any absolute or relative path into the torch package."""
    i = path.rfind("/torch/")
    return path[i + 1:] if i >= 0 else path


def _frame_facts(snap: AllocatorSnapshot) -> tuple[np.ndarray, np.ndarray]:
    """Per frame: the phase it alone implies (a StackPhase, UNKNOWN for none) and whether it copies to the device."""
    n = len(snap.frame_file)
    phase = np.zeros(n, dtype=np.int8)
    copy = np.zeros(n, dtype=bool)
    kinds = frame_kinds(snap).kind
    for f in range(n):
        path, name = snap.strings[int(snap.frame_file[f])], snap.strings[int(snap.frame_name[f])]
        rel = _torch_rel(path)
        if kinds[f] == CPP:
            if "torch::autograd::Engine" in name or "autograd::generated::" in name:
                phase[f] = StackPhase.BACKWARD
            copy[f] = any(k in name for k in _COPY_CPP)
        elif rel.startswith("torch/optim/"):
            phase[f] = StackPhase.OPTIMIZER
        elif (rel, name) in _BACKWARD_PY:
            phase[f] = StackPhase.BACKWARD
        elif rel == "torch/nn/modules/module.py" and name in _MODULE_CALL:
            phase[f] = StackPhase.FORWARD
        elif rel.startswith("torch/nn/") and name in _SETUP_PY:
            phase[f] = StackPhase.SETUP
        elif rel.startswith("torch/utils/data/"):
            copy[f] = True
    return phase, copy


@snapshot_memo
def stack_phases(snap: AllocatorSnapshot) -> tuple[np.ndarray, np.ndarray]:
    """Per stack: its phase (optimizer, then backward, set-up, forward, by the first that any frame implies;
    forward for any other stack with Python frames) and whether it copies data to the device outside a module."""
    frame_phase, frame_copy = _frame_facts(snap)
    n_stacks = len(snap.stack_offsets) - 1
    owner = np.repeat(np.arange(n_stacks), np.diff(snap.stack_offsets))
    has = np.zeros((n_stacks, 5), dtype=bool)
    has[owner, frame_phase[snap.stack_frames]] = True
    python = frame_kinds(snap).python_frame >= 0
    phase = np.select([has[:, StackPhase.OPTIMIZER], has[:, StackPhase.BACKWARD], has[:, StackPhase.SETUP],
                       has[:, StackPhase.FORWARD] | python], [StackPhase.OPTIMIZER, StackPhase.BACKWARD,
                                                              StackPhase.SETUP, StackPhase.FORWARD],
                      StackPhase.UNKNOWN).astype(np.int8)
    copies = np.zeros(n_stacks, dtype=bool)
    np.logical_or.at(copies, owner, frame_copy[snap.stack_frames])
    return phase, copies & ~has[:, StackPhase.FORWARD]


@snapshot_memo
def allocation_phases(snap: AllocatorSnapshot, device: int) -> tuple[np.ndarray, np.ndarray]:
    """(phase, end of its window as a position) of each allocation of the device's history."""
    h = device_history(snap, device)
    phase_of_stack, _ = stack_phases(snap)
    phase = np.where(h.stack >= 0, phase_of_stack[np.clip(h.stack, 0, None)], StackPhase.UNKNOWN).astype(np.int8)
    phase[h.stack_is_free] = StackPhase.UNKNOWN
    seen = np.flatnonzero(h.start >= 0)
    seen = seen[np.argsort(h.start[seen], kind="stable")]
    seq = phase[seen].copy()
    # an allocation without Python frames right after backward ones is backward: each unknown takes backward when
    # the last known phase before it is backward
    known = np.where(seq != StackPhase.UNKNOWN, np.arange(len(seq)), -1)
    last = np.maximum.accumulate(known) if len(seq) else known
    after_backward = (last >= 0) & (seq[np.clip(last, 0, None)] == StackPhase.BACKWARD)
    seq[(seq == StackPhase.UNKNOWN) & after_backward] = StackPhase.BACKWARD
    phase[seen] = seq
    window_end = np.full(len(phase), h.n, dtype=np.int64)
    if len(seq):
        change = np.flatnonzero(seq[1:] != seq[:-1]) + 1
        run_of = np.searchsorted(change, np.arange(len(seq)), side="right")
        next_start = np.append(h.start[seen][change], h.n)
        window_end[seen] = next_start[run_of]
    return phase, window_end


def windows(snap: AllocatorSnapshot, device: int, of: StackPhase) -> tuple[np.ndarray, np.ndarray]:
    """(first position, next window's first position) of each window of phase ``of`` along the history."""
    h = device_history(snap, device)
    phase, window_end = allocation_phases(snap, device)
    mine = np.flatnonzero((phase == of) & (h.start >= 0))
    order = np.argsort(window_end[mine], kind="stable")
    ends, first = np.unique(window_end[mine][order], return_index=True)
    starts = np.minimum.reduceat(h.start[mine][order], first) if len(mine) else ends
    return starts.astype(np.int64), ends.astype(np.int64)


@snapshot_memo
def categories(snap: AllocatorSnapshot, device: int) -> np.ndarray:
    """The category index (``CATEGORIES``) of each allocation of the device's history (rules 1–6)."""
    h = device_history(snap, device)
    phase, window_end = allocation_phases(snap, device)
    phase_of_stack, copies = stack_phases(snap)
    py = frame_kinds(snap).python_frame
    same_function = _same_function(snap, py, h.stack, h.free_stack) & ~h.stack_is_free
    outlives = h.end >= window_end
    before = h.start < 0
    free_phase = np.where(h.free_stack >= 0, phase_of_stack[np.clip(h.free_stack, 0, None)], StackPhase.UNKNOWN)
    copied = np.where(h.stack >= 0, copies[np.clip(h.stack, 0, None)], False)
    rules = [
        (h.stack_is_free & (free_phase == StackPhase.OPTIMIZER), C["gradient"]),
        (h.stack_is_free & (free_phase == StackPhase.BACKWARD), C["activation"]),
        (h.stack_is_free, C["unknown"]),
        (same_function & (phase != StackPhase.BACKWARD) & ~before, C["temporary"]),
        ((phase == StackPhase.BACKWARD) & outlives, C["gradient"]),
        (phase == StackPhase.BACKWARD, C["autograd_detail"]),
        ((phase == StackPhase.OPTIMIZER) & outlives, C["optimizer_state"]),
        (phase == StackPhase.OPTIMIZER, C["temporary"]),
        ((phase == StackPhase.FORWARD) & copied, C["input"]),
        ((phase == StackPhase.FORWARD) & outlives, C["activation"]),
        (phase == StackPhase.FORWARD, C["temporary"]),
        ((phase == StackPhase.SETUP) & (h.end >= h.n), C["parameter"]),
        (phase == StackPhase.SETUP, C["temporary"]),
    ]
    return np.select([r[0] for r in rules], [r[1] for r in rules], C["unknown"]).astype(np.int8)


def _same_function(snap: AllocatorSnapshot, python_frame: np.ndarray, alloc: np.ndarray,
                   free: np.ndarray) -> np.ndarray:
    """Whether the innermost Python frames of the alloc's and the free's stacks are one function of one file."""
    a = np.where(alloc >= 0, python_frame[np.clip(alloc, 0, None)], -1)
    f = np.where(free >= 0, python_frame[np.clip(free, 0, None)], -1)
    ok = (a >= 0) & (f >= 0)
    ac, fc = np.clip(a, 0, None), np.clip(f, 0, None)
    same: np.ndarray = ok & (snap.frame_file[ac] == snap.frame_file[fc]) & (snap.frame_name[ac] == snap.frame_name[fc])
    return same
