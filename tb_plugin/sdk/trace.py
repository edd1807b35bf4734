"""The Python API's objects: a loaded trace whose views come back as pandas DataFrames, and a diff of two.

Every table is the analysis the TensorBoard view calls (``analysis/``, memoised on the model), turned into a
DataFrame as it is: the same rows, the same numbers, units in the column names (``_us`` microseconds,
``_bytes``). Nothing here computes a number of its own.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..analysis import kernels as kernel_analysis
from ..analysis import operators as operator_analysis
from ..analysis.device_peaks import NO_OVERRIDE, PeakOverride, parse_override
from ..analysis.diff import diff_node, diff_summary
from ..analysis.distributed import COLLECTIVE_TABLE_COLUMNS
from ..analysis.distributed import distributed as distributed_view
from ..analysis.distributed_page import page_of
from ..analysis.flamegraph import flame_tree, folded_stacks
from ..analysis.idle import KERNEL_WAIT_US, idle_time
from ..analysis.launches import launch_summary
from ..analysis.memory import memory_curve, memory_events, memory_statistics
from ..analysis.memory_categories import allocations
from ..analysis.memory_category_view import category_view, export_device
from ..analysis.modules import module_view
from ..analysis.overview import overview as overview_view
from ..analysis.rank_summary import RankSummary, rank_summary
from ..analysis.roofline import GROUPINGS as ROOFLINE_GROUPINGS
from ..analysis.roofline import roofline as roofline_view
from ..analysis.steps import find_steps
from ..analysis.summary import summary as summary_view
from ..analysis.whatif.what_if import what_if as what_if_view
from ..catalog.catalog import TraceFile
from ..catalog.sniff import MEMORY_RAW, export_kind
from ..loader.memory_export import load_export
from ..model.names import step_number
from ..model.tables import TraceModel
from .insights import Insights
from .locate import Progress, Selection, load, select


def frame(rows: Any, columns: list[str] | None = None) -> pd.DataFrame:
    """A DataFrame of an analysis's rows (a list of dicts or tuples), typed for mypy."""
    result: pd.DataFrame = pd.DataFrame(rows, columns=columns)
    return result


def column(category: str) -> str:
    """A step-breakdown category as a column name with its unit: ``CPU Exec`` → ``cpu_exec_us``."""
    return category.lower().replace(" ", "_") + "_us"


@dataclass(frozen=True)
class Mfu:
    """Model FLOPs utilisation as the Overview shows it (``GET /overview``'s ``mfu``): FLOP/s, bytes in SI units."""

    model_flops_per_step: float
    achieved_flops_per_s: float | None
    peak_flops_per_s: float | None  # None: a device not in the peak table (set ``peaks=``)
    dtype: str | None  # the peak class used: the one carrying most FLOPs (bf16, tf32, fp32, ...)
    ratio: float | None
    estimated: bool  # some FLOPs come from shape formulas, not from the trace
    steps: pd.DataFrame  # index: step; model_flops, duration_us, achieved_flops_per_s, ratio
    ranks: pd.DataFrame  # multi-rank: one row per rank (empty otherwise)
    job: dict[str, Any] | None  # multi-rank: the job's achieved FLOP/s, peak and ratio
    raw: dict[str, Any] = field(repr=False)

    @classmethod
    def of(cls, payload: dict[str, Any]) -> Mfu:
        steps = pd.DataFrame(payload["steps"], columns=["name", "model_flops", "duration_us", "achieved_flops_per_s",
                                                        "ratio"]).rename(columns={"name": "step"}).set_index("step")
        job = payload.get("job")
        return cls(model_flops_per_step=payload["model_flops_per_step"],
                   achieved_flops_per_s=payload["achieved_flops_per_s"], peak_flops_per_s=payload["peak_flops_per_s"],
                   dtype=payload["dtype"], ratio=payload["ratio"], estimated=payload["estimated"], steps=steps,
                   ranks=pd.DataFrame(job["ranks"] if job else []),
                   job={k: v for k, v in job.items() if k != "ranks"} if job else None, raw=payload)


