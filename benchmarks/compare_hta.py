"""Side by side: Holistic Trace Analysis (HTA) and the GPU view's analyses on the same real traces.

For idle time per stream (``analysis/idle.py``), launch statistics (``analysis/launches.py``: launch delay p50/p95,
short kernels) and queue length (``analysis/queues.py``). HTA runs in its own virtual environment, never as a
project dependency (``.bench/htavenv``, made on first use: ``holistictraceanalysis`` without its notebook
dependencies, plus the libraries it imports; ``--hta-venv`` names another), through ``benchmarks/hta_runner.py``,
twice per trace: as shipped (timestamps rounded to whole µs) and with ``HTA_DISABLE_NS_ROUNDING=1``.

Ours are computed twice as well: with HTA's definitions recounted from the plugin's model (``hta_definitions``
below: HTA's kernel filter, its gaps between consecutive events, its launch names, its queue) and by the plugin's
own definitions (the numbers the GPU tab shows). The first shows whether both tools read the same events the same
way: HTA without rounding and our recount must agree within 1 % (or 1 µs for sums near 0); the script exits 1 and
names every metric that does not. The second differs on purpose; the generated page says why, trace by trace.

    .venv/bin/python benchmarks/compare_hta.py                   # the real traces of tests/data
    .venv/bin/python benchmarks/compare_hta.py TRACE ...         # other traces
    .venv/bin/python benchmarks/compare_hta.py --markdown docs/guide/gpu-vs-hta.md

Results as JSON go to ``.bench/results/compare_hta.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tb_plugin.analysis.idle import KERNEL_WAIT_US, idle_time  # noqa: E402
from tb_plugin.analysis.launches import device_work, launch_stats  # noqa: E402
from tb_plugin.analysis.queues import queue_length  # noqa: E402
from tb_plugin.loader import load_trace  # noqa: E402
from tb_plugin.model import TraceModel  # noqa: E402
from tb_plugin.model.kinds import Kind  # noqa: E402
from tb_plugin.model.names import STEP_PREFIX  # noqa: E402

HTA_VENV = REPO / ".bench" / "htavenv"
HTA_VERSION = "0.5.0"
HTA_IMPORTS = ["numpy", "pandas", "networkx", "plotly", "pydot", "psutil", "pyyaml"]
DEFAULT_TRACES = [
    "tests/data/h200/transformer_bf16/vm_562.1795654446295758078.pt.trace.json.gz",
    "tests/data/h200/resnet18_workers0/vm_562.1795654441914410211.pt.trace.json.gz",
    "tests/data/h200/mlp_compiled/vm_814.1795654526231503865.pt.trace.json.gz",
    "tests/data/h200/ddp_resnet50/rank0.1795654468795164103.pt.trace.json.gz",
    "tests/data/h200/ddp_resnet50/rank1.1795654468800884082.pt.trace.json.gz",
    "tests/data/kineto_v100/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz",
    "tests/data/kineto_v100/resnet50_num_workers_4/worker0.1623212756351.pt.trace.json.gz",
    "samples/cpu_only/vm_9609.1795660198545391638.pt.trace.json.gz",  # in the repo; tests/data has none,
]
# HTA's launch statistics count these launch calls only (trace_analysis.get_cuda_kernel_launch_stats)
HTA_LAUNCH_NAMES = ("cudaLaunchKernel", "cudaLaunchKernelExC", "cudaMemcpyAsync", "cudaMemsetAsync")
# ... and its queue length these (TraceSymbolTable.get_runtime_launch_events_query)
HTA_QUEUE_NAMES = (*HTA_LAUNCH_NAMES, "cuLaunchKernel", "hipLaunchKernel", "hipExtModuleLaunchKernel",
                   "hipMemsetAsync", "hipMemcpyAsync", "hipMemcpyWithStream")
# HTA's consecutive_kernel_delay default: documented as 30 ns, compared with its timestamps, which are µs
HTA_KERNEL_WAIT = 30.0


def hta_python(venv: Path) -> Path:
    """HTA's own interpreter, installing it on first use (never into the project's environment)."""
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        pip = [str(python), "-m", "pip", "install", "--quiet"]
        subprocess.run([*pip, "--no-deps", f"holistictraceanalysis=={HTA_VERSION}"], check=True)
        subprocess.run([*pip, *HTA_IMPORTS], check=True)
    return python


def run_hta(python: Path, file: Path, rounding: bool) -> dict[str, Any]:
    """HTA's numbers for one trace file (HTA reads a folder: the file is copied into an empty one)."""
    with tempfile.TemporaryDirectory() as tmp:
        shutil.copy(file, Path(tmp) / file.name)
        env = dict(os.environ, HTA_DISABLE_NS_ROUNDING="0" if rounding else "1")
        done = subprocess.run([str(python), str(REPO / "benchmarks" / "hta_runner.py"), tmp], env=env,
                              capture_output=True, text=True, timeout=1800)
    for line in done.stdout.splitlines():
        if line.startswith("HTA_JSON "):
            result: dict[str, Any] = json.loads(line[len("HTA_JSON "):])
            return result
    return {"error": (done.stderr or done.stdout)[-2000:]}


