"""The Python API's GPU insights and the other analyses the HTTP API serves beside the views' tables: queue length,
memory bandwidth, kernel sequences, the critical path, CUPTI counters, time by annotation, source files, the module
timeline and flame-graph search. Each is the analysis the route calls, its rows turned into a DataFrame as they are
(units in the column names); what a route answers besides its rows (a window, a summary, the offered choices) goes
into ``DataFrame.attrs``.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from ..analysis.annotations import annotation_times
from ..analysis.bandwidth import memory_bandwidth
from ..analysis.critical_path import critical_path
from ..analysis.cupti_counters import cupti_counters
from ..analysis.flamegraph import METRICS, flame_search
from ..analysis.modules import module_timeline_view
from ..analysis.queues import queue_length
from ..analysis.sequences import kernel_sequences
from ..analysis.sources import source_files
from ..model.tables import TraceModel

QUEUE_COLUMNS = ["device", "stream", "max", "mean", "time_at_max_us", "time_blocked_us"]
BANDWIDTH_COLUMNS = ["device", "direction", "count", "without_bytes", "bytes", "busy_us", "mean_gbps", "peak_gbps"]
SEQUENCE_COLUMNS = ["device", "stream", "kernels", "count", "total_us", "span_us", "gap_us", "first_start_us"]
SEGMENT_COLUMNS = ["start_us", "end_us", "duration_us", "category", "id", "name"]
ANNOTATION_COLUMNS = ["path", "name", "depth", "count", "host_us", "device_us", "gpu_range_us"]


def _frame(rows: Any, columns: list[str] | None = None) -> pd.DataFrame:
    result: pd.DataFrame = pd.DataFrame(rows, columns=columns)
    return result


class Insights:
    """Mixed into :class:`tb_plugin.sdk.Trace`: every method reads ``self.model``."""

    model: TraceModel

    def queue_length(self, max_points: int = 500, *, series: bool = False) -> pd.DataFrame:
        """GPU queue length per stream over the step window (the GPU view's chart, the Trace view's counter): one
        row per stream (``max``, time-weighted ``mean``, ``time_at_max_us``, ``time_blocked_us`` at a full queue);
        ``series=True``: one row per stream and time bucket (``time_us``, ``max`` queued in it)."""
        answer = queue_length(self.model, max_points)
        if series:
            rows = [(s["device"], s["stream"], t, q) for s in answer["streams"]
                    for t, q in zip(s["series"]["t_us"], s["series"]["max"], strict=True)]
            out = _frame(rows, ["device", "stream", "time_us", "max"])
        else:
            out = _frame([{"device": s["device"], "stream": s["stream"], **s["summary"]} for s in answer["streams"]],
                         QUEUE_COLUMNS)
        out.attrs.update(window=answer["window"], bucket_us=answer["bucket_us"], full_queue=answer["full_queue"])
        return out

    def memory_bandwidth(self, max_points: int = 500, *, series: bool = False) -> pd.DataFrame:
        """Copy and set bandwidth per device and direction (HtoD, DtoH, DtoD, Memset…) over the step window: one row
        each (``bytes``, ``busy_us``, ``mean_gbps`` while copying, ``peak_gbps``); ``series=True``: one row per
        direction and time bucket (``time_us``, mean ``gbps`` in it)."""
        answer = memory_bandwidth(self.model, max_points)
        if series:
            rows = [(r["device"], r["direction"], t, g) for r in answer["rows"]
                    for t, g in zip(r["series"]["t_us"], r["series"]["gbps"], strict=True)]
            out = _frame(rows, ["device", "direction", "time_us", "gbps"])
        else:
            out = _frame([{k: r[k] for k in BANDWIDTH_COLUMNS} for r in answer["rows"]], BANDWIDTH_COLUMNS)
        out.attrs.update(window=answer["window"], bucket_us=answer["bucket_us"])
        return out

    def kernel_sequences(self, length: int = 3, top: int = 20) -> pd.DataFrame:
        """The ``top`` repeated sequences of ``length`` kernels by GPU time (fusion candidates): ``kernels`` (a
        list), ``count``, ``total_us``, ``span_us``, ``gap_us`` and the first occurrence's start;
        ``attrs["occurrences"]`` lists each sequence's occurrences (ids and times, for the Trace view)."""
        answer = kernel_sequences(self.model, length, top)
        seqs = answer["sequences"]
        out = _frame([{**{k: s[k] for k in SEQUENCE_COLUMNS[:-1]},
                       "first_start_us": s["occurrences"][0]["start_us"] if s["occurrences"] else None}
                      for s in seqs], SEQUENCE_COLUMNS)
        out.attrs.update(window=answer["window"], length=answer["length"],
                         occurrences=[s["occurrences"] for s in seqs])
        return out

    def critical_path(self, step: str | None = None, *, annotation: str | None = None, occurrence: int = 1,
                      start_us: float | None = None, end_us: float | None = None) -> pd.DataFrame:
        """The critical path of a step (default the first), of an annotation's ``occurrence``-th range, or of a time
        range (``start_us``/``end_us``; a missing bound is the trace's): its segments in time order, which tile it
        (``category`` kernel, cpu_op, launch, sync, gpu_wait, host_idle…; ``id`` the Trace view's event id).
        ``attrs``: ``shares`` (µs and share per category), ``scope``, ``steps``, ``annotations`` offered,
        ``duration_us`` and ``note`` (a trace without steps walks nothing until asked for an annotation or a
        range). Raises ``KeyError`` for an unknown step or annotation."""
        window = (start_us, end_us) if start_us is not None or end_us is not None else None
        answer = critical_path(self.model, step, annotation, occurrence, window)
        out = _frame([{**s, "duration_us": s["end_us"] - s["start_us"]} for s in answer["segments"]],
                     SEGMENT_COLUMNS)
        out.attrs.update({k: answer[k] for k in ("scope", "step", "steps", "annotations", "note", "start_us",
                                                 "end_us", "duration_us")})
        out.attrs["shares"] = {s["category"]: {"us": s["us"], "share": s["share"]} for s in answer["shares"]}
        return out

    def cupti_counters(self, limit: int = 500) -> pd.DataFrame:
        """CUPTI range-profiler counters (the GPU view's card): one row per profiled range (the first ``limit`` by
        start), its kernel and operators, and one column per counter; ``attrs["operators"]``: the counters summed
        per operator. Empty (with no counter columns) for a trace without counters, as most are."""
        answer = cupti_counters(self.model, limit)
        metrics = list(answer["metrics"])
        base = ["id", "name", "start_us", "dur_us", "kernel_id", "operator", "top_operator", "sass_flops"]
        rows = [{**{k: r[k] for k in base}, **dict(zip(metrics, r["values"], strict=True))} for r in answer["rows"]]
        out = _frame(rows, [*base, *metrics])
        ops = [{"operator": o["operator"], "kernels": o["kernels"], "sass_flops": o["sass_flops"],
                **dict(zip(metrics, o["values"], strict=True))} for o in answer["operators"]]
        out.attrs.update(metrics=metrics, total_rows=answer["total_rows"], matched=answer["matched"],
                         join=answer["join"], operators=_frame(ops, ["operator", "kernels", "sass_flops", *metrics]))
        return out

    def annotations(self) -> pd.DataFrame:
        """Time by ``record_function`` annotation (the Operator view's card): one row per annotation path, in tree
        order: ``path`` (names joined by `` › ``), ``depth``, ``count``, ``host_us``, ``device_us`` (GPU time launched
        inside) and ``gpu_range_us`` (the GPU-side range, HTA's figure; None where the trace has none)."""
        answer = annotation_times(self.model)
        out = _frame([{**r, "path": " › ".join(r["path"])} for r in answer["rows"]], ANNOTATION_COLUMNS)
        out.attrs["has_gpu_ranges"] = answer["has_gpu_ranges"]
        return out

    def sources(self) -> pd.DataFrame:
        """The source files the trace's call stacks name: ``path``, ``kind`` (user, library, generated) and
        ``absolute`` where the trace tells; ``attrs["library_roots"]``."""
        answer = source_files(self.model)
        out = _frame(answer["files"], ["path", "kind", "absolute"])
        out.attrs["library_roots"] = answer["library_roots"]
        return out

    def module_timeline(self, limit: int = 20000) -> pd.DataFrame:
        """Each ``nn.Module`` call in time order (the Module view's timeline), the first ``limit``;
        ``attrs["truncated"]`` says whether there were more."""
        answer = module_timeline_view(self.model, limit)
        out = _frame(answer["occurrences"], ["name", "start_us", "dur_us", "depth"])
        out.attrs["truncated"] = answer["truncated"]
        return out

    def search_stacks(self, query: str, metric: str = "self_host_us", *, merge_by_function: bool = False,
                      step: str | None = None, operator: str | None = None) -> dict[str, Any]:
        """The Flame graph's search over every frame (those too thin to draw too): how many frames hold ``query``
        (case-insensitive), their weight (a match inside a match counted once: the Operator view's total) and the
        whole graph's; as ``GET /flamegraph/search`` answers it."""
        if metric not in METRICS:
            raise ValueError(f"metric must be one of {', '.join(METRICS)}; got {metric!r}")
        return flame_search(self.model, metric, merge_by_function, step, operator, query)