@dataclass(frozen=True)
class Overview:
    """The Overview page's numbers: per-step breakdown, its average, GPUs, environment, verdict and findings."""

    steps: pd.DataFrame  # one row per step (index: step name): start_us, duration_us, one <category>_us column each
    breakdown: pd.DataFrame  # index: category; time_us (average per step) and share of the average step
    step_time_us: float  # the average step's duration
    gpus: pd.DataFrame  # one row per GPU: utilization, SM efficiency, occupancy, tensor core ratio, kernel time
    environment: dict[str, Any]
    verdict: Any  # the diagnosis in one line where the Overview gives one (None otherwise)
    findings: pd.DataFrame  # the ranked recommendations, one row each (empty when there are none)
    notes: list[str]
    mfu: Mfu  # model FLOPs utilisation: per step, the average step, the peak used (and the job's, multi-rank)
    raw: dict[str, Any] = field(repr=False)  # the Overview exactly as the HTTP API answers it

    def plot(self, kind: str = "bar") -> Any:
        """A plotly figure: the per-step breakdown as stacked bars (``kind="bar"``), or the average step's
        categories as a pie (``kind="pie"``), in the plugin's colours. ``.show()`` it, or ``.write_html(path)``."""
        from .plots import share_pie, step_bars

        _choose("kind", kind, ("bar", "pie"))
        return step_bars(self.steps, list(self.breakdown.index)) if kind == "bar" else share_pie(self.breakdown)

    @classmethod
    def of(cls, payload: dict[str, Any]) -> Overview:
        categories = payload["categories"]
        steps = pd.DataFrame(
            [{"step": s["name"], "start_us": s["start_us"], "duration_us": s["duration_us"],
              **{column(c): s["breakdown_us"][c] for c in categories}} for s in payload["steps"]],
            columns=["step", "start_us", "duration_us", *map(column, categories)],
        ).set_index("step")
        average = payload["average"]
        breakdown = pd.DataFrame({"time_us": [average["breakdown_us"][c] for c in categories],
                                  "share": [average["share"][c] for c in categories]},
                                 index=pd.Index(categories, name="category"))
        return cls(steps=steps, breakdown=breakdown, step_time_us=float(average["duration_us"]),
                   gpus=pd.DataFrame(payload["gpus"]), environment=dict(payload["environment"]),
                   verdict=payload.get("verdict"), findings=pd.DataFrame(payload.get("recommendations") or []),
                   notes=list(payload.get("notes") or []), mfu=Mfu.of(payload["mfu"]), raw=payload)


@dataclass(frozen=True)
class WhatIf:
    """A combination of the findings' fixes replayed together: baseline and predicted step time (cadence) and the
    step breakdown of each."""

    ids: list[str]
    baseline_step_us: float
    predicted_step_us: float
    saving_us: float
    breakdown: pd.DataFrame  # index: category; baseline_us and predicted_us per steady-state step
    changes: pd.DataFrame  # one row per fix replayed: id, label, model
    raw: dict[str, Any] = field(repr=False)  # as the HTTP API's /what_if answers it

    @classmethod
    def of(cls, payload: dict[str, Any]) -> WhatIf:
        categories = list(payload["baseline_breakdown_us"])
        breakdown = pd.DataFrame({"baseline_us": [payload["baseline_breakdown_us"][c] for c in categories],
                                  "predicted_us": [payload["predicted_breakdown_us"][c] for c in categories]},
                                 index=pd.Index(categories, name="category"))
        return cls(ids=list(payload["ids"]), baseline_step_us=float(payload["baseline_step_us"]),
                   predicted_step_us=float(payload["predicted_step_us"]), saving_us=float(payload["saving_us"]),
                   breakdown=breakdown, changes=frame(payload["changes"], ["id", "label", "model"]), raw=payload)