def _last_step_start(model: TraceModel) -> float | None:
    """HTA's cut-off: the latest start of an event named ProfilerStep that has no ``stream``, which includes
    Kineto's GPU-side copies (``gpu_user_annotation``), so it can lie after the host's last step start. HTA filters
    only when the trace names 2+ steps."""
    ev = model["events"]
    codes = model.codes_where(lambda s: s.startswith(STEP_PREFIX))
    steps = np.isin(ev["name"], codes) & np.isin(ev["kind"], (Kind.USER_ANNOTATION, Kind.CPU_OP,
                                                                Kind.GPU_USER_ANNOTATION))
    return float(ev["ts"][steps].max()) if len(np.unique(ev["name"][steps])) > 1 else None


def hta_definitions(model: TraceModel) -> dict[str, Any]:
    """HTA's numbers recounted from our model with HTA's definitions: its event filter (device events with a
    launch in the trace, launched before the last ProfilerStep starts), gaps to the previous event's end on each
    stream (none before the first or after the last), a 30 µs kernel-wait threshold, launch delay from the launch
    call's end, its launch names, and a queue an event leaves when it starts."""
    work = device_work(model)
    ev = model["events"]
    last = _last_step_start(model)
    kept = work.launch_row >= 0
    if last is not None:
        kept &= work.launch_start < last
    launch_name = np.array([model.strings[int(ev["name"][r])] if r >= 0 else "" for r in work.launch_row.tolist()])
    out: dict[str, Any] = {"idle": {}, "queue_max": {}}
    for device, stream in work.streams():
        on = work.on_stream(device, stream)
        idx = on[kept[on]]
        if len(idx) < 2:
            continue
        gap = work.start[idx][1:] - work.end[idx][:-1]
        host = work.launch_start[idx][1:] > work.end[idx][:-1]
        short = ~host & (gap < HTA_KERNEL_WAIT)
        out["idle"][f"{stream}:host_wait"] = float(gap[host].sum())
        out["idle"][f"{stream}:kernel_wait"] = float(gap[short].sum())
        out["idle"][f"{stream}:other"] = float(gap[~host & ~short].sum())
        queued = idx[np.isin(launch_name[idx], HTA_QUEUE_NAMES)]
        if len(queued):
            t = np.concatenate([work.launch_start[queued], work.start[queued]])
            d = np.concatenate([np.ones(len(queued)), -np.ones(len(queued))])
            out["queue_max"][str(stream)] = float(np.cumsum(d[np.argsort(t, kind="stable")]).max())
    launched = kept & np.isin(launch_name, HTA_LAUNCH_NAMES)
    delay = np.clip(work.start[launched] - work.launch_end[launched], 0.0, None)
    dur = work.end[launched] - work.start[launched]
    out["launch"] = {"count": int(launched.sum()),
                     "delay_p50_us": float(np.percentile(delay, 50)) if len(delay) else None,
                     "delay_p95_us": float(np.percentile(delay, 95)) if len(delay) else None,
                     "short": int((dur < work.launch_end[launched] - work.launch_start[launched]).sum())}
    out["context"] = {"device_events": work.size, "kept": int(kept.sum()),
                      "unlaunched": int((work.launch_row < 0).sum()),
                      "after_last_step": int(((work.launch_row >= 0) & ~kept).sum()), "last_step_start_us": last,
                      "kernels": int((work.kind == Kind.KERNEL).sum()),
                      "kept_kernels": int((kept & (work.kind == Kind.KERNEL)).sum()),
                      "launch_kernels": int((launched & (work.kind == Kind.KERNEL)).sum()),
                      "launch_copies": int((launched & (work.kind != Kind.KERNEL)).sum())}
    return out


