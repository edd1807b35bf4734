"""The root-cause findings' fixes as what-if changes (``whatif/changes.py``), as ``fixes.py`` does for the symptom
findings: what the advice does to the trace's events, so that a finding's saving is the replayed step time without
it. docs/guide/overview.md lists each change and its constants.

- Allocator churn: the ``cudaMalloc``/``cudaFree`` calls vanish (a warm cache serves the blocks: ``CACHED_ALLOC_US``).
- Recompilation: the compile events inside the steps vanish (the guards hold, the graph is reused).
- Checkpointing recompute: the forward operators re-run in backward vanish with their kernels, and so does the
  host time of checkpoint's own machinery (``causes.checkpoint_overhead``, from the Python frames where traced).
- Unfused optimizer: per step, the optimizer's kernels become one fused kernel that moves each parameter's state
  once (``FUSED_SHARE`` of their time) with one launch, and the host's loop over the parameters (its operators and the
  Python between them) goes.
- Host compute: the main thread's CPU work leaves the step (to DataLoader workers, or to the GPU at a launch each).
- cuDNN autotuning: the candidate algorithms' kernels and the syncs between them vanish.
- The straggler's own cause: its Python call, operator or kernel vanishes on that rank only (``own_rank``).
- Pipeline bubble: the fill/drain wait of each step (its first receive) shrinks with more micro-batches.
- Gradient accumulation that all-reduces every micro-batch: the all-reduces of all but the last go.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...model.arrays import isin_ints
from ...model.kinds import Kind
from ...model.tables import TraceModel
from ..communication import collectives
from ..whatif.apply import launched_within
from ..whatif.changes import Change, Combined, DropDevice, DropHost, ReplaceDevice, ScaleDevice
from ..whatif.constants import CACHED_ALLOC_US, KERNEL_LAUNCH_US
from . import causes as C
from .contention import uncontended

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
    """The compile work of each step vanishes (``causes.compile_overhead``: compile events, and the compiled
    wrappers' first-call work around their graphs' calls), and with it the benchmark kernels Inductor's autotuning
    launched inside the compile events; the compiled graphs' calls stay."""
    lo, hi = C.compile_overhead(model)
    return Combined(id="recompilation", label="compile once (dynamic shapes, fixed sizes)", parts=(
        DropHost(id="recompilation", label="no compiling in the step", rows=np.zeros(0, np.int64), spans=(lo, hi)),
        DropDevice(id="recompilation", label="no autotuning benchmarks",
                   rows=launched_within(model, C.compile_events(model).rows))))


def recompute(model: TraceModel) -> Change:
    r = C.recompute(model)
    lo, hi = C.checkpoint_overhead(model)
    return Combined(id="checkpoint_recompute", label="no recompute in backward", parts=(
        DropHost(id="checkpoint_recompute", label="the recomputed operators' host time", rows=r.rows),
        DropHost(id="checkpoint_recompute", label="checkpointing's own host work", rows=np.zeros(0, np.int64),
                 spans=(lo, hi)),
        DropDevice(id="checkpoint_recompute", label="the recomputed kernels", rows=r.device_rows)))


def fused_optimizer(model: TraceModel) -> Change:
    """Per step, one fused kernel of ``FUSED_SHARE`` of the optimizer's kernel time, one launch; the host's loop
    over the parameters (``_loops``) goes, less one call's launch."""
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
    lo, hi = _loops(model, o.rows, o.op_rows)
    parts.append(DropHost(id="unfused_optimizer", label="no per-parameter loop", rows=np.zeros(0, np.int64),
                          spans=(lo + KERNEL_LAUNCH_US, hi)))
    return Combined(id="unfused_optimizer", label="fused=True", parts=tuple(parts))