class Trace(Insights):
    """One span of one worker, loaded (``tb_plugin.open``); each view is a method returning a DataFrame (the GPU
    insights and the other analyses of the HTTP API: :class:`tb_plugin.sdk.insights.Insights`)."""

    def __init__(self, selection: Selection, model: TraceModel, cache_dir: str | None = None,
                 progress: Progress | None = None, peaks: PeakOverride = NO_OVERRIDE) -> None:
        self._selection = selection
        self.peaks = peaks  # the device peaks MFU and the roofline use (``tb_plugin.open(..., peaks=...)``)
        self.model = model  # the columnar model every analysis reads (numpy columns, read-only)
        self._cache_dir = cache_dir
        self._progress = progress
        self._peers: list[tuple[str, TraceModel]] | None = None

    def __repr__(self) -> str:
        return (f"<Trace {self.run}/{self.worker} span {self.span}: {self.file.filename}, "
                f"{self.model.n_events:,} events>")

    @property
    def file(self) -> TraceFile:
        return self._selection.file

    @property
    def run(self) -> str:
        return self.file.run

    @property
    def worker(self) -> str:
        return self.file.worker

    @property
    def span(self) -> str:
        return self.file.span

    @property
    def spans(self) -> list[str]:
        """This worker's spans in the run, in order (``span`` is one of them; pick another with ``span=``)."""
        return list(self._selection.spans) or [self.span]

    @property
    def workers(self) -> list[str]:
        """Every worker (rank) that recorded this span in this run; more than one for a distributed run."""
        return [f.worker for f in self._selection.peers]

    def summary(self) -> dict[str, Any]:
        """What the trace holds: duration, event counts per category, devices, versions, profiler settings."""
        return {"file": self.file.filename, "size_bytes": self.file.size, **summary_view(self.model)}

    def _job(self) -> tuple[dict[str, Any] | None, list[RankSummary] | None]:
        """The job picture and the rank summaries of a multi-rank span (None, None for one worker)."""
        ranks = self._ranks() if self._selection.workers > 1 else []
        if len(ranks) < 2:
            return None, None
        return distributed_view(ranks), [rank_summary(m, w) for w, m in ranks]

    def overview(self) -> Overview:
        """The Overview page (its environment counts the run's workers, as the page does); in a multi-rank run
        the diagnosis knows the job picture (straggler, waits), as the page's does."""
        job, summaries = self._job()
        return Overview.of(overview_view(self.model, job, self.worker, self._selection.workers, self.peaks,
                                         tuple(summaries or ())))

    def what_if(self, ids: list[str] | tuple[str, ...] | None = None) -> WhatIf:
        """The step time predicted with the fixes of the findings ``ids`` (as ``overview().findings`` lists them
        in ``id``; None: every finding with a fix) replayed together: the Overview's what-if panel. Raises
        ``ValueError`` naming the valid ids for one the trace does not have."""
        job, summaries = self._job()
        if ids is None:
            ids = [a["id"] for a in what_if_view(self.model, [], job, self.worker, summaries)["available"]]
        return WhatIf.of(what_if_view(self.model, list(ids), job, self.worker, summaries))

    def roofline(self, group_by: str = "kernel", limit: int = 100_000) -> pd.DataFrame:
        """The roofline (GPU view): one row per kernel (``group_by="operator"``: per operator) with its time, FLOPs,
        bytes, arithmetic intensity, achieved and attainable FLOP/s, roof class, bound and wasted time, ranked by
        wasted time. ``attrs`` holds the device, its roofs (peak FLOP/s per class, bandwidth), the totals and the
        kernels whose work is unknown."""
        _choose("group_by", group_by, ROOFLINE_GROUPINGS)
        view = roofline_view(self.model, group_by, self.peaks, limit)
        out = frame(view["points"], columns=None if view["points"] else ["name", "time_us", "flops", "bytes"])
        out.attrs.update({k: view[k] for k in ("device", "roofs", "totals", "unestimated", "total_points")})
        return out

    def idle(self, kernel_wait_us: float = KERNEL_WAIT_US) -> pd.DataFrame:
        """Idle time per GPU stream in the step window (the GPU view): busy and idle µs, idle split into host
        wait, kernel wait (gaps shorter than ``kernel_wait_us``) and other. Empty for a CPU-only run."""
        streams = idle_time(self.model, kernel_wait_us)["streams"]
        keep = ["device", "stream", "busy_us", "idle_us", "host_wait_us", "kernel_wait_us", "other_us", "events"]
        return frame([{k: s[k] for k in keep} for s in streams], columns=keep)

    def launch_stats(self) -> pd.DataFrame:
        """Kernel launch statistics per kernel name (the GPU view): launches, mean CPU launch and GPU durations,
        launch delay, kernels shorter than their launch. ``attrs["summary"]`` holds the whole window's figures
        (``launch_delay_p50_us``, ``launch_delay_p95_us``, ``short_kernels``, …)."""
        stats = launch_summary(self.model)
        out = frame(stats["by_name"])
        out.attrs["summary"] = dict(stats["summary"])  # a copy: the analysis keeps its own
        return out

    def operators(self, group_by: str = "name") -> pd.DataFrame:
        """The Operator view: one row per operator (``group_by`` also ``name_shape``, ``name_stack``)."""
        _choose("group_by", group_by, operator_analysis.GROUPINGS)
        return frame(operator_analysis.operator_table(self.model, group_by))

    def kernels(self, group_by: str = "name") -> pd.DataFrame:
        """The Kernel view: one row per kernel (``group_by="name_op"``: per kernel and launching operator)."""
        _choose("group_by", group_by, kernel_analysis.GROUPINGS)
        return frame(kernel_analysis.kernel_table(self.model, group_by))

    def memory_events(self, start_us: float | None = None, end_us: float | None = None,
                      device: str | None = None) -> pd.DataFrame:
        """Allocations paired with their frees (the Memory view's events table), optionally in a time range."""
        return frame(memory_events(self.model, start_us, end_us, device))

    def memory_stats(self, start_us: float | None = None, end_us: float | None = None) -> pd.DataFrame:
        """Per operator and device: allocation counts and sizes (the Memory view's statistics table)."""
        return frame(memory_statistics(self.model, start_us, end_us))

    def memory_curve(self, max_points: int = 4000) -> pd.DataFrame:
        """Allocated and reserved bytes over time per device (the Memory view's curve, downsampled alike)."""
        curve = memory_curve(self.model, max_points)
        rows = [(device, t, a, r) for device, d in curve["devices"].items() for t, a, r in d["points"]]
        return frame(rows, columns=["device", "time_us", "allocated_bytes", "reserved_bytes"])

    def memory_categories(self, device: str | None = None, export: str | os.PathLike[str] | None = None,
                          max_points: int = 2000) -> pd.DataFrame:
        """Bytes per category over time (the Memory view's "Memory by category"): ``time_us`` and one
        ``<category>_bytes`` column each, in torch's order. Inferred from the trace, or torch's own series when
        ``export`` names a ``prof.export_memory_timeline`` file (``.json[.gz]`` or ``.raw.json[.gz]``) of it.
        ``attrs["peak"]`` holds the peak (time, bytes by category, largest live allocations), as the view shows."""
        devices = allocations(self.model).devices
        if device is not None and device not in devices:
            raise ValueError(f"no memory records on device {device!r}; devices: {', '.join(devices) or 'none'}")
        data = None
        if export is not None:
            with open(export, "rb") as fh:
                kind = export_kind(fh.read(1 << 16)) or "timeline"
            data = load_export(os.fspath(export), kind)
        index = devices.index(device) if device is not None else (
            export_device(self.model, data) if data is not None else next(
                (i for i, d in enumerate(devices) if d != "CPU"), 0))
        view = category_view(self.model, index, data, data if data is not None and data.kind == MEMORY_RAW else None,
                             max_points)
        names = [f"{c}_bytes" for c in view["categories"]]
        result = frame([[t, *row] for t, row in zip(view["series"]["times_us"], view["series"]["bytes"])],
                       columns=["time_us", *names])
        result.attrs.update({"source": view["source"], "device": view["device"], "peak": view["peak"]})
        return result

    def modules(self) -> pd.DataFrame:
        """The Module view's tree, flattened in display order: ``path`` (names joined by ``/``) and ``depth``."""
        rows: list[dict[str, Any]] = []

        def walk(nodes: list[dict[str, Any]], prefix: str, depth: int) -> None:
            for node in nodes:
                path = f"{prefix}/{node['name']}" if prefix else node["name"]
                rows.append({"path": path, "depth": depth, **{k: v for k, v in node.items() if k != "children"}})
                walk(node["children"], path, depth + 1)

        walk(module_view(self.model)["modules"], "", 0)
        return frame(rows, columns=None if rows else ["path", "depth", "name"])

    def stacks(self, metric: str = "self_host_us", *, merge_by_function: bool = False, step: str | None = None,
               operator: str | None = None) -> pd.DataFrame:
        """The Flame graph's frames, one row per call path: ``stack`` (frames joined by ``;``, outermost first),
        ``frame``, ``kind`` (user, library, builtin, module, operator, annotation, runtime, device), ``depth``,
        ``value`` (with descendants) and ``self``. Nothing is pruned; ``metric`` is ``self_host_us``,
        ``self_device_us``, ``calls`` or ``alloc_bytes``."""
        tree = flame_tree(self.model, metric, merge_by_function, step, operator, 0.0)
        strings, kinds, f = tree["strings"], tree["kinds"], tree["frames"]
        paths: list[str] = []
        depth: list[int] = []
        for name, parent in zip(f["name"], f["parent"]):  # parents come first
            paths.append(f"{paths[parent]};{strings[name]}" if parent >= 0 else strings[name])
            depth.append(depth[parent] + 1 if parent >= 0 else 0)
        return frame({"stack": paths, "frame": [strings[n] for n in f["name"]], "kind": [kinds[n] for n in f["name"]],
                      "depth": depth, "value": f["value"], "self": f["self"]})

    def folded_stacks(self, metric: str = "self_host_us", *, merge_by_function: bool = False,
                      step: str | None = None, operator: str | None = None) -> str:
        """Folded stacks for ``flamegraph.pl`` or speedscope, as ``GET /flamegraph?format=folded`` answers them."""
        return folded_stacks(self.model, metric, merge_by_function, step, operator)

    def _ranks(self) -> list[tuple[str, TraceModel]]:
        """(worker, model) for every worker of this span, the others loaded on first use."""
        if self._peers is None:
            others = [f for f in self._selection.peers if f.key != self.file.key]
            models = load(others, self._cache_dir, self._progress)
            self._peers = [(self.worker, self.model), *((f.worker, m) for f, m in zip(others, models))]
        return self._peers

    def distributed_view(self, offset: int | None = None, limit: int | None = None, sort: str = "rank",
                         order: str = "asc", q: str = "") -> dict[str, Any]:
        """The Distributed view exactly as the HTTP API answers it for the same paging parameters and search ``q``
        (every worker of this span; a job of more than 256 ranks comes in pages of rank rows, see
        ``analysis.distributed_page``)."""
        return page_of(distributed_view(self._ranks()), offset, limit, sort, order, q=q)

    def distributed(self) -> pd.DataFrame:
        """One row per rank: computation, communication, overlap, other, transfer, sync and step time (average
        per step). ``attrs`` holds ``world_size``, ``backend``, ``straggler`` and ``notes``."""
        view = distributed_view(self._ranks())  # every rank, unpaged
        scalar = [{k: v for k, v in r.items() if k not in ("per_step", "collectives", "devices")}
                  for r in view["ranks"]]
        ranks = frame(scalar)
        ranks.attrs = {k: view[k] for k in ("world_size", "backend", "straggler", "notes")}
        return ranks

    def collectives(self) -> pd.DataFrame:
        """Per rank and collective: calls, sizes and times (the Distributed view's per-rank tables, stacked)."""
        rows = [{"rank": r["rank"], "worker": r["worker"], **c}
                for r in distributed_view(self._ranks())["ranks"] for c in r["collectives"]]
        return frame(rows, ["rank", "worker", *COLLECTIVE_TABLE_COLUMNS])  # the columns even without a collective