def ours(model: TraceModel) -> dict[str, Any]:
    """The plugin's own numbers: what the GPU tab shows (``/idle``, ``/launch_stats``, ``/queue_length``)."""
    idle = idle_time(model)
    s = launch_stats(model)["summary"]
    window = idle["window"]
    return {
        "idle": {f"{st['stream']}:{c}": st[f"{c}_us"] for st in idle["streams"] for c in ("host_wait", "kernel_wait",
                                                                                          "other")},
        "window_us": window["end_us"] - window["start_us"],
        "launch": {"count": s["launched"], "kernels": s["kernels"], "unlaunched": s["unlaunched"],
                   "delay_p50_us": s["launch_delay_p50_us"], "delay_p95_us": s["launch_delay_p95_us"],
                   "short": s["short_kernels"]},
        "queue_max": {str(st["stream"]): st["summary"]["max"] for st in queue_length(model)["streams"]},
    }


def _rel(a: float | None, b: float | None) -> float | None:
    if a is None or b is None:
        return None
    return 0.0 if a == b else abs(a - b) / max(abs(a), abs(b))


def compare(file: Path, python: Path) -> dict[str, Any]:
    model = load_trace(str(file))
    hta = run_hta(python, file, rounding=True)
    hta_ns = run_hta(python, file, rounding=False)
    recount = hta_definitions(model)
    own = ours(model)
    metrics: list[tuple[str, str, Any, Any, Any, Any]] = []
    for key in sorted(set(hta_ns.get("idle", {})) | set(recount["idle"]) | set(own["idle"])):
        metrics.append(("idle", f"idle {key} (µs)", hta.get("idle", {}).get(key), hta_ns.get("idle", {}).get(key),
                        recount["idle"].get(key), own["idle"].get(key)))
    for name in ("count", "delay_p50_us", "delay_p95_us", "short"):
        metrics.append(("launch", f"launch {name}", hta.get("launch", {}).get(name),
                        hta_ns.get("launch", {}).get(name), recount["launch"][name], own["launch"][name]))
    for key in sorted(set(hta_ns.get("queue_max", {})) | set(recount["queue_max"]) | set(own["queue_max"])):
        metrics.append(("queue", f"queue max, stream {key}", hta.get("queue_max", {}).get(key),
                        hta_ns.get("queue_max", {}).get(key), recount["queue_max"].get(key),
                        own["queue_max"].get(key)))
    rows = []
    for group, name, rounded, exact, ours_hta, ours_own in metrics:
        diff = _rel(exact, ours_hta)
        # sums of gaps over a trace: 1 %, or 1 µs for sums near zero
        agree = diff is not None and (diff <= 0.01 or abs((exact or 0) - (ours_hta or 0)) <= 1.0)
        if exact is None and ours_hta is not None and group == "idle" and ours_hta == 0.0:
            agree = None  # HTA leaves out a category with no gap; our recount reports it as 0
        rows.append({"group": group, "metric": name, "hta": rounded, "hta_ns": exact, "ours_hta_definition": ours_hta,
                     "ours": ours_own, "agree": agree if exact is not None or ours_hta is not None else None})
    errors = {k: v for k, v in {**hta, **{f"ns {k}": v for k, v in hta_ns.items()}}.items() if k.endswith("error")}
    return {"trace": str(file.relative_to(REPO)) if file.is_relative_to(REPO) else str(file), "rows": rows,
            "hta_rank": hta.get("rank"), "hta_errors": errors, "ours_window_us": own["window_us"],
            "ours_launch": own["launch"], "recount_context": recount["context"]}


