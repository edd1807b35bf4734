"""The root-cause findings' fixes as what-if changes (``whatif/changes.py``), as ``fixes.py`` does for the symptom
findings: what the advice does to the trace's events, so that a finding's saving is the replayed step time without
it. docs/guide/overview.md lists each change and its constants.

- Allocator churn: the ``cudaMalloc``/``cudaFree`` calls vanish (a warm cache serves the blocks: ``CACHED_ALLOC_US``).
- Recompilation: the compile events inside the steps vanish (the guards hold, the graph is reused).
- Checkpointing recompute: the forward operators re-run in backward vanish with their kernels.
- Unfused optimizer: per step, the optimizer's kernels become one fused kernel that moves each parameter's state
  once (``FUSED_SHARE`` of their time) with one launch, and its per-parameter operators' host time goes.
- Host compute: the main thread's CPU work leaves the step (to DataLoader workers, or to the GPU at a launch each).
- cuDNN autotuning: the candidate algorithms' kernels and the syncs between them vanish.
- The straggler's own cause: its Python call, operator or kernel vanishes on that rank only (``own_rank``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...model.kinds import Kind
from ...model.tables import TraceModel
from ..whatif.changes import Change, Combined, DropDevice, DropHost, ReplaceDevice
from ..whatif.constants import CACHED_ALLOC_US, KERNEL_LAUNCH_US
from . import causes as C

# A fused optimizer step (one multi-tensor kernel: AdamW reads param, grad, exp_avg, exp_avg_sq and writes param,
# exp_avg, exp_avg_sq: 7 accesses of 4 B per fp32 parameter) against the foreach path (lerp, mul, addcmul, sqrt,
# div, addcdiv, add: each reads and writes its tensor lists, ~20 accesses per parameter): ~0.35 of the memory
# traffic. The per-parameter loop's kernels are launch-bound rather than memory-bound, so the same share of their
# time is conservative there (the trace's TensorList inputs carry no sizes to count the bytes from).
FUSED_SHARE = 0.35


def allocator(model: TraceModel) -> Change:
    return DropHost(id="allocator_churn", label="keep the allocator's cache warm (no empty_cache, fixed sizes)",
                    rows=C.allocator_calls(model).rows, keep_us=CACHED_ALLOC_US)


def recompile(model: TraceModel) -> Change:
    return DropHost(id="recompilation", label="compile once (dynamic shapes, fixed sizes)",
                    rows=C.compile_events(model).rows)


def recompute(model: TraceModel) -> Change:
    r = C.recompute(model)
    return Combined(id="checkpoint_recompute", label="no recompute in backward", parts=(
        DropHost(id="checkpoint_recompute", label="the recomputed operators' host time", rows=r.rows),
        DropDevice(id="checkpoint_recompute", label="the recomputed kernels", rows=r.device_rows)))


def fused_optimizer(model: TraceModel) -> Change:
    """Per step, one fused kernel of ``FUSED_SHARE`` of the optimizer's kernel time, one launch; its operators'
    host time (per-parameter dispatch) goes."""
    o = C.optimizer_work(model)
    ev = model["events"]
    rows = o.device_rows[ev["kind"][o.device_rows] == Kind.KERNEL]
    step = C.step_of(model, ev["ts"][rows])
    dur = np.nan_to_num(ev["dur"][rows], nan=0.0)
    parts: list[Change] = []
    for k in np.unique(step[step >= 0]).tolist():
        mine = rows[step == k]
        mine = mine[np.argsort(ev["ts"][mine], kind="stable")]
        parts.append(ReplaceDevice(id="unfused_optimizer", label="one fused kernel", rows=mine,
                                   cost_us=FUSED_SHARE * float(dur[step == k].sum()), launch_us=KERNEL_LAUNCH_US))
    parts.append(DropHost(id="unfused_optimizer", label="no per-parameter dispatch", rows=o.op_rows))
    return Combined(id="unfused_optimizer", label="fused=True", parts=tuple(parts))


def host_compute(model: TraceModel) -> Change:
    return DropHost(id="host_compute", label="move the CPU work off the main thread", rows=C.host_compute(model).rows)


def cudnn_autotune(model: TraceModel) -> Change:
    c = C.convolutions(model)
    return Combined(id="cudnn_autotune", label="no autotuning inside the steps", parts=(
        DropDevice(id="cudnn_autotune", label="the candidate algorithms' kernels", rows=c.tuning_extra_rows),
        DropHost(id="cudnn_autotune", label="the syncs between candidates", rows=c.tuning_syncs)))


def own_cause(model: TraceModel, rows: np.ndarray, cause: dict[str, Any]) -> Change:
    """The straggler's own cause vanishes on its rank only (the others keep their measured pace)."""
    label = f"take {cause.get('text', cause.get('name', 'it'))} out of the step"
    if cause.get("kind") == "kernel":
        return DropDevice(id="straggler", label=label, rows=rows, own_rank=True)
    return DropHost(id="straggler", label=label, rows=rows, own_rank=True)