@dataclass(frozen=True)
class TraceDiff:
    """Baseline against experiment, as the Diff view shows it; ``metric()`` reads one number of each side."""

    # ratios are fractions, as everywhere in the API: delta_ratio 0.05 is +5 % (the CLI prints it as a percentage)
    breakdown: pd.DataFrame  # index: category and "step"; baseline_us, experiment_us, delta_us, delta_ratio
    operators: pd.DataFrame  # joined by name: baseline_/experiment_/delta_/delta_ratio_ per metric, status
    kernels: pd.DataFrame
    raw: dict[str, Any] = field(repr=False)
    models: tuple[TraceModel, TraceModel] | None = field(default=None, repr=False)  # (baseline, experiment)
    # why the per-step numbers compare nothing (a side without events or steps): empty when they compare
    problems: list[str] = field(default_factory=list)
    # what makes the comparison doubtful though it computes (two unrelated runs)
    warnings: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, payload: dict[str, Any], models: tuple[TraceModel, TraceModel] | None = None,
           problems: list[str] | None = None) -> TraceDiff:
        b = payload["breakdown"]
        rows = [(c, b["baseline"][c], b["experiment"][c]) for c in b["categories"]]
        rows.append(("step", b["step_baseline_us"], b["step_experiment_us"]))
        table = frame(rows, columns=["category", "baseline_us", "experiment_us"]).set_index("category")
        table["delta_us"] = table["experiment_us"] - table["baseline_us"]
        table["delta_ratio"] = table["delta_us"] / table["baseline_us"].where(table["baseline_us"] != 0)
        return cls(breakdown=table, operators=frame(payload["operators"]), kernels=frame(payload["kernels"]),
                   raw=payload, models=models, problems=list(problems or []))

    def drill(self, path: str = "0") -> pd.DataFrame:
        """The Diff view's drill-down (``GET /diff/node``): the entries below ``path`` ("0" all the steps, "0-3" its
        fourth entry…) aligned between the two runs, one row each: ``path``, ``name``, ``expandable`` and each
        side's ``*_host_us`` / ``*_device_us``. ``attrs``: the entry's own ``name``, ``baseline`` and
        ``experiment``. Raises ``tb_plugin.model.errors.UnknownPath`` (a ``LookupError``) for a path that is not
        there."""
        if self.models is None:
            raise ValueError("this diff was made without its traces: use tb_plugin.diff(base, new)")
        node = diff_node(self.models[0], self.models[1], path)
        rows = [{"path": c["path"], "name": c["name"], "expandable": c["expandable"], "matched": c["matched"],
                 **{f"{side}_{k}": (c[side] or {}).get(k) for side in ("baseline", "experiment")
                    for k in ("host_us", "device_us")}} for c in node["children"]]
        columns = ["path", "name", "expandable", "matched", "baseline_host_us", "baseline_device_us",
                   "experiment_host_us", "experiment_device_us"]
        out = frame(rows, columns)
        out.attrs.update(path=node["path"], name=node["name"], baseline=node["baseline"],
                         experiment=node["experiment"])
        return out

    def metric(self, name: str) -> tuple[float, float]:
        """(baseline, experiment) per step of ``step_time`` or a category's time (``kernel_time``,
        ``dataloader_time``, ``cpu_exec_time``…: :func:`metric_names`)."""
        category = metric_category(name)
        row = self.breakdown.loc[category]
        return float(row["baseline_us"]), float(row["experiment_us"])


