"""``diff BASE NEW [--fail-if-slower 5%] [--metric step_time] [--span N]``: the Diff view in a terminal, and a
regression gate for CI. The numbers are the Diff view's (``analysis/diff.py`` through :func:`tb_plugin.diff`):
per-step averages of the step time and of each breakdown category, so runs of different step counts compare
fairly; it leads with the category that moved most and lists the operators and kernels by what they add to the
step, per step. Each side is one span: the output names it.

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

from ..sdk import ProfilerError, Trace, TraceDiff
from ..sdk import diff as diff_runs
from ..sdk import open as open_trace
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


# Where a category's time lives: host categories grow with operators' host self time, device ones with the device
# time of the kernels, copies and sets the operators launched.
HOST_CATEGORIES = ("Runtime", "DataLoader", "CPU Exec", "Other")


def lead_category(d: TraceDiff) -> str | None:
    """The breakdown category that moved most (largest absolute change per step), None when none moved."""
    categories = d.breakdown.drop(index="step")
    moved = categories["delta_us"].abs()
    return str(moved.idxmax()) if len(moved) and moved.max() > 0 else None


def per_step(frame: pd.DataFrame, metric: str, steps: tuple[int, int]) -> pd.DataFrame:
    """``baseline_/experiment_/delta_<metric>`` of a joined table (totals over each trace) as per-step figures
    (each side over its own step count, a missing side as 0), the rows that got slower first."""
    base = frame[f"baseline_{metric}"].fillna(0.0) / max(steps[0], 1)
    new = frame[f"experiment_{metric}"].fillna(0.0) / max(steps[1], 1)
    out = pd.DataFrame({"name": frame["name"], "status": frame["status"], "baseline_us": base,
                        "new_us": new, "delta_us": new - base})
    out.loc[frame["status"] == "new", "baseline_us"] = None  # "—": the operator was not there
    out.loc[frame["status"] == "gone", "new_us"] = None
    ranked: pd.DataFrame = out[out["delta_us"] > 0].sort_values("delta_us", ascending=False)
    return ranked


def slower_parts(d: TraceDiff, top: int) -> dict[str, Any]:
    """What moved: the breakdown categories (per step), the one that moved most first; then the operators and
    kernels that contribute most to the step-time change, per step. Operators are ranked by the time the lead
    category is made of: host self time for a host category (DataLoader, CPU Exec, Runtime, Other), device self
    time for a GPU one, so a DataLoader slowdown lists the operators of the data loading, not microsecond noise."""
    categories = d.breakdown.drop(index="step")
    categories = categories[categories["delta_us"] != 0]
    categories = categories.reindex(categories["delta_us"].abs().sort_values(ascending=False).index)
    categories = categories.rename(columns={"experiment_us": "new_us"})
    lead = lead_category(d)
    names = d.raw.get("step_names") or {}
    steps = (len(names.get("baseline") or []), len(names.get("experiment") or []))
    metric = "host_self_us" if lead in HOST_CATEGORIES else "device_self_us"
    ops = d.operators
    ops = per_step(ops, metric, steps).head(top) if not ops.empty else ops
    kernels = d.kernels
    kernels = per_step(kernels, "total_us", steps).head(top) if not kernels.empty else kernels
    return {"lead": lead, "operator_metric": metric, "categories": categories, "operators": ops,
            "kernels": kernels}


def open_sides(args: argparse.Namespace, progress: Any) -> tuple[Trace, Trace]:
    """The two traces, each the span ``--base-span`` / ``--new-span`` (else ``--span``, else the first) names."""
    base_span = args.base_span or args.span
    new_span = args.new_span or args.span
    return (open_trace(args.base, span=base_span, cache_dir=args.cache_dir, progress=progress),
            open_trace(args.new, span=new_span, cache_dir=args.cache_dir, progress=progress))


def side_text(t: Trace) -> str:
    """"run/worker span 1 (file)" and, where the worker has several spans, how to pick another."""
    spans = t.spans
    more = f" of {len(spans)}: --span, --base-span or --new-span pick another" if len(spans) > 1 else ""
    return f"{t.run}/{t.worker} span {t.span}{more} ({t.file.filename})"


def run_diff(args: argparse.Namespace, progress: Any) -> int:
    limit = threshold(args.fail_if_slower) if args.fail_if_slower is not None else None
    a, b = open_sides(args, progress)
    d = diff_runs(a, b)
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
            "baseline": {"run": a.run, "worker": a.worker, "span": a.span, "file": a.file.filename},
            "new": {"run": b.run, "worker": b.worker, "span": b.span, "file": b.file.filename},
            "lead_category": parts["lead"], "operator_metric": parts["operator_metric"],
            "categories": records(parts["categories"].reset_index()),  # every category that changed, per step
            "slower": {k: records(parts[k].reset_index(drop=True)) for k in ("operators", "kernels")},
        }, indent=2))
    else:
        print(f"baseline: {side_text(a)}\nnew:      {side_text(b)}\n")
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
           parts: dict[str, Any]) -> None:
    print(f"{metric} per step: {base / 1000:.3f} ms → {new / 1000:.3f} ms ({_pct(change)})")
    ms = {"float_format": "{:.3f}".format, "na_rep": "—"}
    categories = parts["categories"]
    if not categories.empty:
        lead = categories.iloc[0]
        print(f"Moved most: {parts['lead']} {lead['delta_us'] / 1000:+.3f} ms per step "
              f"({lead['baseline_us'] / 1000:.3f} → {lead['new_us'] / 1000:.3f} ms)")
        table = categories[["baseline_us", "new_us", "delta_us"]] / 1000.0
        table.columns = ["baseline_ms", "new_ms", "delta_ms"]
        print("\nCategories that changed (per step, largest change first):")
        print(table.to_string(**ms))
    what = "host self time" if parts["operator_metric"] == "host_self_us" else "device self time"
    for key, title in (("operators", f"Operators that add most to the step ({what} per step, as {parts['lead']} "
                        "is made of)"), ("kernels", "Kernels that add most to the step (per step)")):
        frame = parts[key]
        if frame.empty:
            continue
        shown = frame.copy()
        shown["name"] = shown["name"].map(lambda s: s if len(s) <= 70 else s[:69] + "…")
        for col in [c for c in shown.columns if c.endswith("_us")]:
            shown[col.removesuffix("_us") + "_ms"] = shown.pop(col) / 1000.0
        print(f"\n{title}:")
        print(shown.to_string(index=False, **ms))
    if limit is None:
        return
    verdict = "FAIL" if failed else "OK"
    relation = "more than" if failed else "within"
    print(f"\n{verdict}: {metric} changed {_pct(change)}, {relation} the allowed +{limit:.1%}",
          file=sys.stdout)
