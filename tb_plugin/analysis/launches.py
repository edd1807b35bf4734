"""Device work with its launches, and kernel launch statistics (HTA's ``get_cuda_kernel_launch_stats``, made right).

``device_work`` is the one table the GPU insights (idle time, queue length, critical path, launch statistics)
share: every kernel, memcpy and memset with its stream, its times and the host call that launched it.

Launch statistics, per kernel with a known launch (the ``cudaLaunchKernel``/``cuLaunchKernel``… runtime or driver
call with the same correlation id):
- cpu duration = the launch call's duration; gpu duration = the kernel's;
- launch delay = kernel start − launch call start (how long after the host began launching the GPU started it);
- a short kernel runs for less time than its launch call took: a stream of them leaves the GPU starved
  (launch-bound); fusion or CUDA graphs help.

Kernels whose launch is not in the trace (launched before the profiled window, or by a thread the profiler did
not record) are counted apart as ``unlaunched``, not dropped as HTA drops them: they ran inside the window, and
leaving them out hides their GPU time. Only device events count: a host ``cpu_op`` that carries a ``stream`` arg
(Triton's launcher) is host work, never a kernel.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..model.arrays import take, unique_pairs
from ..model.derived import memoized
from ..model.kinds import Kind
from ..model.optree import launch_rows
from ..model.tables import TraceModel
from .steps import find_steps

OUTLIER_PERCENTILE = 95.0


@dataclass(frozen=True)
class DeviceWork:
    """One entry per ``device_events`` row, in that order; launch fields are NaN / -1 where unknown."""

    row: np.ndarray  # event row (the id the Trace view links to)
    kind: np.ndarray
    name: np.ndarray  # string code
    device: np.ndarray
    stream: np.ndarray
    start: np.ndarray
    end: np.ndarray
    launch_row: np.ndarray  # event row of the launching runtime/driver call, -1 if unknown
    launch_start: np.ndarray
    launch_end: np.ndarray
    launch_pid: np.ndarray
    launch_tid: np.ndarray

    @property
    def size(self) -> int:
        return len(self.row)

    def streams(self) -> list[tuple[int, int]]:
        """The (device, stream) pairs with work, sorted."""
        if self.size == 0:
            return []
        return unique_pairs(self.device, self.stream)

    def on_stream(self, device: int, stream: int) -> np.ndarray:
        """Positions of the stream's events, by start time."""
        idx = np.flatnonzero((self.device == device) & (self.stream == stream))
        return idx[np.argsort(self.start[idx], kind="stable")]


@memoized
def device_work(model: TraceModel) -> DeviceWork:
    """Every device event with its launch; computed once per model."""
    ev = model["events"]
    dev = model["device_events"]
    rows = dev["row"]
    start = ev["ts"][rows]
    end = start + np.nan_to_num(ev["dur"][rows], nan=0.0, posinf=0.0).clip(min=0.0)
    launch_row = launch_rows(model)  # the host tree's join, without nesting the threads (the Trace view's counters)
    launch_start = take(ev["ts"], launch_row, np.nan)
    launch_dur = np.nan_to_num(take(ev["dur"], launch_row, 0.0), nan=0.0, posinf=0.0, neginf=0.0).clip(min=0.0)
    return DeviceWork(row=rows, kind=ev["kind"][rows], name=ev["name"][rows], device=dev["device"],
                      stream=dev["stream"], start=start, end=end, launch_row=launch_row,
                      launch_start=launch_start, launch_end=launch_start + launch_dur,
                      launch_pid=take(ev["pid"], launch_row, -1), launch_tid=take(ev["tid"], launch_row, -1))


def step_window(model: TraceModel) -> tuple[float, float]:
    """[first step start, last step end): the window every GPU insight is measured in."""
    steps = find_steps(model)
    return float(steps.start[0]), float(steps.end[-1])


def _percentile(values: np.ndarray, q: float) -> float | None:
    return float(np.percentile(values, q)) if len(values) else None


@dataclass(frozen=True)
class _Launched:
    """Every launched kernel of the step window, longest launch delay first, with what ``launch_stats`` answers
    besides its rows (computed once; a request's ``limit`` only cuts the rows)."""

    idx: np.ndarray  # positions in device_work
    cpu: np.ndarray
    gpu: np.ndarray
    delay: np.ndarray
    short: np.ndarray
    outlier: np.ndarray
    answer: dict[str, Any]