def _fmt(v: Any) -> str:
    if v is None:
        return "—"
    if isinstance(v, float):
        return f"{v:,.1f}" if abs(v) >= 10 else f"{v:,.3f}"
    return str(v)


def _row(r: dict[str, Any], metric: str) -> dict[str, Any] | None:
    return next((row for row in r["rows"] if row["metric"] == metric), None)


def _sum(r: dict[str, Any], suffix: str, column: str) -> float | None:
    values = [row[column] for row in r["rows"] if row["metric"].endswith(suffix) and row[column] is not None]
    return float(sum(values)) if values else None


def findings(results: list[dict[str, Any]]) -> list[str]:
    """The differences in numbers, measured on this run's traces."""
    share, inflation, lines = [], [], []
    for r in results:
        ctx = r["recount_context"]
        if ctx["kernels"]:
            share.append(ctx["launch_kernels"] / ctx["kernels"])
        rounded, exact = _sum(r, ":kernel_wait (µs)", "hta"), _sum(r, ":kernel_wait (µs)", "hta_ns")
        if rounded is not None and exact and rounded != exact:
            inflation.append(rounded / exact - 1)
    agree = [row for r in results for row in r["rows"] if row["agree"] is True]
    differ = [(r["trace"], row["metric"]) for r in results for row in r["rows"] if row["agree"] is False]
    lines.append(f"- **Where the definitions match, the numbers agree**: {len(agree)} of {len(agree) + len(differ)} "
                 "metrics of HTA without rounding and the recount from the plugin's model are within 1 % (or 1 µs)"
                 + (". Not: " + "; ".join(f"{t}: {m}" for t, m in differ) if differ else "; most are identical.")
                 + " Both tools read the same kernels, launches, streams and correlations.")
    if share:
        lines.append(f"- **HTA's launch statistics cover {min(share):.0%}–{max(share):.0%} of the trace's kernels**: "
                     "it drops everything launched after the last `ProfilerStep` starts (the whole last step), every "
                     "event whose launch is not in the trace, and kernels launched by `cuLaunchKernel` (Triton, the "
                     "compiled MLP); it adds copies and memsets launched by `cudaMemcpyAsync`/`cudaMemsetAsync`, "
                     "which the plugin's launch statistics leave out (they are not kernels). The plugin counts every "
                     "kernel that starts in the step window.")
    if inflation:
        lines.append(f"- **HTA's whole-µs rounding inflates kernel wait by {min(inflation):.0%}–{max(inflation):.0%}"
                     "** on the traces with sub-µs timestamps (the `HTA (µs-rounded)` column against `HTA (ns)`): "
                     "each start and end is rounded on its own, so gaps of a few hundred ns become 1 µs, and a few "
                     "short kernels change sides. Kineto 2021 traces (V100) have whole-µs timestamps already, and "
                     "there the columns are equal.")
    lines += [
        "- **Idle time**: HTA sums the gaps between consecutive events of a stream only, from its first to its "
        "last kept event; the plugin covers the whole step window, so the starved start and end of each step "
        "(host wait, mostly) count too, and its host wait is larger on every trace. A stream with a single event has "
        "no gap at all in HTA (0 % idle). HTA's kernel-wait threshold is 30 in the trace's unit, µs (its "
        f"documentation says ns); the plugin's is {KERNEL_WAIT_US:g} µs, so gaps of {KERNEL_WAIT_US:g}–30 µs "
        "already issued are kernel wait in HTA and other here.",
        "- **Launch delay**: HTA measures from the end of the launch call (clipped at 0), the plugin from its start "
        "(what the host spent launching is part of the delay the GPU sees), and over a different sample (the "
        "plugin's kernels against HTA's kernels, copies and memsets, above), so p50 and p95 differ by the launch "
        "call's duration and by the sample (on the DDP ranks a third of HTA's sample is copies and memsets).",
        "- **Short kernels**: same definition (GPU time < launch call time), over different sets: the plugin "
        "counts kernels only (more of them in most traces: the last step, Triton's launches), HTA kernels and also "
        "copies and memsets (the per-trace lines below say how many), which is where its count is the higher one "
        "(the DDP ranks).",
        "- **Queue length**: HTA lets an event leave its queue when it *starts* on the GPU, the plugin when it "
        "*ends* (it is still the GPU's to finish; this is also when CUDA frees the slot), so the plugin's maximum "
        "is the same or one or more higher; HTA also leaves out the last step and unlaunched events.",
        "- **Traces HTA cannot read as they are**: a CPU-only trace makes its idle-time breakdown raise; a trace "
        "of rank 1 makes every call raise unless the rank is passed (the runner passes the trace's own rank). The "
        "plugin answers both (CPU-only: empty lists).",
    ]
    return lines