def _loops(model: TraceModel, regions: np.ndarray, ops: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per optimizer step region (``Optimizer.step#…``), the span from its first operator to its last: the loop over
    the parameters (their operators and the Python between them), which a fused step replaces by one call. The
    optimizer's preamble before it (grouping the parameters, ``_init_group``) runs in a fused step too and stays."""
    ev = model["events"]
    starts = ev["ts"][regions].astype(np.float64)
    order = np.argsort(starts, kind="stable")
    starts = starts[order]
    ends = starts + np.nan_to_num(ev["dur"][regions[order]], nan=0.0)
    t0 = ev["ts"][ops].astype(np.float64)
    t1 = t0 + np.nan_to_num(ev["dur"][ops], nan=0.0)
    k = np.searchsorted(starts, t0, side="right") - 1
    ok = (k >= 0) & (t1 <= ends[np.maximum(k, 0)] + 1e-6)
    lo = np.full(len(starts), np.inf)
    hi = np.full(len(starts), -np.inf)
    np.minimum.at(lo, k[ok], t0[ok])
    np.maximum.at(hi, k[ok], t1[ok])
    keep = hi > lo
    return lo[keep], hi[keep]


def host_compute(model: TraceModel) -> Change:
    return DropHost(id="host_compute", label="move the CPU work off the main thread", rows=C.host_compute(model).rows)


def cudnn_autotune(model: TraceModel) -> Change:
    """Without benchmark mode a convolution with a new shape builds one execution plan (cuDNN's heuristic choice)
    and runs it: the candidates' kernels and the syncs that time them go, and each tuning call keeps the host time
    of a heuristic plan (``C.tuning_plans``)."""
    c = C.convolutions(model)
    rows, keep = C.tuning_plans(model)
    return Combined(id="cudnn_autotune", label="no autotuning inside the steps", parts=(
        DropDevice(id="cudnn_autotune", label="the candidate algorithms' kernels", rows=c.tuning_extra_rows),
        DropHost(id="cudnn_autotune", label="the syncs between candidates", rows=c.tuning_syncs),
        DropHost(id="cudnn_autotune", label="the heuristics' plan instead of all", rows=rows, keep_us=keep)))


def own_cause(model: TraceModel, rows: np.ndarray, cause: dict[str, Any]) -> Change:
    """The straggler's own cause vanishes on its rank only (the others keep their measured pace)."""
    label = f"take {cause.get('text', cause.get('name', 'it'))} out of the step"
    if cause.get("kind") == "kernel":
        return DropDevice(id="straggler", label=label, rows=rows, own_rank=True)
    return DropHost(id="straggler", label=label, rows=rows, own_rank=True)


def more_microbatches(model: TraceModel, factor: float) -> Change:
    """Pipeline bubble: the same batch in ``factor`` times as many micro-batches. A stage's wait for its neighbour
    at the start of each run of receives (per step, the first receive: the pipeline filling before this stage has
    work, or draining back to it) is the bubble, (stages − 1) micro-batch times; the micro-batches shrink by
    ``factor``, so that wait does too. The waits between later receives are the stages' imbalance, paid per
    micro-batch: ``factor`` times as many of a ``factor``-th the length, the same in all, so they stay."""
    col = collectives(model)
    names = np.asarray(col.name, dtype=object)
    recv = np.flatnonzero(isin_ints(names, ("recv", "sendrecv")) & ~np.asarray(col.on_host, dtype=bool))
    step = C.step_of(model, col.start[recv])
    recv, step = recv[step >= 0], step[step >= 0]
    order = np.lexsort((col.start[recv], step))
    first = order[np.flatnonzero(np.concatenate([[True], step[order][1:] != step[order][:-1]]))] if len(order) \
        else order
    return ScaleDevice(id="pipeline_bubble", label="more micro-batches", rows=np.asarray(col.row)[recv[first]],
                       factor=max(float(factor), 1.0))


def no_sync(model: TraceModel) -> Change:
    """Gradient accumulation: ``no_sync()`` for all but the last micro-batch: the other micro-batches' all-reduce
    kernels and their launches go (on every rank alike: each rank skips the same all-reduces), and so does the DDP
    reducer's work around them: scaling the gradients into the buckets and copying the reduced buckets back (host
    operators and the kernels and copies they launch on the compute stream); the kernels that ran beside only those
    all-reduces run at their speed alone (``contention.uncontended``)."""
    a = C.accumulation_syncs(model)
    label = "ddp.no_sync() for all but the last micro-batch"
    faster, factor = uncontended(model, a.rows)
    return Combined(id="grad_accum_allreduce", label=label, parts=(
        DropDevice(id="grad_accum_allreduce", label="the extra all-reduces",
                   rows=np.concatenate([a.rows, launched_within(model, a.reducer)])),
        DropHost(id="grad_accum_allreduce", label="the reducer's bucket work", rows=a.reducer),
        ScaleDevice(id="grad_accum_allreduce", label="kernels no longer beside an all-reduce", rows=faster,
                    factor=factor)))
