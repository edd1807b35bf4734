"""``report PATH -o report.html``: one self-contained HTML file with plotly charts of the Overview (with MFU),
Operator, Kernel, GPU, roofline, Memory and Distributed views, plotly.js embedded once: it opens offline, from an
email or a CI artifact.

Charts are plotly figures built from the Python API's DataFrames (plotly express), the step-breakdown categories in
the plugin's one palette (``sdk.plots``, the same colour in every bar and pie); tables are pandas' HTML, with bytes,
durations and shares formatted as the pages show them.

Every name from the trace (operators, kernels, workers, devices) reaches a chart through :func:`_label`: plotly
draws labels, legends and hover text as a subset of HTML (``<a href>``, ``<b>``), so an operator named
``<a href="https://…">`` would be a live link in the report. Escaped, it reads as the text it is (plotly shows
``&lt;`` as ``<``). pandas escapes the tables itself.
"""

from __future__ import annotations

import contextlib
import html
import os
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd
import plotly.express as px
import plotly.graph_objects as go
import plotly.io as pio

from ..sdk import Trace
from ..sdk.plots import share_pie, step_bars
from .summary import finding_texts, flops_text, job_mfu_text, mfu_text, top_kernels, top_operators, verdict_text

TOP = 20
_STYLE = """
body { font-family: system-ui, sans-serif; margin: 24px auto; max-width: 1200px; color: #222; }
h1 { font-size: 22px; } h2 { font-size: 18px; border-bottom: 1px solid #ddd; padding-bottom: 4px; margin-top: 32px; }
table.dataframe { border-collapse: collapse; font-size: 12px; }
table.dataframe td, table.dataframe th { border: 1px solid #ddd; padding: 2px 6px; text-align: right; }
table.dataframe td:first-child { text-align: left; max-width: 520px; overflow-wrap: anywhere; }
.note { color: #666; } .verdict { font-size: 16px; font-weight: 600; }
"""


class Page:
    """The report's body: sections of headings, charts and tables; plotly.js goes in with the first chart."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.charts = 0

    def heading(self, text: str) -> None:
        self.parts.append(f"<h2>{html.escape(text)}</h2>")

    def text(self, text: str, css: str = "") -> None:
        self.parts.append(f'<p class="{css}">{html.escape(text)}</p>')

    def chart(self, figure: go.Figure) -> None:
        figure.update_layout(template="plotly_white", margin={"l": 40, "r": 20, "t": 50, "b": 40})
        self.parts.append(pio.to_html(figure, full_html=False, include_plotlyjs=self.charts == 0,
                                      config={"displaylogo": False}, div_id=f"chart-{self.charts}"))
        self.charts += 1

    def table(self, frame: pd.DataFrame) -> None:
        self.parts.append(frame.to_html(index=False, float_format="{:,.3f}".format, border=0))

    def html(self, title: str) -> str:
        return (f"<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title>"
                f"<style>{_STYLE}</style></head><body>{''.join(self.parts)}</body></html>")


def _label(names: pd.Series, width: int | None = None) -> pd.Series:
    """Trace text as a chart label: shortened to ``width`` characters, then HTML-escaped (see the module doc)."""
    def one(s: object) -> str:
        text = str(s)
        if width is not None and len(text) > width:
            text = text[:width - 1] + "…"
        return html.escape(text)

    return names.map(one)


def _overview(page: Page, trace: Trace) -> None:
    o = trace.overview()
    verdict = verdict_text(o.verdict)
    if verdict:
        page.text(verdict, "verdict")
    page.heading(f"Overview: {o.step_time_us / 1000:.2f} ms per step ({len(o.steps)} steps)")
    page.text(mfu_text(o.mfu), "verdict")
    job = job_mfu_text(o.mfu)
    if job:
        page.text(job)
    if not o.steps.empty:
        page.chart(step_bars(o.steps, list(o.breakdown.index)))
    if (o.breakdown["time_us"] > 0).any():
        page.chart(share_pie(o.breakdown))
    findings = finding_texts(o.findings)
    if findings:
        page.parts.append("<ol>" + "".join(f"<li>{html.escape(t)}</li>" for t in findings) + "</ol>")
    for note in o.notes:
        page.text(note, "note")
    if not o.gpus.empty:
        page.text("GPU utilization counts every kernel, communication kernels included (the headline); "
                  "'without communication' leaves NCCL kernels out.", "note")
        page.table(gpu_table(o.gpus))


def _bytes(n: object) -> str:
    """1.5 GiB, 120.0 MiB, 512 B: as the pages format bytes."""
    if not isinstance(n, (int, float)) or n != n:
        return "—"
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(size) < 1024 or unit == "TiB":
            return f"{size:,.0f} {unit}" if unit == "B" else f"{size:,.1f} {unit}"
        size /= 1024
    return f"{size:,.1f} TiB"


def _share(x: object) -> str:
    return f"{100 * float(x):.1f} %" if isinstance(x, (int, float)) and x == x else "n/a"


def gpu_table(gpus: pd.DataFrame) -> pd.DataFrame:
    """The Overview's GPU rows as the page shows them: memory in GiB, shares in %, kernel time in ms."""
    labels = {"utilization": "utilization (all kernels)", "compute_utilization": "utilization without communication",
              "gpu_busy": "GPU busy (all GPU work)", "sm_efficiency": "est. SM efficiency",
              "achieved_occupancy": "est. achieved occupancy", "tensor_core_ratio": "kernel time on tensor cores"}
    names = gpus["name"] if "name" in gpus else pd.Series([None] * len(gpus))
    out: pd.DataFrame = pd.DataFrame({
        "GPU": [f"GPU {int(i)}" if isinstance(i, (int, float)) and i == i else "(unknown device)" for i in gpus["id"]],
        "name": [n if isinstance(n, str) else "—" for n in names]})
    if "memory_bytes" in gpus:
        out["memory"] = [_bytes(v) for v in gpus["memory_bytes"]]
    for key, label in labels.items():
        if key in gpus:
            out[label] = [_share(v) for v in gpus[key]]
    if "kernel_time_us" in gpus:
        out["kernel time"] = [f"{v / 1000:,.2f} ms" for v in gpus["kernel_time_us"]]
    return out


