"""Busy and idle device time as intervals: the base every diagnosis measure subtracts from or intersects with."""

from __future__ import annotations

import numpy as np

from ...model import intervals as iv
from ...model.arrays import isin_ints
from ...model.derived import memoized
from ...model.kinds import DEVICE_KINDS
from ...model.tables import TraceModel
from ..steps import find_steps


def spans(model: TraceModel, mask: np.ndarray) -> iv.Intervals:
    """The union of the masked events' [ts, ts + dur)."""
    return iv.union(model["events"]["ts"][mask], ends(model, mask))


def ends(model: TraceModel, index: np.ndarray) -> np.ndarray:
    """The ends of the events ``index`` selects (rows or a mask), as :func:`spans` takes them: a missing or
    infinite duration as none."""
    ev = model["events"]
    end: np.ndarray = ev["ts"][index] + np.nan_to_num(ev["dur"][index], nan=0.0, posinf=0.0).clip(min=0.0)
    return end


@memoized
def gpu_idle(model: TraceModel) -> iv.Intervals:
    """Step time in which no device work (kernel, copy, set; any device) ran."""
    steps = find_steps(model)
    busy = spans(model, isin_ints(model["events"]["kind"], DEVICE_KINDS))
    return iv.subtract(iv.union(steps.start, steps.end), busy)
