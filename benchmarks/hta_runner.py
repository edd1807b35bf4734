"""Runs Holistic Trace Analysis on one trace and prints its numbers as JSON (run by benchmarks/compare_hta.py with
the Python of HTA's own virtual environment; imports nothing from this project).

Usage: <hta venv>/bin/python benchmarks/hta_runner.py TRACE_DIR
Set HTA_DISABLE_NS_ROUNDING=1 to keep nanosecond timestamps (HTA rounds them to whole µs by default).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

import pandas as pd
from hta.trace_analysis import TraceAnalysis


def _float(v: Any) -> float | None:
    return None if v is None or pd.isna(v) else float(v)


def _attempt(out: dict[str, Any], key: str, compute: Callable[[], Any]) -> None:
    """``out[key] = compute()``, or ``out[key + "_error"]``: where HTA raises (on a CPU-only trace, say), that is a
    finding to report, not a reason to stop."""
    try:
        out[key] = compute()
    except Exception as err:  # noqa: BLE001 - whatever HTA raises is reported as it is
        out[f"{key}_error"] = f"{type(err).__name__}: {err}"


def main(trace_dir: str) -> dict[str, Any]:
    t = TraceAnalysis(trace_dir=trace_dir)
    rank = t.t.get_ranks()[0]  # HTA's default is rank 0, which a trace of another rank does not have
    out: dict[str, Any] = {"rank": int(rank)}

    def idle() -> dict[str, float]:
        df, _ = t.get_idle_time_breakdown(ranks=[rank], visualize=False)
        return {f"{int(r.stream)}:{r.idle_category}": float(r.idle_time) for r in df.itertuples()}

    def launch() -> dict[str, Any]:
        df = t.get_cuda_kernel_launch_stats(ranks=[rank], visualize=False)[rank]
        return {"count": len(df), "delay_p50_us": _float(df.launch_delay.quantile(0.5)),
                "delay_p95_us": _float(df.launch_delay.quantile(0.95)),
                "short": int((df.gpu_duration < df.cpu_duration).sum())}

    def queue_max() -> dict[str, float]:
        df = t.get_queue_length_summary(ranks=[rank])
        return {} if df is None else {str(int(k[1])): float(v) for k, v in df[("queue_length", "max")].items()}

    def bandwidth_max() -> dict[str, float]:
        df = t.get_memory_bw_summary(ranks=[rank])
        return {} if df is None else {str(k[1]): float(v) for k, v in df[("memory_bw_gbps", "max")].items()}

    _attempt(out, "idle", idle)
    _attempt(out, "launch", launch)
    _attempt(out, "queue_max", queue_max)
    _attempt(out, "bandwidth_max_gbps", bandwidth_max)
    return out


if __name__ == "__main__":
    print("HTA_JSON " + json.dumps(main(sys.argv[1])))