def _operators(page: Page, trace: Trace) -> None:
    page.heading("Operators")
    ops = top_operators(trace, TOP)
    if ops.empty:
        page.text("No operators in this trace.", "note")
        return
    key = "device_self_us" if ops["device_self_us"].sum() > 0 else "host_self_us"
    _top_bars(page, ops, key, f"operators by {key.removesuffix('_us').replace('_', ' ')}")
    page.table(ops)


def _kernels(page: Page, trace: Trace) -> None:
    page.heading("Kernels")
    kernels = top_kernels(trace, TOP)
    if kernels.empty:
        page.text("No GPU kernels in this trace (a CPU-only run?).", "note")
        return
    _top_bars(page, kernels, "total_us", "kernels by total time")
    page.table(kernels)


def _top_bars(page: Page, rows: pd.DataFrame, key: str, what: str) -> None:
    """A horizontal bar per row (the largest on top) of ``key`` in ms, names shortened to fit."""
    shown = rows.assign(name=_label(rows["name"], 60), ms=rows[key] / 1000.0)
    page.chart(px.bar(shown.iloc[::-1], x="ms", y="name", orientation="h", height=200 + 22 * len(shown),
                      title=f"Top {len(shown)} {what} (ms)"))


def roofline_figure(points: pd.DataFrame, roofs: dict[str, Any]) -> go.Figure:
    """Log-log, as the GPU view draws it: the memory roof (slanted), a flat roof per class the points use from its
    ridge on (beside an FP32 point, the TF32 tensor-core roof, dotted), one marker per point, its area ∝ time."""
    shown = points[points["intensity"].fillna(0) > 0]
    fig = go.Figure()
    compute = {r["roof"]: r for r in roofs.get("compute", [])}
    bw = roofs.get("bandwidth_bytes_per_s")
    own = set(shown["roof"].dropna())
    used = own | ({"tf32"} if "fp32" in own else set())
    drawn = [compute[c] for c in compute if c in used]
    xs = [float(x) for x in shown["intensity"]] + [float(r["ridge_intensity"]) for r in drawn if r["ridge_intensity"]]
    lo, hi = (min(xs) / 10, max(xs) * 10) if xs else (0.01, 1e4)
    if bw and drawn:
        top = max(float(r["ridge_intensity"] or hi) for r in drawn)
        fig.add_trace(go.Scatter(x=[lo, top], y=[lo * bw, top * bw], mode="lines", name=f"memory {bw / 1e12:.2f} TB/s",
                                 line={"color": "#7f7f7f"}))
    for r in drawn:
        start = max(lo, float(r["ridge_intensity"] or lo))
        fig.add_trace(go.Scatter(x=[start, hi], y=[r["peak_flops_per_s"]] * 2, mode="lines",
                                 name=f"{r['label']} {r['peak_flops_per_s'] / 1e12:g} TFLOP/s",
                                 line={"dash": "solid" if r["roof"] in own else "dot"}))
    longest = float(shown["time_us"].max()) if not shown.empty else 1.0
    size = [8 + 36 * (t / longest) ** 0.5 for t in shown["time_us"]]
    fig.add_trace(go.Scatter(x=shown["intensity"], y=shown["achieved_flops_per_s"], mode="markers", name="points",
                             text=_label(shown["name"]), marker={"size": size, "opacity": 0.7},
                             hovertemplate="%{text}<br>%{x:.3g} FLOP/byte, %{y:.3g} FLOP/s<extra></extra>"))
    fig.update_xaxes(type="log", title="arithmetic intensity (FLOPs per byte)")
    fig.update_yaxes(type="log", title="achieved FLOP/s", exponentformat="SI")
    fig.update_layout(title="Roofline: kernels under the roofs of their class", height=520)
    return fig