def metric_names(categories: list[str]) -> dict[str, str]:
    """Gate metric name → breakdown row: ``step_time`` → ``step``, ``cpu_exec_time`` → ``CPU Exec``."""
    return {"step_time": "step", **{column(c).removesuffix("_us") + "_time": c for c in categories}}


def metric_category(name: str) -> str:
    from ..analysis.steps import CATEGORIES

    names = metric_names(list(CATEGORIES))
    _choose("metric", name, tuple(names))
    return names[name]


def _choose(what: str, value: str, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise ValueError(f"{what} must be one of {', '.join(choices)}; got {value!r}")


def open_trace(path: str | os.PathLike[str], *, run: str | None = None, worker: str | None = None,
               span: str | None = None, cache_dir: str | None = None, progress: Progress | None = None,
               peaks: str | PeakOverride | None = None) -> Trace:
    """Open a trace file, a run directory or a logdir (local path or fsspec URL). ``peaks`` replaces the device
    peak table's figures for MFU and the roofline: ``"device=H100-SXM"``, ``"bf16=700,fp32=55,bw=3000"``
    (TFLOP/s, GB/s); a ValueError says what is wrong with it."""
    override = peaks if isinstance(peaks, PeakOverride) else parse_override(peaks)
    selection = select(os.fspath(path), run, worker, span)
    [model] = load([selection.file], cache_dir, progress)
    return Trace(selection, model, cache_dir, progress, override)


def diff_traces(base: Trace | str | os.PathLike[str], new: Trace | str | os.PathLike[str], *,
                cache_dir: str | None = None, progress: Progress | None = None) -> TraceDiff:
    """What changed from ``base`` to ``new`` (each a :class:`Trace` or a path :func:`open_trace` takes)."""
    a = base if isinstance(base, Trace) else open_trace(base, cache_dir=cache_dir, progress=progress)
    b = new if isinstance(new, Trace) else open_trace(new, cache_dir=cache_dir, progress=progress)
    d = TraceDiff.of(diff_summary(a.model, b.model), (a.model, b.model),
                     [*step_problems(a, "BASE"), *step_problems(b, "NEW")])
    if d.problems:  # nothing to compare: no doubt to add
        return d
    d.warnings.extend(unrelated(d))
    devices = [_devices(t.model) for t in (a, b)]
    if all(devices) and devices[0] != devices[1]:
        d.warnings.append(f"BASE ran on {', '.join(devices[0])} and NEW on {', '.join(devices[1])}: the times "
                          "compare hardware as much as code")
    return d


def step_problems(trace: Trace, side: str) -> list[str]:
    """Why ``trace`` has no per-step numbers to compare (``side``: how the message names it); empty when it has.

    A trace without ``ProfilerStep#N`` events is shown as one step covering the whole trace, which is no step
    time to gate on (it includes the profiler's warm-up and whatever ran around the steps)."""
    name = f"{side} ({trace.file.filename})"
    if trace.model.n_events == 0:
        return [f"{name} holds no events"]
    if not any(step_number(text) is not None for text in trace.model.strings):
        return [f"{name} has no ProfilerStep#N events, so no steps to compare (call prof.step() once per "
                "iteration under a profiler schedule)"]
    durations = find_steps(trace.model).duration
    if not (np.isfinite(durations) & (durations > 0)).any():
        return [f"{name} has no step with a duration"]
    return []


UNRELATED_SHARE = 0.5  # below this share of either side's operator time in operators both have: two different runs


def unrelated(d: TraceDiff) -> list[str]:
    """A warning when the two runs look unrelated: little of either side's host time is in operators the other
    side has (0.94 and 1.00 for the same model with other loader settings; 0.08 for a ResNet against a
    Transformer)."""
    ops = d.operators
    if ops.empty:
        return []
    shares = []
    for side in ("baseline", "experiment"):
        times = ops[f"{side}_host_self_us"].fillna(0.0)
        total = float(times.sum())
        shares.append(float(times[ops["status"] == "both"].sum()) / total if total > 0 else 1.0)
    if min(shares) >= UNRELATED_SHARE:
        return []
    return [f"BASE and NEW look unrelated: only {shares[0]:.0%} of BASE's operator time and {shares[1]:.0%} of "
            "NEW's is in operators both have (is this the comparison you meant?)"]


def _devices(model: TraceModel) -> list[str]:
    """The GPU names of a trace (sorted, once each): what hardware it ran on."""
    props = model.meta.get("deviceProperties")
    if not isinstance(props, list):
        return []
    return sorted({str(p.get("name")) for p in props if isinstance(p, dict) and p.get("name")})
