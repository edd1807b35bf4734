"""The route table: each handler validates its parameters, asks the workspace, calls an analysis, encodes."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

from werkzeug.utils import send_file
from werkzeug.wrappers import Request, Response

from ..analysis import kernels, operators
from ..analysis.annotations import annotation_times
from ..analysis.bandwidth import memory_bandwidth
from ..analysis.critical_path import critical_path
from ..analysis.cupti_counters import cupti_counters
from ..analysis.device_peaks import NO_OVERRIDE, PeakOverride
from ..analysis.diff import diff_node, diff_summary, step_index
from ..analysis.distributed import job_distributed_lazy
from ..analysis.distributed_page import page_of
from ..analysis.flamegraph import METRICS, flame_search, flame_tree, folded_stacks
from ..analysis.idle import KERNEL_WAIT_US, idle_time
from ..analysis.launches import launch_stats
from ..analysis.memory import events_page, live_at, memory_curve, memory_events, memory_statistics
from ..analysis.memory_categories import allocations
from ..analysis.memory_category_view import card_exports, category_view
from ..analysis.modules import TIMELINE_LIMIT, module_timeline_view, module_view
from ..analysis.overview import overview
from ..analysis.queues import queue_length
from ..analysis.roofline import GROUPINGS as ROOFLINE_GROUPINGS
from ..analysis.roofline import roofline
from ..analysis.sequences import kernel_sequences
from ..analysis.sources import source_files
from ..analysis.steps import CATEGORIES
from ..analysis.summary import summary
from ..analysis.whatif.what_if import what_if
from ..model.errors import NotFound, UnknownStep
from ..model.tables import TraceModel
from ..timeline.details import SEARCH_MATCHES, event_details, range_summary, search
from ..timeline.index import timeline_index
from ..timeline.window import window
from ..workspace import ExportEntry, LoadedTrace, LookupFailed, Workspace, job_of, job_result
from . import params, warm
from .answers import answer, derived, job_answer
from .capture import CaptureRoutes
from .http import ApiError, encoded_response, json_response, json_route, secure, text_response
from .snapshot_routes import SnapshotApi
from .static import relative_path, serve

_CONTROL = dict.fromkeys(range(32), "_") | {127: "_"}
MAX_RUNS_PAGE = 1000  # runs one page of /runs may hold


def _download_name(filename: str) -> str:
    """The name a download is saved under: the file's, with control characters (a newline) as ``_``, which no
    header value may hold."""
    return filename.translate(_CONTROL)


class Api:
    """Handlers bound to one workspace."""

    def __init__(self, workspace: Workspace, plugin_name: str, peaks: PeakOverride = NO_OVERRIDE,
                 capture: bool = False) -> None:
        self.workspace = workspace
        self.plugin_name = plugin_name
        self.peaks = peaks  # --profiler_peaks: the device peaks MFU and the roofline use, unless a request says
        self.capture = CaptureRoutes(workspace, capture)  # --profiler_capture: the page may write capture requests
        self.snapshot = SnapshotApi(workspace)

    def _trace(self, request: Request) -> LoadedTrace:
        return self.workspace.trace(*params.span_key(request))

    def _answer(self, request: Request, loaded: LoadedTrace, compute: Callable[[], Any], *more: Hashable,
                stored: str | None = None) -> Response:
        """The answer to this request on this trace, computed and encoded once (see :mod:`.answers`); ``more``
        is what else it depends on (the experiment trace of a diff); ``stored``, the answer's key among those the
        loader process may have stored (``warm.key`` of the route and its validated parameters)."""
        key = (request.path, tuple(sorted(request.args.items(multi=True))), *more)
        analysis = request.path.rsplit(f"/{self.plugin_name}/", 1)[-1].lstrip("/")  # "operators", "diff/node"
        return encoded_response(request, answer(loaded.model, key, compute, analysis, stored))

    def _counted(self, route: str, analysis: Callable[[TraceModel, int], Any], name: str, default: int,
                 minimum: int, maximum: int) -> Callable[[Request], Response]:
        """The handler of ``route``, which takes one whole-number parameter (a limit, a number of points) and
        answers ``analysis(model, value)``."""
        def handler(request: Request) -> Response:
            value = params.integer(request, name, required=False, default=default, minimum=minimum, maximum=maximum)
            loaded = self._trace(request)
            return self._answer(request, loaded, lambda: analysis(loaded.model, value),
                                stored=warm.key(route, **{name: value}))

        return handler

    def runs(self, request: Request) -> Response:
        """Every run, or with ``limit`` a page of them (a logdir of thousands of runs: see ``Workspace.runs_page``)."""
        ws = self.workspace
        common = {"logdir": ws.logdir_display, "scanning": ws.scanning(), "errors": ws.errors()}
        if request.args.get("limit") is None:
            return json_response(request, {"runs": ws.listing(), **common})
        page = ws.runs_page(params.integer(request, "limit", minimum=0, maximum=MAX_RUNS_PAGE),
                            params.integer(request, "offset", required=False, default=0, minimum=0),
                            params.text(request, "q", required=False, default=""),
                            params.text(request, "run", required=False) or None)
        return json_response(request, {**page, **common})

    def views(self, request: Request) -> Response:
        return json_response(request, {"views": self.workspace.views_of_run(params.text(request, "run"))})

    def summary(self, request: Request) -> Response:
        loaded = self._trace(request)
        return self._answer(request, loaded, lambda: {"file": loaded.file.filename, "size_bytes": loaded.file.size,
                                                      **summary(loaded.model)},
                            stored=warm.key("summary", file=loaded.file.filename, size=loaded.file.size))

    def sources(self, request: Request) -> Response:
        loaded = self._trace(request)
        return self._answer(request, loaded, lambda: source_files(loaded.model), stored=warm.key("sources"))

    def _ranks(self, loaded: LoadedTrace) -> tuple[int, list[tuple[Any, Any]]]:
        """The run's number of workers, and the (file, summary) of the span's loaded ranks on a multi-rank run."""
        run = self.workspace.listing_of(loaded.file.run)
        workers = len(run["workers"]) if run else 1
        ranks = self.workspace.span_summaries(loaded.file.run, loaded.file.span) if workers > 1 else []
        return workers, ranks

    def overview(self, request: Request) -> Response:
        peaks = params.peaks(request, self.peaks)
        loaded = self._trace(request)
        workers, ranks = self._ranks(loaded)

        def compute() -> dict[str, Any]:
            job = self._job(ranks) if len(ranks) > 1 else None
            return overview(loaded.model, job, loaded.file.worker, workers, peaks, tuple(s for _, s in ranks))

        # the job picture depends on the other ranks' traces: their identities are part of the answer's key (the
        # loader stores the Overview of a single-worker run)
        stored = warm.key("overview", worker=loaded.file.worker, workers=workers, peaks=peaks, ranks=[])
        return self._answer(request, loaded, compute, workers, tuple(sorted(f.identity for f, _ in ranks)),
                            stored=None if ranks else stored)

    def what_if(self, request: Request) -> Response:
        ids = params.id_list(request, "changes")
        loaded = self._trace(request)
        _, ranks = self._ranks(loaded)

        def compute() -> dict[str, Any]:
            job = self._job(ranks) if len(ranks) > 1 else None
            return what_if(loaded.model, ids, job, loaded.file.worker, [s for _, s in ranks] if job else None)

        return self._answer(request, loaded, compute, tuple(sorted(f.identity for f, _ in ranks)))

    @staticmethod
    def _job(ranks: list[tuple[Any, Any]]) -> dict[str, Any]:
        """The job-level Distributed answer over these (file, summary) ranks, computed once per set of files (when
        the span's last rank turned ready: ``Workspace.job_of``)."""
        return job_of(ranks)

    def operators(self, request: Request) -> Response:
        group_by = params.text(request, "group_by", required=False, default="name", choices=operators.GROUPINGS)
        name = params.text(request, "name", required=False)
        loaded = self._trace(request)
        return self._answer(request, loaded, lambda: operators.operator_view(loaded.model, group_by, name),
                            stored=warm.key("operators", group_by=group_by, name=name))

    def kernels(self, request: Request) -> Response:
        group_by = params.text(request, "group_by", required=False, default="name", choices=kernels.GROUPINGS)
        loaded = self._trace(request)
        return self._answer(request, loaded, lambda: kernels.kernel_view(loaded.model, group_by),
                            stored=warm.key("kernels", group_by=group_by))

    def roofline(self, request: Request) -> Response:
        group_by = params.text(request, "group_by", required=False, default="kernel", choices=ROOFLINE_GROUPINGS)
        limit = params.integer(request, "limit", required=False, default=warm.LIMIT, minimum=1, maximum=100_000)
        peaks = params.peaks(request, self.peaks)
        loaded = self._trace(request)
        return self._answer(request, loaded, lambda: roofline(loaded.model, group_by, peaks, limit),
                            stored=warm.key("roofline", group_by=group_by, peaks=peaks, limit=limit))

    def memory_events(self, request: Request) -> Response:
        """Every pair of a range (or live at ``at_us``), or with the paging parameters one page of the events
        table, filtered and sorted on the server."""
        lo, hi = params.time_range(request)
        device = params.text(request, "device", required=False) or None
        # at_us (allocations live at that instant) takes precedence over a range
        at = params.number(request, "at_us") if request.args.get("at_us", "") != "" else None
        page = params.events_page(request)
        loaded = self._trace(request)
        if page is not None:
            return self._answer(request, loaded, lambda: events_page(loaded.model, page, lo, hi, device, at))
        if at is not None:
            return self._answer(request, loaded, lambda: live_at(loaded.model, at, device))
        return self._answer(request, loaded, lambda: {"rows": memory_events(loaded.model, lo, hi, device)})

    def memory_stats(self, request: Request) -> Response:
        lo, hi = params.time_range(request)
        loaded = self._trace(request)
        return self._answer(request, loaded, lambda: {"rows": memory_statistics(loaded.model, lo, hi)})

    def memory_categories(self, request: Request) -> Response:
        device = params.text(request, "device", required=False) or None
        max_points = params.integer(request, "max_points", required=False, default=2000, minimum=16, maximum=100_000)
        loaded = self._trace(request)
        mine, broken = self.workspace.exports_of(loaded)
        devices = allocations(loaded.model).devices
        if device is not None and device not in devices:
            raise ApiError(404, f"no memory records on device {device!r}; devices: {', '.join(devices) or 'none'}")
        keys = tuple(sorted(e.file.identity for e in mine + broken))
        return self._answer(request, loaded, lambda: self._memory_categories(loaded, mine, broken, device,
                                                                             max_points), keys)

    @staticmethod
    def _memory_categories(loaded: LoadedTrace, mine: list[ExportEntry], broken: list[ExportEntry],
                           device: str | None, max_points: int) -> dict[str, Any]:
        usable = sorted(((e, e.export) for e in mine if e.export is not None), key=lambda pair: pair[0].file.url)
        index, at_series, at_raw = card_exports(loaded.model, [export for _, export in usable], device)
        series = usable[at_series][0] if at_series is not None else None
        raw = usable[at_raw][0] if at_raw is not None else None
        payload = category_view(loaded.model, index, series.export if series else None, raw.export if raw else None,
                                max_points)
        payload.update({
            "devices": allocations(loaded.model).devices, "trace_file": loaded.file.filename,
            "export": None if series is None else {"file": series.file.filename, "folder": series.file.folder,
                                                   "kind": series.file.kind,
                                                   "raw_file": raw.file.filename if raw else None},
            "export_errors": [{"file": e.file.filename, "error": e.error} for e in broken],
        })
        return payload

    def modules(self, request: Request) -> Response:
        loaded = self._trace(request)
        return self._answer(request, loaded, lambda: module_view(loaded.model), stored=warm.key("modules"))

    def distributed(self, request: Request) -> Response:
        run = params.text(request, "run")
        span = self.workspace.span_label(run, params.text(request, "span"))
        spanned = self.workspace.span_ranks(run, span)
        ranks, failed = spanned.ranks, spanned.failed
        page = params.distributed_page(request)
        offset, limit, sort, order, q = page

        def compute() -> dict[str, Any]:
            # the per-collective tables of the page's rows only (half the job's time at 1,024 ranks)
            key = ("job_lazy", tuple(sorted((f.key, f.identity) for f, _ in ranks)))
            job, tables = job_result(key, lambda: job_distributed_lazy([s for _, s in ranks]))
            payload = page_of(job, offset, limit, sort, order, tables, q=q)
            if failed:
                payload["notes"] = [*payload["notes"],
                                    f"Left out because their traces failed to load: {', '.join(failed)}."]
            return payload

        key = (request.path, run, span, page, tuple(sorted(f.identity for f, _ in ranks)), tuple(failed))
        return encoded_response(request, job_answer(key, compute))

    def _pair(self, request: Request) -> tuple[LoadedTrace, LoadedTrace]:
        base = self._trace(request)
        exp_run, exp_worker, exp_span = (params.text(request, name) for name in ("exp_run", "exp_worker", "exp_span"))
        try:
            exp = self.workspace.trace(exp_run, exp_worker, exp_span)
        except LookupFailed as err:  # the same answer, said to be about the experiment side
            raise LookupFailed(err.status, f"experiment: {err}") from None
        return base, exp

    def _pair_steps(self, request: Request, base: LoadedTrace, exp: LoadedTrace) -> tuple[str | None, str | None]:
        """``step`` / ``exp_step``: one step of each side (either alone names the same step on both sides); a step
        the trace does not have is not found (404), with the steps it has."""
        step = params.text(request, "step", required=False) or None
        exp_step = params.text(request, "exp_step", required=False) or None
        step, exp_step = step or exp_step, exp_step or step
        for name, value, side in (("step", step, base), ("exp_step", exp_step, exp)):
            try:
                step_index(side.model, value)
            except UnknownStep as err:  # which parameter named it, for the user who set both
                raise NotFound(f"query parameter '{name}': {err}") from None
        return step, exp_step

    def diff(self, request: Request) -> Response:
        base, exp = self._pair(request)
        step, exp_step = self._pair_steps(request, base, exp)
        return self._answer(request, base, lambda: diff_summary(base.model, exp.model, step, exp_step),
                            exp.file.identity)

    def diff_node(self, request: Request) -> Response:
        path = params.text(request, "path", required=False, default="0")
        base, exp = self._pair(request)
        step, exp_step = self._pair_steps(request, base, exp)
        return self._answer(request, base, lambda: diff_node(base.model, exp.model, path, step, exp_step),
                            exp.file.identity)

    def idle(self, request: Request) -> Response:
        wait = params.number(request, "kernel_wait_us", required=False, default=KERNEL_WAIT_US, minimum=0,
                             maximum=1e6)
        loaded = self._trace(request)
        return self._answer(request, loaded, lambda: idle_time(loaded.model, wait),
                            stored=warm.key("idle", kernel_wait_us=wait))

    def kernel_sequences(self, request: Request) -> Response:
        length = params.integer(request, "length", required=False, default=warm.SEQUENCE_LENGTH, minimum=2, maximum=16)
        top = params.integer(request, "top", required=False, default=warm.SEQUENCE_TOP, minimum=1, maximum=200)
        loaded = self._trace(request)
        return self._answer(request, loaded, lambda: kernel_sequences(loaded.model, length, top),
                            stored=warm.key("kernel_sequences", length=length, top=top))

    def critical_path(self, request: Request) -> Response:
        step = params.text(request, "step", required=False) or None
        annotation = params.text(request, "annotation", required=False) or None
        occurrence = params.integer(request, "occurrence", required=False, default=1, minimum=1, maximum=10**9)
        start, end = params.time_range(request)
        window = (start, end) if start is not None or end is not None else None
        loaded = self._trace(request)
        return self._answer(request, loaded, lambda: critical_path(loaded.model, step, annotation, occurrence, window))

    def flamegraph(self, request: Request) -> Response:
        metric = params.text(request, "metric", required=False, default="self_host_us", choices=METRICS)
        fmt = params.text(request, "format", required=False, default="json", choices=("json", "folded"))
        merge = params.text(request, "merge", required=False, default="line", choices=("line", "function"))
        step = params.text(request, "step", required=False) or None
        operator = params.text(request, "operator", required=False) or None
        min_share = params.number(request, "min_share", required=False, default=0.0005, minimum=0, maximum=0.1)
        loaded = self._trace(request)
        by_function = merge == "function"
        if fmt == "folded":
            return text_response(request, folded_stacks(loaded.model, metric, by_function, step, operator))
        return self._answer(request, loaded, lambda: flame_tree(loaded.model, metric, by_function, step, operator,
                                                                min_share))

    def flamegraph_search(self, request: Request) -> Response:
        metric = params.text(request, "metric", required=False, default="self_host_us", choices=METRICS)
        merge = params.text(request, "merge", required=False, default="line", choices=("line", "function"))
        step = params.text(request, "step", required=False) or None
        operator = params.text(request, "operator", required=False) or None
        query = params.text(request, "q")
        min_share = params.number(request, "min_share", required=False, default=0.0005, minimum=0, maximum=0.1)
        loaded = self._trace(request)
        return self._answer(request, loaded, lambda: flame_search(loaded.model, metric, merge == "function", step,
                                                                  operator, query, min_share))

    def annotations(self, request: Request) -> Response:
        loaded = self._trace(request)
        return self._answer(request, loaded, lambda: annotation_times(loaded.model))

    def trace_window(self, request: Request) -> Response:
        loaded = self._trace(request)
        index = derived(loaded.model, "the timeline index", timeline_index)
        # the whole trace by default, at least 1 µs of it: an empty trace or a lone instant is an empty window
        start, end = params.time_range(request, index.t_min, max(index.t_max, index.t_min + 1.0))
        assert start is not None and end is not None
        width = params.integer(request, "width_px", required=False, default=1000, minimum=1, maximum=8192)
        collapsed = params.int_list(request, "collapsed")
        levels = params.int_pairs(request, "levels")
        host = params.integer(request, "host_levels", required=False, default=0, minimum=0, maximum=4096) or None
        category = params.text(request, "category", required=False, choices=CATEGORIES) or None
        skips = params.int_pairs(request, "skip")
        return self._answer(request, loaded, lambda: window(loaded.model, start, end, width, frozenset(collapsed),
                                                             levels, host, category, skips))

    def trace_event(self, request: Request) -> Response:
        loaded = self._trace(request)
        row = params.integer(request, "id", minimum=0)
        if row >= loaded.model.n_events:
            raise ApiError(404, f"no event with id {row} in this trace")
        return self._answer(request, loaded, lambda: event_details(loaded.model, row))

    def trace_search(self, request: Request) -> Response:
        loaded = self._trace(request)
        query = params.text(request, "q")
        offset = params.integer(request, "offset", required=False, default=0, minimum=0)
        limit = params.integer(request, "limit", required=False, default=100, minimum=1, maximum=1000)
        exact = params.text(request, "match", required=False, default="substring", choices=SEARCH_MATCHES) == "exact"
        return self._answer(request, loaded, lambda: search(loaded.model, query, offset, limit, exact))

    def trace_range(self, request: Request) -> Response:
        loaded = self._trace(request)
        start, end = params.time_range(request, required=True)
        assert start is not None and end is not None
        tracks = params.int_list(request, "tracks")
        selected = frozenset(tracks) if tracks else None
        return self._answer(request, loaded, lambda: range_summary(loaded.model, start, end, selected))

    def trace_file(self, request: Request) -> Response:
        # only a span that loaded as a trace: a file that failed may be anything a link points to (/etc/passwd)
        trace_file = self._trace(request).file
        run, worker, span = trace_file.key
        try:
            stream = self.workspace.open_file(trace_file)
        except OSError as err:
            raise ApiError(404, f"cannot read {run}/{worker}/{span}: {err.strerror or err}") from None
        gz = trace_file.filename.endswith(".gz")
        # send_file writes Content-Disposition per RFC 6266: quoted, and filename*=UTF-8''... beside an ASCII
        # fallback for names a header cannot hold as they are
        response = send_file(stream, request.environ, mimetype="application/gzip" if gz else "application/json",
                             as_attachment=True, download_name=_download_name(trace_file.filename),
                             conditional=False, etag=False)
        if trace_file.size:
            response.content_length = trace_file.size
        return secure(response)

    def static(self, request: Request) -> Response:
        return serve(request, relative_path(request, self.plugin_name))

    def apps(self) -> dict[str, Callable[[Any, Any], Any]]:
        return {
            "/index.js": json_route(self.static),
            "/static/*": json_route(self.static),
            "/*": json_route(self.static),
            "/runs": json_route(self.runs),
            "/views": json_route(self.views),
            "/summary": json_route(self.summary),
            "/sources": json_route(self.sources),
            "/overview": json_route(self.overview),
            "/what_if": json_route(self.what_if),
            "/operators": json_route(self.operators),
            "/kernels": json_route(self.kernels),
            "/roofline": json_route(self.roofline),
            "/memory/curve": json_route(self._counted("memory/curve", memory_curve, "max_points", 4000, 16, 100_000)),
            "/memory/events": json_route(self.memory_events),
            "/memory/stats": json_route(self.memory_stats),
            "/memory_categories": json_route(self.memory_categories),
            "/modules": json_route(self.modules),
            "/modules/timeline": json_route(self._counted("modules/timeline", module_timeline_view, "limit",
                                                          TIMELINE_LIMIT, 1, 200_000)),
            "/distributed": json_route(self.distributed),
            "/diff": json_route(self.diff),
            "/diff/node": json_route(self.diff_node),
            "/idle": json_route(self.idle),
            "/launch_stats": json_route(self._counted("launch_stats", launch_stats, "limit", warm.LIMIT, 1, 100_000)),
            "/cupti_counters": json_route(self._counted("cupti_counters", cupti_counters, "limit", warm.LIMIT, 1,
                                                        100_000)),
            "/queue_length": json_route(self._counted("queue_length", queue_length, "max_points", warm.MAX_POINTS, 16,
                                                      10_000)),
            "/memory_bandwidth": json_route(self._counted("memory_bandwidth", memory_bandwidth, "max_points",
                                                          warm.MAX_POINTS, 16, 10_000)),
            "/kernel_sequences": json_route(self.kernel_sequences),
            "/critical_path": json_route(self.critical_path),
            "/annotations": json_route(self.annotations),
            "/flamegraph": json_route(self.flamegraph),
            "/flamegraph/search": json_route(self.flamegraph_search),
            "/trace/window": json_route(self.trace_window),
            "/trace/event": json_route(self.trace_event),
            "/trace/search": json_route(self.trace_search),
            "/trace/file": json_route(self.trace_file),
            "/trace/range": json_route(self.trace_range),
            "/capture": json_route(self.capture.capture),
            "/capture/status": json_route(self.capture.status),
            **{route: json_route(handler) for route, handler in self.snapshot.routes().items()},
        }
