"""Trace info: what a trace holds (event counts, time span, devices, versions), shown before any view."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..model.derived import memoized
from ..model.tables import TraceModel


def event_counts(model: TraceModel) -> dict[str, int]:
    """Events per category over every table (flows and metadata included), from the columns."""
    counts: dict[str, int] = {}
    for table in ("events", "flows"):
        cats = model[table]["cat"]
        codes, n = np.unique(cats, return_counts=True)
        for code, count in zip(codes.tolist(), n.tolist()):
            label = model.text(code) or "(none)"
            counts[label] = counts.get(label, 0) + count
    n_meta = len(model["metadata_events"]["name"])
    if n_meta:
        counts["(metadata)"] = counts.get("(metadata)", 0) + n_meta
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


@memoized
def time_range_us(model: TraceModel) -> tuple[float, float] | None:
    """First start and last end over timed events, ignoring non-finite values (kept: the summary, the memory
    curve and its phases all ask)."""
    ev = model["events"]
    ts, dur = ev["ts"], np.nan_to_num(ev["dur"], nan=0.0, posinf=0.0, neginf=0.0)
    ok = np.isfinite(ts)
    if not ok.any():
        return None
    return float(ts[ok].min()), float((ts[ok] + np.maximum(dur[ok], 0.0)).max())


def devices(model: TraceModel) -> list[dict[str, Any]]:
    props = model.meta.get("deviceProperties")
    out = []
    for i, dev in enumerate(props if isinstance(props, list) else []):
        if not isinstance(dev, dict):
            continue
        major, minor = dev.get("computeMajor"), dev.get("computeMinor")
        out.append({
            "id": dev.get("id", i),
            "name": dev.get("name"),
            "memory_bytes": dev.get("totalGlobalMem"),
            "compute_capability": f"{major}.{minor}" if major is not None and minor is not None else None,
            "num_sms": dev.get("numSms"),
        })
    return out


def _flag(value: Any) -> bool | None:
    return None if value is None else bool(value)


def summary(model: TraceModel) -> dict[str, Any]:
    meta = model.meta
    span = time_range_us(model)
    dist = meta.get("distributedInfo")
    return {
        "duration_us": (span[1] - span[0]) if span else None,
        "event_counts": event_counts(model),
        "devices": devices(model),
        "metadata": {
            "schema_version": meta.get("schemaVersion"),
            "pytorch_version": meta.get("pytorch_version"),
            "cuda_runtime_version": meta.get("cuda_runtime_version"),
            "cuda_driver_version": meta.get("cuda_driver_version"),
            "framework": meta.get("Framework"),
            "with_stack": _flag(meta.get("with_stack")),
            "record_shapes": _flag(meta.get("record_shapes")),
            "profile_memory": _flag(meta.get("profile_memory")),
            "distributed": {k: dist.get(k) for k in ("backend", "rank", "world_size")}
            if isinstance(dist, dict) else None,
        },
    }
