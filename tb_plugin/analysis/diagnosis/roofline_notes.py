"""What the roofline adds to two findings (docs/guide/overview.md): how far from its roof the work of a low
tensor-core run is, and which kernels of a GPU-bound run waste the most time against the roofline, compute- or
memory-bound. Clauses for ``findings.py`` to append; empty where the trace cannot tell (no estimates, a device
without peaks). The table's peaks (the diagnosis does not see ``--profiler_peaks``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...model.tables import TraceModel
from ..roofline import ROOF_LABELS, peaks_of, roofline, trace_device
from ..work import ROOFS, kernel_work, op_work


def _pct(x: float) -> str:
    return f"{100 * x:.0f} %" if x >= 0.1 else (f"{100 * x:.1f} %" if x >= 0.01 else f"{100 * x:.2f} %")


def tensor_core_clause(model: TraceModel) -> str:
    """"; their FLOPs run at 9.6 % of the FP32 (CUDA cores) roof and 1.3 % of the TF32 tensor-core peak":
    the matmul/convolution/attention kernels without tensor cores against the roof they ran under and the
    tensor-core roof of their dtype."""
    device = peaks_of(trace_device(model))
    kw = kernel_work(model)
    if device is None or not len(kw.kernel):
        return ""
    ops = op_work(model)
    heavy = (kw.owner >= 0) & np.where(kw.owner >= 0, ops.heavy[np.maximum(kw.owner, 0)], False)
    mine = heavy & ~kw.tensor_cores & (np.nan_to_num(kw.flops) > 0)  # their compute kernels, not layout transforms
    time = float(np.nan_to_num(model["events"]["dur"][model["device_events"]["row"][kw.kernel[mine]]]).sum()) * 1e-6
    flops = float(kw.flops[mine].sum())
    roofs = kw.roof[mine]
    if time <= 0 or flops <= 0 or not len(roofs) or roofs.min() < 0:
        return ""
    roof = ROOFS[int(np.bincount(roofs.astype(np.int64)).argmax())]
    peak = device.peak(roof)
    tensor = device.peak("fp64_tensor" if roof == "fp64" else "tf32")
    if not peak:
        return ""
    clause = f"; their FLOPs run at {_pct(flops / time / peak)} of the {ROOF_LABELS[roof]} roof"
    if tensor and tensor > peak:
        label = ROOF_LABELS["fp64_tensor" if roof == "fp64" else "tf32"]
        clause += f" and {_pct(flops / time / tensor)} of the {label} peak"
    return clause


def waste_clause(model: TraceModel, steps: int, top: int = 3) -> tuple[str, list[dict[str, Any]]]:
    """"most time wasted against the roofline: nvjet_… 1.2 ms/step (compute-bound, at 48 % of its roof), …", and
    the kernel names (for links); empty where no point has a roof."""
    placed = [p for p in roofline(model, "kernel", limit=100_000)["points"] if p["fraction_of_roof"] is not None]
    worst = [p for p in placed if p["wasted_us"]][:top]  # the answer is ranked by wasted time
    if not worst:
        return "", []
    total = sum(p["time_us"] for p in placed)
    reached = sum(min(p["fraction_of_roof"], 1.0) * p["time_us"] for p in placed) / total
    named = [f"{_short(p['name'])} {_ms(p['wasted_us'] / max(steps, 1))}/step ({p['bound']}-bound at "
             f"{_pct(p['fraction_of_roof'])} of its roof)" for p in worst]
    return (f"; against the roofline the kernels reach {_pct(reached)} of their roofs (time-weighted), most time "
            f"wasted by {', '.join(named)}"), worst


def _short(name: str) -> str:
    return name if len(name) <= 60 else name[:59] + "…"


def _ms(us: float) -> str:
    return f"{us / 1000:.1f} ms" if us >= 1000 else f"{us:.0f} µs"