def _roofline(page: Page, trace: Trace) -> None:
    page.heading("Roofline")
    points = trace.roofline()
    if points.empty:
        page.text("No kernel's work could be estimated (no GPU kernels, or no record_shapes).", "note")
        return
    device = points.attrs["device"]
    totals = points.attrs["totals"]
    where = device.get("table_entry") or device.get("name") or "unknown device"
    page.text(f"{where}: {flops_text(totals['achieved_flops_per_s'])} achieved over the kernels whose work is "
              f"known ({totals['estimated_time_us'] / 1000:.2f} of {totals['kernel_time_us'] / 1000:.2f} ms of "
              f"kernel time). Peaks: {device.get('source') or device.get('note')}.", "note")
    page.chart(roofline_figure(points, points.attrs["roofs"]))
    columns = ["name", "calls", "time_us", "flops", "bytes", "intensity", "achieved_flops_per_s",
               "attainable_flops_per_s", "roof", "bound", "wasted_us"]
    top = points.head(TOP)[columns].assign(name=lambda f: _label(f["name"]))
    page.text("Ranked by wasted time = time × (1 − achieved / attainable at the point's intensity).", "note")
    page.table(top)


def _gpu(page: Page, trace: Trace) -> None:
    """The GPU view: idle time per stream (what kept the GPU waiting), launch statistics, queue length, copy
    bandwidth and the repeated kernel sequences."""
    page.heading("GPU")
    idle = trace.idle()
    if idle.empty:
        page.text("No GPU work in this trace (a CPU-only run?).", "note")
        return
    parts = ["busy_us", "host_wait_us", "kernel_wait_us", "other_us"]
    long = idle.assign(stream=[f"GPU {d} · stream {s}" for d, s in zip(idle["device"], idle["stream"])]).melt(
        id_vars=["stream"], value_vars=parts, var_name="time", value_name="us")
    long["ms"] = long["us"] / 1000.0
    long["time"] = long["time"].str.removesuffix("_us").str.replace("_", " ")
    page.chart(px.bar(long, x="ms", y="stream", color="time", orientation="h", height=160 + 40 * len(idle),
                      title="Busy and idle time per stream over the steps (ms): why the GPU waited"))
    summary = trace.launch_stats().attrs.get("summary") or {}
    page.text(f"{summary.get('kernels', 0):,} kernels; launch delay p50 {_ms(summary.get('launch_delay_p50_us'))}, "
              f"p95 {_ms(summary.get('launch_delay_p95_us'))}; {summary.get('short_kernels', 0):,} kernels shorter "
              "than their launch call.")
    queues = trace.queue_length()
    if not queues.empty:
        page.text("Queue length per stream: kernels launched and not finished (max, time-weighted mean).")
        page.table(queues)
    bandwidth = trace.memory_bandwidth()
    if not bandwidth.empty:
        page.text("Copy and set bandwidth per direction over the steps (GB/s).")
        page.table(bandwidth.assign(bytes=[_bytes(b) for b in bandwidth["bytes"]]))
    sequences = trace.kernel_sequences(top=10)
    if not sequences.empty:
        page.text("Repeated kernel sequences by GPU time (candidates for fusion or CUDA graphs).")
        page.table(sequences.drop(columns=["first_start_us"]).assign(
            kernels=[" → ".join(_label(pd.Series(k))) for k in sequences["kernels"]]))