def markdown(results: list[dict[str, Any]], meta: dict[str, str]) -> str:
    lines = ["<!-- written by benchmarks/compare_hta.py; do not edit by hand -->", "",
             "# GPU view and HTA, side by side", "",
             f"Holistic Trace Analysis {HTA_VERSION} (in its own venv, never a project dependency) and the plugin's "
             "GPU analyses on the same real traces of `tests/data` "
             "(`benchmarks/compare_hta.py --markdown docs/guide/gpu-vs-hta.md`; "
             f"{meta['when']}, {meta['machine']}). Columns: HTA as shipped (timestamps rounded to whole µs); "
             "HTA with `HTA_DISABLE_NS_ROUNDING=1`; HTA's definitions recounted from the plugin's model "
             "(`hta_definitions` in the script); the plugin's own numbers, as the GPU tab shows them (step window, "
             "every device event). *agree*: the two middle columns within 1 % (or 1 µs); — where neither has "
             "the metric or HTA leaves out an empty category. Definitions: [GPU view](gpu.md#definitions).", "",
             "## What the run shows", "", *findings(results), ""]
    for r in results:
        ctx = r["recount_context"]
        lines += [f"### `{r['trace']}`", "",
                  f"Plugin: step window {_fmt(r['ours_window_us'])} µs, {r['ours_launch']['kernels']} kernels in it "
                  f"({r['ours_launch']['unlaunched']} without a launch in the trace). HTA's filter keeps "
                  f"{ctx['kept']} of {ctx['device_events']} device events ({ctx['unlaunched']} without a launch, "
                  f"{ctx['after_last_step']} launched after the last ProfilerStep starts); its launch statistics "
                  f"count {ctx['launch_kernels']} of the trace's {ctx['kernels']} kernels, plus "
                  f"{ctx['launch_copies']} copies and memsets.", ""]
        if r["hta_errors"]:
            lines += [f"HTA raised: {'; '.join(f'{k}: `{v}`' for k, v in r['hta_errors'].items())}", ""]
        lines += ["| metric | HTA (µs-rounded) | HTA (ns) | ours, HTA's definition | ours | agree |",
                  "|---|---:|---:|---:|---:|:---:|"]
        for row in r["rows"]:
            mark = {True: "✓", False: "✗", None: "—"}[row["agree"]]
            lines.append(f"| {row['metric']} | {_fmt(row['hta'])} | {_fmt(row['hta_ns'])} | "
                         f"{_fmt(row['ours_hta_definition'])} | {_fmt(row['ours'])} | {mark} |")
        lines.append("")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("traces", nargs="*", type=Path, help="trace files (default: the real traces of tests/data)")
    parser.add_argument("--markdown", type=Path, help="also write the tables to this file")
    parser.add_argument("--hta-venv", type=Path, default=HTA_VENV, help="HTA's own venv (made if missing)")
    args = parser.parse_args()
    python = hta_python(args.hta_venv)
    traces = args.traces or [REPO / t for t in DEFAULT_TRACES]
    results = [compare(t.resolve(), python) for t in traces]
    meta = {"when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "machine": f"{platform.machine()}, Python {platform.python_version()}"}
    out = REPO / ".bench" / "results" / "compare_hta.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"meta": meta, "results": results}, indent=1))
    text = markdown(results, meta)
    print(text)
    if args.markdown:
        args.markdown.write_text(text)
    failed = [(r["trace"], row["metric"]) for r in results for row in r["rows"] if row["agree"] is False]
    for trace, metric in failed:
        print(f"DIFFERS: {trace}: {metric}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
