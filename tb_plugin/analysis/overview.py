"""Overview: steps with their time breakdown, the average, GPU summary, environment, and the diagnosis (context,
verdict, ranked findings under ``recommendations``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..model.derived import memoized
from ..model.kinds import DEVICE_KINDS, Kind
from ..model.tables import TraceModel
from .device_peaks import NO_OVERRIDE, PeakOverride
from .diagnosis import diagnose
from .gpu import gpu_summary
from .mfu import mfu
from .rank_summary import RankSummary
from .steps import CATEGORIES, breakdown
from .summary import devices


def _environment(model: TraceModel) -> dict[str, Any]:
    """The run's configuration. A CPU-only run recorded on a machine with GPUs still carries their properties and
    the CUDA versions: they describe the machine, not the run, so they are left out (``unprofiled_gpus`` counts
    them: the GPUs were there but the profiler recorded no CUDA activity)."""
    meta = model.meta
    kinds = model["events"]["kind"]
    uses_gpu = bool(np.isin(kinds, (*DEVICE_KINDS, Kind.RUNTIME, Kind.DRIVER)).any())
    gpus = devices(model)

    def of_gpu(key: str) -> Any:
        return meta.get(key) if uses_gpu else None

    return {
        "device_type": "GPU" if uses_gpu else "CPU",
        "devices": gpus if uses_gpu else [],
        "unprofiled_gpus": 0 if uses_gpu else len(gpus),
        "pytorch_version": meta.get("pytorch_version"),
        "cuda_runtime_version": of_gpu("cuda_runtime_version"),
        "cuda_driver_version": of_gpu("cuda_driver_version"),
        "cupti_version": of_gpu("cupti_version"),
        "framework": meta.get("Framework"),
    }


@memoized
def _steps_and_summary(model: TraceModel) -> dict[str, Any]:
    b = breakdown(model)
    steps = b.steps
    per_step = [
        {
            "name": name,
            "start_us": float(steps.start[i]),
            "duration_us": float(steps.duration[i]),
            "breakdown_us": {c: float(b.per_step[c][i]) for c in CATEGORIES},
        }
        for i, name in enumerate(steps.names)
    ]
    avg_total = float(steps.duration.mean()) if steps.count else 0.0
    avg = {c: float(b.per_step[c].mean()) if steps.count else 0.0 for c in CATEGORIES}
    average = {
        "duration_us": avg_total,
        "breakdown_us": avg,
        "share": {c: (v / avg_total if avg_total > 0 else 0.0) for c, v in avg.items()},
    }
    return {
        "steps": per_step,
        "average": average,
        "categories": list(CATEGORIES),
        "gpus": gpu_summary(model),
        "environment": _environment(model),
        "notes": list(steps.notes),
    }


def overview(model: TraceModel, job: dict[str, Any] | None = None, worker: str | None = None,
             workers: int = 1, peaks: PeakOverride = NO_OVERRIDE,
             ranks: tuple[RankSummary, ...] = ()) -> dict[str, Any]:
    """The Overview; ``job`` (the Distributed view's result for this span) and ``worker`` on multi-rank runs, so
    the diagnosis knows the job-level picture; ``workers``, the run's number of workers, the environment shows;
    ``peaks`` overrides the device peaks MFU uses; ``ranks``, the span's rank summaries, give the job's MFU and let
    a straggler's own fix be replayed against the other ranks."""
    d = diagnose(model, job, worker, list(ranks) if ranks and job else None)
    base = _steps_and_summary(model)
    return {**base, "environment": {**base["environment"], "workers": workers}, "context": d["context"],
            "verdict": d["verdict"], "recommendations": d["findings"], "mfu": mfu(model, peaks, ranks)}