def _ms(us: object) -> str:
    return f"{float(us) / 1000:,.3f} ms" if isinstance(us, (int, float)) and us == us else "n/a"


def _memory(page: Page, trace: Trace) -> None:
    page.heading("Memory")
    curve = trace.memory_curve()
    if curve.empty:
        page.text("No memory curve: profile with profile_memory=True (PyTorch 1.10 or later).", "note")
        return
    long = curve.melt(id_vars=["device", "time_us"], value_vars=["allocated_bytes", "reserved_bytes"],
                      var_name="series", value_name="bytes")
    long["time_ms"] = (long["time_us"] - curve["time_us"].min()) / 1000.0
    long["MB"] = long["bytes"] / 1e6
    long["line"] = _label(long["device"] + " " + long["series"].str.removesuffix("_bytes"))
    page.chart(px.line(long, x="time_ms", y="MB", color="line", line_shape="hv", title="Memory over time (MB)"))


def _distributed(page: Page, trace: Trace) -> None:
    page.heading("Distributed")
    if len(trace.workers) < 2:
        page.text("One worker recorded this span: nothing to compare across ranks.", "note")
        return
    ranks = trace.distributed()
    parts = ["computation_us", "overlap_us", "communication_us", "other_us"]
    long = ranks.melt(id_vars=["worker"], value_vars=parts, var_name="part", value_name="us")
    long["ms"] = long["us"] / 1000.0
    long["part"] = long["part"].str.removesuffix("_us")
    long["worker"] = _label(long["worker"])
    page.chart(px.bar(long, x="worker", y="ms", color="part", title="Per rank, average step (ms)"))
    straggler = ranks.attrs.get("straggler")
    if straggler:
        page.text(str(straggler.get("text")), "verdict")
    page.table(ranks.drop(columns=["overlap_note"], errors="ignore"))


# The report's sections in order. A new one (the GPU view's roofline) goes in its place in this list.
_SECTIONS = (_overview, _operators, _kernels, _gpu, _roofline, _memory, _distributed)


def render(trace: Trace) -> str:
    """The report of ``trace`` as one HTML document."""
    page = Page()
    title = f"{trace.run} / {trace.worker} / span {trace.span}"
    page.parts.append(f"<h1>PyTorch profiler report: {html.escape(title)}</h1>")
    page.text(f"{trace.file.filename}: {trace.model.n_events:,} events", "note")
    for section in _SECTIONS:
        section(page, trace)
    return page.html(title)


def check_output(output: str) -> None:
    """Refuse an output path the report cannot be written to (exit code 5), before any trace is loaded."""
    from ..sdk import ProfilerError
    from . import EXIT_CANNOT_WRITE

    target = Path(output)
    folder = target.parent if str(target.parent) else Path(".")
    if target.is_dir():
        raise ProfilerError(f"cannot write the report to {output}: it is a directory", EXIT_CANNOT_WRITE)
    if not folder.is_dir():
        raise ProfilerError(f"cannot write the report to {output}: the folder {folder} does not exist",
                            EXIT_CANNOT_WRITE)
    if not os.access(folder, os.W_OK | os.X_OK) or (target.exists() and not os.access(target, os.W_OK)):
        raise ProfilerError(f"cannot write the report to {output}: permission denied", EXIT_CANNOT_WRITE)


def write_report(trace: Trace, output: str) -> None:
    """Write the report whole (a temporary file renamed into place): never a half-written report."""
    from ..sdk import ProfilerError
    from . import EXIT_CANNOT_WRITE

    target = Path(output)
    text = render(trace)
    try:
        with tempfile.NamedTemporaryFile("w", encoding="utf-8", dir=target.parent or Path("."),
                                         prefix=f".{target.name}.", suffix=".tmp", delete=False) as fh:
            fh.write(text)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(fh.name, 0o666 & ~umask)  # as a file opened for writing would be, not the temp file's 0600
        os.replace(fh.name, target)
    except OSError as err:
        with contextlib.suppress(OSError, UnboundLocalError):
            os.unlink(fh.name)
        raise ProfilerError(f"cannot write the report to {output}: {err.strerror or err}", EXIT_CANNOT_WRITE) from None
