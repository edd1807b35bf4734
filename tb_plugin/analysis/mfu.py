"""Model FLOPs utilisation per step (docs/guide/roofline.md): the FLOPs the step's operators did (``work.step_work``:
the trace's own figures, else shape formulas; every call counted once) over the step's time, against the device's
peak for the class that carries most of those FLOPs (BF16 tensor cores under bf16 autocast, TF32 tensor cores for
fp32 matmuls on tensor cores, FP32 CUDA cores without them). The step time is the Overview's device-aware step.

A multi-rank job: each rank's model FLOPs per step over its own step time and peak; the job's achieved FLOP/s is
the ranks' FLOPs per step summed over the slowest rank's mean step (a synchronous step lasts as long as its slowest
rank), against the ranks' peaks summed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..model.arrays import isin_ints
from ..model.kinds import Kind
from ..model.tables import TraceModel
from .device_peaks import NO_OVERRIDE, PeakOverride
from .rank_summary import RankSummary
from .roofline import device_answer, peaks_of, trace_device
from .steps import find_steps
from .work import ROOFS, SOURCES, dominant_roof, matching, step_work

_CLASS_WORDS = {"fp64": "FP64", "fp64_tensor": "FP64 tensor-core", "fp32": "FP32 (CUDA cores)",
                "tf32": "TF32 tensor-core", "bf16": "BF16 tensor-core", "fp16": "FP16 tensor-core",
                "fp8": "FP8 tensor-core"}


def mfu(model: TraceModel, override: PeakOverride = NO_OVERRIDE,
        ranks: Sequence[RankSummary] = ()) -> dict[str, Any]:
    """The Overview's ``mfu``: per step and for the average step; ``ranks`` (a multi-rank span's summaries) adds
    the job."""
    steps = find_steps(model)
    work = step_work(model)
    props = trace_device(model)
    device = peaks_of(props, override)
    roof = dominant_roof(work.by_roof)
    peak = device.peak(roof) if device is not None and roof else None
    seconds = steps.duration * 1e-6
    total_s = float(seconds.sum())
    flops = float(work.flops.sum())
    achieved = flops / total_s if total_s > 0 else None
    shares = work.by_roof.sum(axis=0) / flops if flops > 0 else np.zeros(len(ROOFS))
    per_step = [{"name": name, "model_flops": float(f), "duration_us": float(d),
                 "achieved_flops_per_s": float(f / (d * 1e-6)) if d > 0 else None,
                 "ratio": float(f / (d * 1e-6) / peak) if d > 0 and peak else None}
                for name, f, d in zip(steps.names, work.flops.tolist(), steps.duration.tolist())]
    return {
        "model_flops_per_step": flops / steps.count if steps.count else 0.0,
        "achieved_flops_per_s": achieved, "peak_flops_per_s": peak, "dtype": roof,
        "ratio": achieved / peak if achieved is not None and peak else None,
        "estimated": bool(work.by_source[SOURCES.index("shapes")] > 0),
        "dtypes": [{"dtype": r, "flops_share": float(s)} for r, s in zip(ROOFS, shares.tolist()) if s > 0],
        "sources": {s: float(v) for s, v in zip(SOURCES, work.by_source.tolist()) if v > 0},
        "device": device_answer(props, device), "steps": per_step,
        "note": _note(model, flops, roof, device is not None, props is not None),
        "job": job_mfu(ranks, override) if len(ranks) > 1 else None,
    }


def _note(model: TraceModel, flops: float, roof: str | None, known: bool, gpu: bool) -> str | None:
    if flops <= 0 and _replays_graphs(model):
        return ("The steps replay CUDA graphs: their operators ran at capture, outside the trace, so the replayed "
                "kernels' FLOPs are unknown.")
    if flops <= 0:
        return ("No operator's work could be estimated: record with record_shapes=True (PyTorch ≥ 2.0 also records "
                "strides and is_causal) for model FLOPs.")
    if not gpu:
        return "No GPU in the trace: achieved FLOP/s only."
    if not known:
        return "The device has no peak in the table: achieved FLOP/s only."
    return f"Against the {_CLASS_WORDS.get(roof or '', roof)} peak, the class carrying most of the FLOPs."


def _replays_graphs(model: TraceModel) -> bool:
    ev = model["events"]
    calls = ev["name"][isin_ints(ev["kind"], (Kind.RUNTIME, Kind.DRIVER))]
    return bool(matching(model, calls, lambda s: "GraphLaunch" in s).any())


def rank_mfu(summary: RankSummary, override: PeakOverride = NO_OVERRIDE) -> dict[str, Any]:
    """One rank of a job: its model FLOPs per step, mean step, achieved FLOP/s, peak and ratio."""
    steps = summary.steps
    step_us = float(np.mean(steps["step_us"])) if len(steps["step_us"]) else 0.0
    flops = float(np.mean(steps["model_flops"])) if len(steps.get("model_flops", ())) else 0.0
    props = summary.devices[0] if summary.devices else None
    device = peaks_of(props, override)
    peak = device.peak(summary.flops_roof) if device is not None and summary.flops_roof else None
    achieved = flops / (step_us * 1e-6) if step_us > 0 else None
    return {"worker": summary.worker, "rank": summary.rank, "model_flops_per_step": flops, "step_us": step_us,
            "achieved_flops_per_s": achieved, "peak_flops_per_s": peak, "dtype": summary.flops_roof,
            "ratio": achieved / peak if achieved is not None and peak else None}


def job_mfu(ranks: Sequence[RankSummary], override: PeakOverride = NO_OVERRIDE) -> dict[str, Any]:
    rows = sorted((rank_mfu(s, override) for s in ranks), key=lambda r: (r["rank"] is None, r["rank"], r["worker"]))
    slowest = max((r["step_us"] for r in rows), default=0.0)
    flops = sum(r["model_flops_per_step"] for r in rows)
    peaks = [r["peak_flops_per_s"] for r in rows]
    peak = float(sum(p for p in peaks if p)) if peaks and all(peaks) else None
    achieved = flops / (slowest * 1e-6) if slowest > 0 else None
    return {"ranks": rows, "model_flops_per_step": flops, "step_us": slowest, "achieved_flops_per_s": achieved,
            "peak_flops_per_s": peak, "ratio": achieved / peak if achieved is not None and peak else None}