def launch_stats(model: TraceModel, limit: int = 500) -> dict[str, Any]:
    """Per-kernel launch rows (the ``limit`` longest launch delays), per-name means and a summary; plain data.

    Kernels that start in the step window count. Empty (no rows, counts 0) for a trace without kernels.
    """
    t = _launched(model)
    work = device_work(model)
    k = slice(0, max(0, limit))
    idx = t.idx[k]
    launch = work.launch_row[idx]
    strings = model.strings
    # each column converted whole (a row's fields read one numpy scalar at a time took 22 ms for 8,772 rows)
    columns = (work.row[idx], work.name[idx], work.device[idx], work.stream[idx], work.start[idx], launch,
               model["events"]["name"][launch], work.launch_start[idx], t.cpu[k], t.gpu[k], t.delay[k], t.short[k],
               t.outlier[k])
    rows = [{
        "id": row, "name": strings[name], "device": _device(device), "stream": stream, "start_us": start,
        "launch_id": launch_id, "launch_name": strings[launch_name], "launch_start_us": launch_start,
        "cpu_duration_us": c, "gpu_duration_us": g, "launch_delay_us": d, "short": s, "outlier": o,
    } for row, name, device, stream, start, launch_id, launch_name, launch_start, c, g, d, s, o in zip(
        *(column.tolist() for column in columns), strict=True)]
    return {**t.answer, "rows": rows}


def launch_summary(model: TraceModel) -> dict[str, Any]:
    """``launch_stats``'s summary and per-name means, without building any row (callers must not change them)."""
    answer = _launched(model).answer
    return {"summary": answer["summary"], "by_name": answer["by_name"]}


@memoized
def _launched(model: TraceModel) -> _Launched:
    work = device_work(model)
    lo, hi = step_window(model)
    kernel = (work.kind == Kind.KERNEL) & (work.start >= lo) & (work.start < hi)
    known = kernel & (work.launch_row >= 0)
    idx = np.flatnonzero(known)
    cpu = work.launch_end[idx] - work.launch_start[idx]
    gpu = work.end[idx] - work.start[idx]
    delay = work.start[idx] - work.launch_start[idx]
    p95 = _percentile(delay, OUTLIER_PERCENTILE)
    outlier = delay >= p95 if p95 is not None else np.zeros(0, bool)
    short = gpu < cpu
    order = np.argsort(-delay, kind="stable")
    answer = {
        "window": {"start_us": lo, "end_us": hi},
        "summary": {
            "kernels": int(kernel.sum()),
            "launched": len(idx),
            "unlaunched": int((kernel & ~known).sum()),
            "unlaunched_us": float((work.end - work.start)[kernel & ~known].sum()),
            "launch_delay_p50_us": _percentile(delay, 50.0),
            "launch_delay_p95_us": p95,
            "launch_delay_max_us": float(delay.max()) if len(delay) else None,
            "cpu_duration_mean_us": float(cpu.mean()) if len(cpu) else None,
            "gpu_duration_mean_us": float(gpu.mean()) if len(gpu) else None,
            "short_kernels": int(short.sum()),
            "short_kernels_us": float(gpu[short].sum()),
            "outliers": int(outlier.sum()),
        },
        "by_name": _by_name(model, work.name[idx], cpu, gpu, delay, short),
        "total_rows": len(idx),
    }
    return _Launched(idx=idx[order], cpu=cpu[order], gpu=gpu[order], delay=delay[order], short=short[order],
                     outlier=outlier[order], answer=answer)


def _device(device: int) -> int | None:
    return device if device >= 0 else None


def _by_name(model: TraceModel, names: np.ndarray, cpu: np.ndarray, gpu: np.ndarray, delay: np.ndarray,
             short: np.ndarray) -> list[dict[str, Any]]:
    """Means per kernel name, the names with the most short kernels first: where fusion pays off."""
    if len(names) == 0:
        return []
    codes, group, count = np.unique(names, return_inverse=True, return_counts=True)

    def mean(values: np.ndarray) -> list[float]:
        means: list[float] = (np.bincount(group, weights=values, minlength=len(codes)) / count).tolist()
        return means

    n_short = np.bincount(group, weights=short.astype(np.float64), minlength=len(codes))
    out: list[dict[str, Any]] = [{"name": model.strings[int(c)], "count": int(n), "cpu_duration_mean_us": float(cm),
            "gpu_duration_mean_us": float(gm), "launch_delay_mean_us": float(dm),
            "launch_delay_max_us": float(dx), "short_kernels": int(s)}
           for c, n, cm, gm, dm, dx, s in zip(codes.tolist(), count.tolist(), mean(cpu), mean(gpu), mean(delay),
                                             _group_max(group, delay, len(codes)).tolist(), n_short.tolist())]
    out.sort(key=lambda r: (-int(r["short_kernels"]), -float(r["count"]) * float(r["launch_delay_mean_us"])))
    return out


def _group_max(group: np.ndarray, values: np.ndarray, n: int) -> np.ndarray:
    out = np.full(n, -np.inf)
    np.maximum.at(out, group, values)
    return out
