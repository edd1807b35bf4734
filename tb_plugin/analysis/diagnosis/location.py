"""Where in the step a finding's evidence lives, in the user's terms: the ``record_function`` region, the framework
annotation (optimizer step, DDP/FSDP, compiled region, backward), the ``nn.Module``, and the user's own stack frame
(``train.py:107 (train_step)``) with the API it calls there (``torch.cuda.memory.empty_cache``).

A finding's evidence is a set of time intervals on some host threads (the calls it counts, or the GPU-idle time it
claims). Each interval microsecond is attributed, as a sampling profiler would, to what the thread was in at that
moment:

- Python: the innermost ``python_function`` frame open then (its *self* overlap: its overlap with the evidence less
  that of the frames inside it), then, walking outwards, to its nearest **user** frame (a file that is neither a
  library, the standard library nor generated code: ``analysis.sources.classify``), the frame just inside it (the
  API the user's line calls) and the nearest ``nn.Module`` frame. The user frame holding the most evidence time is
  the location. A thread without Python frames (autograd's backward thread) is attributed through the main
  thread's frames at the same moment (there, ``loss.backward()``); 1.x traces through their operators' ``Call
  stack`` args.
- Annotations: every ``record_function`` range (``ProfilerStep#N`` aside) and autograd's ``evaluate_function``
  nodes containing the evidence, by inclusive overlap; the deepest one that holds at least half of it is named.

Pure numpy over the python frames and the host tree, one pass per nesting level; memoised per model.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...model import intervals as iv
from ...model.arrays import isin_ints, take, unique_ints
from ...model.derived import memoized
from ...model.kinds import Kind
from ...model.lookups import side_row
from ...model.names import step_mask
from ...model.optree import host_tree
from ...model.tables import TraceModel
from ..python_frames import PLUMBING, PyFrames, api_name, module_name, python_frames, short_frame
from ..sources import FRAME, classify, library_roots

# Annotations that a framework writes (not the user's own record_function regions).
_FRAMEWORK = re.compile(r"^(?:Optimizer\.|DistributedDataParallel\.|FullyShardedDataParallel|FSDP::|\[pl\]|"
                        r"## Call CompiledFxGraph|Torch-Compiled Region|CompiledFunction|enumerate\(DataLoader\)|"
                        r"enumerate\(DataPipe\)|autograd::engine::evaluate_function)")
_BACKWARD = "autograd::engine::evaluate_function: "
_HALF = 0.5  # an annotation is named where it holds at least this share of the evidence


@memoized
def main_threads(model: TraceModel) -> tuple[tuple[int, int], ...]:
    """The threads that run the steps (those of ``ProfilerStep#``), else the one with the most host-op time."""
    ev = model["events"]
    steps = step_mask(model, ev["name"])
    steps &= ev["kind"] == Kind.USER_ANNOTATION
    mask = steps if steps.any() else isin_ints(ev["kind"], (Kind.CPU_OP, Kind.USER_ANNOTATION))
    if not mask.any():
        return ()
    pairs = np.unique(np.stack([ev["pid"][mask], ev["tid"][mask]], axis=1), axis=0)
    if steps.any():
        return tuple((int(p), int(t)) for p, t in pairs.tolist())
    weight = np.nan_to_num(ev["dur"][mask], nan=0.0)
    best = max(pairs.tolist(), key=lambda pt: float(weight[(ev["pid"][mask] == pt[0]) & (ev["tid"][mask] == pt[1])]
                                                           .sum()))
    return ((int(best[0]), int(best[1])),)


@dataclass(frozen=True)
class Where:
    """The location of a finding's evidence (module docstring); every field may be missing."""

    frame: str | None = None  # the user's frame, as the trace writes it: "train.py(107): train_step"
    calls: str | None = None  # the frame just inside it: the API that line calls
    module: str | None = None  # "nn.Module: Linear_0"
    region: str | None = None  # the user's record_function region
    annotation: str | None = None  # a framework annotation (Optimizer.step#AdamW.step, backward, compiled region)
    share: float = 0.0  # share of the evidence time at ``frame``

    def api(self) -> str | None:
        """The called API in Python terms: ``torch.cuda.memory.empty_cache``, ``Tensor.item``, ``print``."""
        return api_name(self.calls) if self.calls else None

    def text(self) -> str:
        """"train.py:107 (train_step) → torch.cuda.memory.empty_cache, in nn.Module Linear, inside 'forward'"."""
        parts = []
        if self.frame:
            lead = short_frame(self.frame)
            api = self.api()
            parts.append(f"{lead} → {api}" if api else lead)
        if self.module:
            parts.append(f"in {module_name(self.module)}")
        api = self.api()
        inside = [f"'{a}'" for a in (self.region, self.annotation) if a and a != api]
        if inside:
            parts.append("inside " + " and ".join(inside))
        return ", ".join(parts)

    def as_dict(self) -> dict[str, Any]:
        return {"text": self.text(), "frame": self.frame, "calls": self.calls, "api": self.api(),
                "module": self.module, "region": self.region, "annotation": self.annotation, "share": self.share}


def threads_of(model: TraceModel, rows: np.ndarray) -> tuple[tuple[int, int], ...]:
    """The (pid, tid) threads of these event rows."""
    ev = model["events"]
    if not len(rows):
        return ()
    pairs = np.unique(np.stack([ev["pid"][rows], ev["tid"][rows]], axis=1), axis=0)
    return tuple((int(p), int(t)) for p, t in pairs.tolist())


def _on_threads(pid: np.ndarray, tid: np.ndarray, threads: tuple[tuple[int, int], ...]) -> np.ndarray:
    mask = np.zeros(len(pid), dtype=bool)
    for p, t in threads:
        mask |= (pid == p) & (tid == t)
    return mask


def _top(keys: np.ndarray, weights: np.ndarray, named: bool = False) -> tuple[int, float]:
    """The key with the most weight and its weight ((-1, 0) if none); ``named``: a -1 key never wins over
    another."""
    if not len(keys) or weights.sum() <= 0:
        return -1, 0.0
    codes, group = unique_ints(keys, return_inverse=True)
    totals = np.bincount(group.reshape(-1), weights=weights, minlength=len(codes))
    if named and codes[0] < 0 and len(codes) > 1 and totals[1:].max() > 0:
        totals[0] = 0.0
    best = int(np.argmax(totals))
    return int(codes[best]), float(totals[best])


def _python_site(model: TraceModel, evidence: iv.Intervals, threads: tuple[tuple[int, int], ...]
                 ) -> tuple[str | None, str | None, str | None, float]:
    """The user frame holding the most evidence time, the API it calls there, the module around it, its share."""
    f = python_frames(model)
    idx = np.flatnonzero(_on_threads(f.pid, f.tid, threads))
    if not len(idx):
        idx = np.flatnonzero(_on_threads(f.pid, f.tid, main_threads(model)))
    if not len(idx):
        return None, None, None, 0.0
    overlap = np.zeros(f.size)
    overlap[idx] = iv.lengths_within(evidence, f.start[idx], f.end[idx])
    inner = np.zeros(f.size)
    up = f.parent[idx]
    np.add.at(inner, up[up >= 0], overlap[idx][up >= 0])
    own = (overlap[idx] - inner[idx]).clip(min=0.0)
    user = f.user[idx]
    code, weight = _top(np.where(user >= 0, f.name[np.maximum(user, 0)], -1), own, named=True)
    if code < 0:
        return None, None, None, 0.0
    mine = (user >= 0) & (f.name[np.maximum(user, 0)] == code)
    called = f.called[idx][mine]
    call, _ = _top(np.where(called >= 0, f.name[np.maximum(called, 0)], -1), own[mine])
    modules = f.module[idx][mine]
    mod, at_module = _top(np.where(modules >= 0, f.name[np.maximum(modules, 0)], -1), own[mine])
    mod = mod if at_module >= _HALF * weight else -1  # a module only where most of the frame's time is in it
    total = iv.total(evidence)
    return (model.strings[code], model.text(call), model.text(mod), weight / total if total > 0 else 0.0)


def _stack_site(model: TraceModel, evidence: iv.Intervals, threads: tuple[tuple[int, int], ...]
                ) -> tuple[str | None, str | None, float]:
    """1.x traces: the user frame and the frame inside it from the ``Call stack`` of the operators holding the
    evidence: each operator's self overlap (less that of the operators inside it; ``ProfilerStep#``, an operator in
    1.x traces, left out), by stack; threads without stacks (autograd's) read the main threads'."""
    tree = host_tree(model)
    ev = model["events"]
    ops_row = side_row(model, "ops")
    ops = (tree.kind == Kind.CPU_OP) & ~tree.merged & ~step_mask(model, ev["name"][tree.rows])
    stack_of = np.where(ops_row[tree.rows] >= 0, model["ops"]["call_stack"][np.maximum(ops_row[tree.rows], 0)], -1)
    for on in (threads, main_threads(model)):
        nodes = np.flatnonzero(ops & (stack_of >= 0) & _on_threads(ev["pid"][tree.rows], ev["tid"][tree.rows], on))
        if len(nodes):
            break
    if not len(nodes):
        return None, None, 0.0
    overlap = np.zeros(tree.size)
    overlap[nodes] = iv.lengths_within(evidence, tree.start[nodes], tree.end[nodes])
    inner = np.zeros(tree.size)
    up = take(tree.op_of, tree.parent[nodes], -1)
    np.add.at(inner, up[up >= 0], overlap[nodes][up >= 0])
    own = (overlap[nodes] - inner[nodes]).clip(min=0.0)
    code, weight = _top(stack_of[nodes], own, named=True)
    if code < 0:
        return None, None, 0.0
    frames = [f.strip() for f in model.strings[code].split(";") if f.strip()]
    paths = [m.group(1) if (m := FRAME.match(f)) else None for f in frames]
    roots = library_roots([p for p in paths if p])
    for i, p in enumerate(paths):
        if p is not None and classify(p, roots) == "user":
            total = iv.total(evidence)
            j = i - 1  # the call the user's line makes; frames that only forward it skipped
            while j > 0 and PLUMBING.search(frames[j]):
                j -= 1
            return frames[i], frames[j] if j >= 0 else None, min(weight / total, 1.0) if total > 0 else 0.0
    return None, None, 0.0


def _annotations(model: TraceModel, evidence: iv.Intervals, threads: tuple[tuple[int, int], ...] | None
                 ) -> tuple[str | None, str | None]:
    """The deepest user region and the deepest framework annotation holding at least half the evidence time
    (autograd's ``evaluate_function`` nodes count together as ``backward``)."""
    tree = host_tree(model)
    ev = model["events"]
    names = ev["name"][tree.rows]
    step = step_mask(model, names)
    backward = (tree.kind == Kind.CPU_OP) & isin_ints(names, model.codes_where(lambda s: s.startswith(_BACKWARD)))
    nodes = np.flatnonzero(((tree.kind == Kind.USER_ANNOTATION) & ~step) | backward)
    if threads:
        nodes = nodes[_on_threads(ev["pid"][tree.rows[nodes]], ev["tid"][tree.rows[nodes]], threads)]
    total = iv.total(evidence)
    if not len(nodes) or total <= 0:
        return None, None
    key = np.where(backward[nodes], -2, names[nodes]).astype(np.int64)
    overlap = iv.lengths_within(evidence, tree.start[nodes], tree.end[nodes])
    codes, group = unique_ints(key, return_inverse=True)
    group = group.reshape(-1)
    share = np.bincount(group, weights=overlap, minlength=len(codes)) / total
    depth = np.bincount(group, weights=tree.depth[nodes] * overlap, minlength=len(codes)) / np.maximum(
        share * total, 1e-9)
    texts = ["backward" if c == -2 else model.strings[int(c)] for c in codes.tolist()]
    framework = np.array([c == -2 or _FRAMEWORK.match(t) is not None for c, t in zip(codes.tolist(), texts)])
    out: list[str | None] = []
    for want in (False, True):
        ok = np.flatnonzero((framework == want) & (share >= _HALF))
        out.append(texts[int(ok[np.argmax(depth[ok])])] if len(ok) else None)
    return out[0], out[1]


def locate(model: TraceModel, evidence: iv.Intervals, threads: tuple[tuple[int, int], ...] | None = None) -> Where:
    """Where ``evidence`` (time intervals on ``threads``; None: the threads that run the steps) lives (module
    docstring)."""
    if not len(evidence[0]):
        return Where()
    on = threads or main_threads(model)
    if len(model["python"]["row"]):
        frame, calls, module, share = _python_site(model, evidence, on)
    else:
        frame, calls, share = _stack_site(model, evidence, on)
        module = None
    region, annotation = _annotations(model, evidence, threads)
    return Where(frame=frame, calls=calls, module=module, region=region, annotation=annotation, share=share)


def locate_rows(model: TraceModel, rows: np.ndarray) -> Where:
    """Where these host event rows (calls, operators, annotations) run."""
    ev = model["events"]
    start = ev["ts"][rows]
    evidence = iv.union(start, start + np.nan_to_num(ev["dur"][rows], nan=0.0).clip(min=0.0))
    return locate(model, evidence, threads_of(model, rows))

__all__ = ["PyFrames", "Where", "api_name", "locate", "locate_rows", "main_threads", "module_name", "python_frames",
           "short_frame", "threads_of"]
