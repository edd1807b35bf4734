"""Training phases in time: which step, and forward, backward or optimizer, each moment of a trace belongs to.

The memory-by-category inference (:mod:`.memory_categories`) labels an allocation by the phase it is created and
freed in. Phases come from what PyTorch itself records, never from user annotation names:

- steps: the host ``ProfilerStep#N`` spans (``prof.step()``); a trace without them is one step;
- backward: within a step, from the first to the last ``autograd::engine::evaluate_function: …`` operator (the
  autograd engine runs every backward node under one, on its own thread);
- optimizer: ``Optimizer.step#<Class>.step`` and ``Optimizer.zero_grad#<Class>.zero_grad``, which
  ``torch.optim.Optimizer`` records around every ``step()`` and ``zero_grad()``;
- forward: the rest of a step (everything the step does outside backward and the optimizer).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import IntEnum

import numpy as np

from ..model import intervals as iv
from ..model.arrays import isin_ints
from ..model.derived import memoized
from ..model.kinds import Kind
from ..model.names import name_mask
from ..model.tables import TraceModel
from .steps import find_steps
from .summary import time_range_us

BACKWARD_PREFIX = "autograd::engine::evaluate_function: "
_OPTIMIZER = re.compile(r"^Optimizer\.(?:step|zero_grad)#(?P<cls>[^.]+)\.(?:step|zero_grad)$")


class Phase(IntEnum):
    OUTSIDE = 0  # before the first step, between steps, after the last
    FORWARD = 1
    BACKWARD = 2
    OPTIMIZER = 3


@dataclass(frozen=True)
class Phases:
    step_start: np.ndarray  # host span of each step, in time order
    step_end: np.ndarray
    backward_start: np.ndarray  # per step; +inf when the step ran no backward
    backward_end: np.ndarray
    optimizer: iv.Intervals  # every optimizer step and zero_grad
    optimizer_class: str | None  # ``AdamW`` from ``Optimizer.step#AdamW.step``

    def step_of(self, t: np.ndarray) -> np.ndarray:
        """Index of the step holding each time, -1 outside every step."""
        i = np.searchsorted(self.step_start, t, side="right") - 1
        inside = (i >= 0) & (t < self.step_end[np.clip(i, 0, None)]) if len(self.step_start) else i < -1
        return np.where(inside, i, -1)

    def phase_of(self, t: np.ndarray) -> np.ndarray:
        """The :class:`Phase` of each time (``inf``: never, OUTSIDE)."""
        step = self.step_of(t)
        s = np.clip(step, 0, None)
        in_bw = (step >= 0) & (t >= self.backward_start[s]) & (t < self.backward_end[s]) if len(s) else step < -1
        out = np.where(step >= 0, Phase.FORWARD, Phase.OUTSIDE)
        out = np.where(in_bw, Phase.BACKWARD, out)
        out = np.where((step >= 0) & iv_contains(self.optimizer, t), Phase.OPTIMIZER, out)
        return out.astype(np.int8)

    def optimizer_end(self, t: np.ndarray) -> np.ndarray:
        """End of the optimizer interval holding each time (NaN where none holds it)."""
        starts, ends = self.optimizer
        i = np.searchsorted(starts, t, side="right") - 1
        ok = (i >= 0) & (t < ends[np.clip(i, 0, None)]) if len(starts) else i < -1
        return np.where(ok, ends[np.clip(i, 0, None)] if len(ends) else np.nan, np.nan)


def iv_contains(intervals: iv.Intervals, t: np.ndarray) -> np.ndarray:
    """Whether each time lies in one of the sorted disjoint [start, end) intervals."""
    starts, ends = intervals
    if not len(starts):
        return np.zeros(len(t), dtype=bool)
    i = np.searchsorted(starts, t, side="right") - 1
    return (i >= 0) & (t < ends[np.clip(i, 0, None)])


def _spans(model: TraceModel, kinds: tuple[int, ...], predicate: object) -> tuple[np.ndarray, np.ndarray]:
    ev = model["events"]
    rows = np.flatnonzero(isin_ints(ev["kind"], kinds) & name_mask(model, ev["name"], predicate)
                          & np.isfinite(ev["ts"]) & np.isfinite(ev["dur"]))
    return ev["ts"][rows], ev["ts"][rows] + np.maximum(ev["dur"][rows], 0.0)


@memoized
def training_phases(model: TraceModel) -> Phases:
    steps = find_steps(model)
    start, end = steps.host_start.astype(np.float64), steps.host_end.astype(np.float64)
    if not len(start):
        whole = time_range_us(model) or (0.0, 0.0)
        start, end = np.array([whole[0]]), np.array([np.nextafter(whole[1], np.inf)])
    order = np.argsort(start, kind="stable")
    start, end = start[order], end[order]
    bw_s, bw_e = _spans(model, (Kind.CPU_OP,), lambda s: s.startswith(BACKWARD_PREFIX))
    step = np.searchsorted(start, bw_s, side="right") - 1
    ok = (step >= 0) & (bw_s < end[np.clip(step, 0, None)])
    backward_start = np.full(len(start), np.inf)
    backward_end = np.full(len(start), np.inf)
    np.minimum.at(backward_start, step[ok], bw_s[ok])
    backward_end[np.isfinite(backward_start)] = -np.inf
    np.maximum.at(backward_end, step[ok], bw_e[ok])
    opt_s, opt_e = _spans(model, (Kind.USER_ANNOTATION, Kind.CPU_OP), lambda s: _OPTIMIZER.match(s) is not None)
    return Phases(start, end, backward_start, backward_end, iv.union(opt_s, opt_e), _optimizer_class(model))


def _optimizer_class(model: TraceModel) -> str | None:
    for code in model.codes_where(lambda s: _OPTIMIZER.match(s) is not None).tolist():
        m = _OPTIMIZER.match(model.strings[code])
        if m:
            return m.group("cls")
    return None
