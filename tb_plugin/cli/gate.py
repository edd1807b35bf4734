"""``diff BASE NEW [--fail-if-slower 5%] [--metric step_time]``: the Diff view in a terminal, and a regression
gate for CI. The numbers are the Diff view's (``analysis/diff.py`` through :func:`tb_plugin.diff`): per-step
averages of the step time and of each breakdown category, so runs of different step counts compare fairly.

A gate must never pass what it cannot measure: a side without events or without steps, or a metric that is zero
or undefined on both sides, exits with :data:`EXIT_NOTHING_TO_COMPARE` and says why (an empty trace once printed
"OK: -100 %" and exited 0). Two runs that look unrelated are compared, with a warning on stderr."""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from typing import Any

import pandas as pd

from ..sdk import ProfilerError, TraceDiff
from ..sdk import diff as diff_runs
from .summary import records

EXIT_SLOWER = 1
EXIT_NOTHING_TO_COMPARE = 4
_PERCENT = re.compile(r"\s*(\d+(?:\.\d+)?)\s*%?\s*")


def threshold(text: str) -> float:
    """``5%`` or ``5`` → 0.05."""
    m = _PERCENT.fullmatch(text)
    if m is None:
        raise ValueError(f"--fail-if-slower takes a percentage such as 5% or 2.5; got {text!r}")
    return float(m.group(1)) / 100.0


def growth(base: float, new: float) -> float:
    """Relative change; any growth from zero counts as infinite (new work where there was none)."""
    if base > 0:
        return (new - base) / base
    return float("inf") if new > base else 0.0


def slower_parts(d: TraceDiff, top: int) -> dict[str, pd.DataFrame]:
    """What grew: breakdown categories (per step), then operators and kernels (totals over each trace)."""
    categories = d.breakdown.drop(index="step")
    categories = categories[categories["delta_us"] > 0].sort_values("delta_us", ascending=False)
    ops = d.operators
    if not ops.empty:
        device = ops["delta_device_self_us"].abs().sum() > 0
        key = "delta_device_self_us" if device else "delta_host_self_us"
        ops = ops[ops[key] > 0].sort_values(key, ascending=False).head(top)
        ops = ops[["name", "status", key.replace("delta_", "baseline_"), key.replace("delta_", "experiment_"), key]]
    kernels = d.kernels
    if not kernels.empty:
        kernels = kernels[kernels["delta_total_us"] > 0].sort_values("delta_total_us", ascending=False).head(top)
        kernels = kernels[["name", "status", "baseline_total_us", "experiment_total_us", "delta_total_us"]]
    return {"categories": categories, "operators": ops, "kernels": kernels}


def run_diff(args: argparse.Namespace, progress: Any) -> int:
    limit = threshold(args.fail_if_slower) if args.fail_if_slower is not None else None
    d = diff_runs(args.base, args.new, cache_dir=args.cache_dir, progress=progress)
    for warning in d.warnings:
        print(f"pytorch-tb-profiler: warning: {warning}", file=sys.stderr)
    base, new = d.metric(args.metric)  # ValueError for an unknown metric: exit 2 with the list
    problem = "; ".join(d.problems) or _unmeasured(args.metric, base, new)
    if problem:
        raise ProfilerError(f"nothing to compare: {problem}", EXIT_NOTHING_TO_COMPARE)
    change = growth(base, new)
    failed = limit is not None and change > limit
    parts = slower_parts(d, args.top)
    if args.json:
        print(json.dumps({
            "metric": args.metric, "baseline_us": base, "new_us": new,
            "change": None if change == float("inf") else change,
            "threshold": limit, "failed": failed,
            "slower": {k: records(v.reset_index()) for k, v in parts.items()},
        }, indent=2))
    else:
        _print(args.metric, base, new, change, limit, failed, parts)
    return EXIT_SLOWER if failed else 0


def _unmeasured(metric: str, base: float, new: float) -> str:
    """Why ``metric`` compares nothing (empty when it compares): undefined, or zero on both sides."""
    if not (math.isfinite(base) and math.isfinite(new)):
        return f"{metric} is not defined per step in {'BASE' if not math.isfinite(base) else 'NEW'}"
    if base == 0 and new == 0:
        return f"{metric} is 0 in both runs (a CPU-only run has no kernel time, for example)"
    return ""


def _pct(change: float) -> str:
    return "new" if change == float("inf") else f"{change:+.1%}"


def _print(metric: str, base: float, new: float, change: float, limit: float | None, failed: bool,
           parts: dict[str, pd.DataFrame]) -> None:
    print(f"{metric} per step: {base / 1000:.3f} ms → {new / 1000:.3f} ms ({_pct(change)})")
    ms = {"float_format": "{:.3f}".format}
    if not parts["categories"].empty:
        table = parts["categories"][["baseline_us", "experiment_us", "delta_us"]] / 1000.0
        table.columns = ["baseline_ms", "new_ms", "delta_ms"]
        print("\nSlower categories (per step):")
        print(table.to_string(**ms))
    for what in ("operators", "kernels"):
        frame = parts[what]
        if frame.empty:
            continue
        shown = frame.copy()
        shown["name"] = shown["name"].map(lambda s: s if len(s) <= 70 else s[:69] + "…")
        for col in [c for c in shown.columns if c.endswith("_us")]:
            shown[col.removesuffix("_us") + "_ms"] = shown.pop(col) / 1000.0
        print(f"\nSlower {what} (total over each trace):")
        print(shown.to_string(index=False, **ms))
    if limit is None:
        return
    verdict = "FAIL" if failed else "OK"
    relation = "more than" if failed else "within"
    print(f"\n{verdict}: {metric} changed {_pct(change)}, {relation} the allowed +{limit:.1%}",
          file=sys.stdout)
