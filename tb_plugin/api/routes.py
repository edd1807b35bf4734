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
from ..analysis.diff import diff_node, diff_summary
from ..analysis.distributed import job_distributed
from ..analysis.idle import KERNEL_WAIT_US, idle_time
from ..analysis.launches import launch_stats
from ..analysis.memory import memory_curve, memory_events, memory_statistics
from ..analysis.modules import module_timeline, module_view
from ..analysis.overview import overview
from ..analysis.queues import queue_length
from ..analysis.sequences import kernel_sequences
from ..analysis.summary import summary
from ..timeline.details import event_details, range_summary, search
from ..timeline.index import timeline_index
from ..timeline.window import window
from ..workspace import LoadedTrace, LookupFailed, Workspace
from . import params
from .answers import answer, job_answer, job_result
from .http import ApiError, encoded_response, json_response, json_route, secure
from .static import relative_path, serve

_CONTROL = dict.fromkeys(range(32), "_") | {127: "_"}


def _download_name(filename: str) -> str:
    """The name a download is saved under: the file's, with control characters (a newline) as ``_``, which no
    header value may hold."""
    return filename.translate(_CONTROL)


def kernels_device_sum(model: Any) -> float:
    return operators.device_time_totals(model)[0]


def kernels_device_busy(model: Any) -> float:
    return operators.device_time_totals(model)[1]


class Api:
    """Handlers bound to one workspace."""

    def __init__(self, workspace: Workspace, plugin_name: str) -> None:
        self.workspace = workspace
        self.plugin_name = plugin_name

    def _trace(self, request: Request) -> Any:
        run, worker, span = params.span_key(request)
        try:
            return self.workspace.trace(run, worker, span)
        except LookupFailed as err:
            raise ApiError(err.status, str(err)) from None

    def _answer(self, request: Request, loaded: LoadedTrace, compute: Callable[[], Any], *more: Hashable) -> Response:
        """The answer to this request on this trace, computed and encoded once (see :mod:`.answers`); ``more``
        is what else it depends on (the experiment trace of a diff)."""
        key = (request.path, tuple(sorted(request.args.items(multi=True))), *more)
        return encoded_response(request, answer(loaded.model, key, compute))

    def runs(self, request: Request) -> Response:
        ws = self.workspace
        return json_response(request, {
            "runs": ws.listing(),
            "logdir": ws.logdir_display,
            "scanning": ws.scanning(),
            "errors": ws.errors(),
        })

    def views(self, request: Request) -> Response:
        run = params.text(request, "run")
        try:
            views = self.workspace.views_of_run(run)
        except LookupFailed as err:
            raise ApiError(err.status, str(err)) from None
        return json_response(request, {"views": views})

    def summary(self, request: Request) -> Response:
        loaded = self._trace(request)
        return self._answer(request, loaded, lambda: {"file": loaded.file.filename, "size_bytes": loaded.file.size,
                                                      **summary(loaded.model)})

    def overview(self, request: Request) -> Response:
        loaded = self._trace(request)
        run = self.workspace.listing_of(loaded.file.run)
        workers = len(run["workers"]) if run else 1
        ranks = self.workspace.span_summaries(loaded.file.run, loaded.file.span) if workers > 1 else []

        def compute() -> dict[str, Any]:
            job = self._job(ranks) if len(ranks) > 1 else None
            payload = dict(overview(loaded.model, job, loaded.file.worker))
            payload["environment"] = {**payload["environment"], "workers": workers}
            return payload

        # the job picture depends on the other ranks' traces: their identities are part of the answer's key
        return self._answer(request, loaded, compute, workers, tuple(sorted(f.identity for f, _ in ranks)))

    @staticmethod
    def _job(ranks: list[tuple[Any, Any]]) -> dict[str, Any]:
        """The job-level Distributed answer over these (file, summary) ranks, computed once per set of files."""
        key = ("job", tuple(sorted((f.key, f.identity) for f, _ in ranks)))
        result: dict[str, Any] = job_result(key, lambda: job_distributed([s for _, s in ranks]))
        return result

    def operators(self, request: Request) -> Response:
        group_by = params.text(request, "group_by", required=False, default="name", choices=operators.GROUPINGS)
        name = params.text(request, "name", required=False)
        loaded = self._trace(request)
        return self._answer(request, loaded, lambda: self._operators(loaded.model, group_by, name))

    @staticmethod
    def _operators(model: Any, group_by: str, name: str) -> dict[str, Any]:
        rows = operators.operator_table(model, group_by)
        if name:
            rows = [r for r in rows if r["name"] == name]
        return {
            "group_by": group_by,
            "device_time": "sum",
            "rows": rows,
            "totals": {
                "device_sum_us": kernels_device_sum(model),
                "device_busy_us": kernels_device_busy(model),
            },
            "has_call_stacks": bool((model["ops"]["call_stack"] >= 0).any() or len(model["python"]["row"])),
            "has_input_shapes": bool((model["ops"]["input_dims"] >= 0).any()),
        }

    def kernels(self, request: Request) -> Response:
        group_by = params.text(request, "group_by", required=False, default="name", choices=kernels.GROUPINGS)
        loaded = self._trace(request)

        def compute() -> dict[str, Any]:
            rows = kernels.kernel_table(loaded.model, group_by)
            return {"group_by": group_by, "rows": rows, "total_us": float(sum(r["total_us"] for r in rows)),
                    "tensor_core_ratio": kernels.tensor_core_share(loaded.model)}

        return self._answer(request, loaded, compute)

    def memory_curve(self, request: Request) -> Response:
        max_points = int(params.number(request, "max_points", required=False, default=4000, minimum=16,
                                       maximum=100_000))
        loaded = self._trace(request)
        return self._answer(request, loaded, lambda: memory_curve(loaded.model, max_points))

    def memory_events(self, request: Request) -> Response:
        lo, hi = params.time_range(request)
        device = params.text(request, "device", required=False) or None
        loaded = self._trace(request)
        return self._answer(request, loaded, lambda: {"rows": memory_events(loaded.model, lo, hi, device)})

    def memory_stats(self, request: Request) -> Response:
        lo, hi = params.time_range(request)
        loaded = self._trace(request)
        return self._answer(request, loaded, lambda: {"rows": memory_statistics(loaded.model, lo, hi)})

    def modules(self, request: Request) -> Response:
        loaded = self._trace(request)
        return self._answer(request, loaded, lambda: module_view(loaded.model))

    def modules_timeline(self, request: Request) -> Response:
        limit = int(params.number(request, "limit", required=False, default=20000, minimum=1, maximum=200_000))
        loaded = self._trace(request)

        def compute() -> dict[str, Any]:
            occurrences = module_timeline(loaded.model, limit + 1)
            return {"occurrences": occurrences[:limit], "truncated": len(occurrences) > limit}

        return self._answer(request, loaded, compute)

    def distributed(self, request: Request) -> Response:
        run = params.text(request, "run")
        span = params.text(request, "span")
        listing = self.workspace.listing_of(run)
        if listing is None:
            raise ApiError(404, f"unknown run {run!r}")
        ranks = self.workspace.span_summaries(run, span)
        states = [(w["name"], sp["state"]) for w in (listing or {}).get("workers", []) for sp in w["spans"]
                  if sp["span"] == span]
        if not states:
            raise ApiError(404, f"run {run!r} has no span {span!r}")
        loading = [w for w, state in states if state in ("queued", "loading")]
        if loading:
            raise ApiError(409, f"{len(loading)} of the {len(states)} workers of span {span} are still loading")
        if not ranks:
            raise ApiError(422, f"no worker of span {span} could be loaded")
        failed = sorted(w for w, state in states if state == "failed")

        def compute() -> dict[str, Any]:
            payload = dict(self._job(ranks))
            if failed:
                payload["notes"] = [*payload["notes"],
                                    f"Left out because their traces failed to load: {', '.join(failed)}."]
            return payload

        key = (request.path, run, span, tuple(sorted(f.identity for f, _ in ranks)), tuple(failed))
        return encoded_response(request, job_answer(key, compute))

    def _pair(self, request: Request) -> tuple[Any, Any]:
        base = self._trace(request)
        exp_key = tuple(params.text(request, name) for name in ("exp_run", "exp_worker", "exp_span"))
        try:
            exp = self.workspace.trace(exp_key[0], exp_key[1], exp_key[2])
        except LookupFailed as err:
            raise ApiError(err.status, f"experiment: {err}") from None
        return base, exp

    def diff(self, request: Request) -> Response:
        base, exp = self._pair(request)
        return self._answer(request, base, lambda: diff_summary(base.model, exp.model), exp.file.identity)

    def diff_node(self, request: Request) -> Response:
        path = params.text(request, "path", required=False, default="0")
        base, exp = self._pair(request)
        try:
            return self._answer(request, base, lambda: diff_node(base.model, exp.model, path), exp.file.identity)
        except KeyError:
            raise ApiError(404, f"no diff entry at path {path!r}") from None

    def idle(self, request: Request) -> Response:
        wait = params.number(request, "kernel_wait_us", required=False, default=KERNEL_WAIT_US, minimum=0,
                             maximum=1e6)
        loaded = self._trace(request)
        return self._answer(request, loaded, lambda: idle_time(loaded.model, wait))

    def launch_stats(self, request: Request) -> Response:
        limit = int(params.number(request, "limit", required=False, default=500, minimum=1, maximum=100_000))
        loaded = self._trace(request)
        return self._answer(request, loaded, lambda: launch_stats(loaded.model, limit))

    def queue_length(self, request: Request) -> Response:
        points = int(params.number(request, "max_points", required=False, default=500, minimum=16, maximum=10_000))
        loaded = self._trace(request)
        return self._answer(request, loaded, lambda: queue_length(loaded.model, points))

    def memory_bandwidth(self, request: Request) -> Response:
        points = int(params.number(request, "max_points", required=False, default=500, minimum=16, maximum=10_000))
        loaded = self._trace(request)
        return self._answer(request, loaded, lambda: memory_bandwidth(loaded.model, points))

    def kernel_sequences(self, request: Request) -> Response:
        length = int(params.number(request, "length", required=False, default=3, minimum=2, maximum=16))
        top = int(params.number(request, "top", required=False, default=20, minimum=1, maximum=200))
        loaded = self._trace(request)
        return self._answer(request, loaded, lambda: kernel_sequences(loaded.model, length, top))

    def critical_path(self, request: Request) -> Response:
        step = params.text(request, "step", required=False) or None
        loaded = self._trace(request)
        try:
            return self._answer(request, loaded, lambda: critical_path(loaded.model, step))
        except KeyError:
            raise ApiError(404, f"no step {step!r} in this trace") from None

    def annotations(self, request: Request) -> Response:
        loaded = self._trace(request)
        return self._answer(request, loaded, lambda: annotation_times(loaded.model))

    def trace_window(self, request: Request) -> Response:
        loaded = self._trace(request)
        index = timeline_index(loaded.model)
        # the whole trace by default, at least 1 µs of it: an empty trace or a lone instant is an empty window
        start, end = params.time_range(request, index.t_min, max(index.t_max, index.t_min + 1.0))
        assert start is not None and end is not None
        width = int(params.number(request, "width_px", required=False, default=1000, minimum=1, maximum=8192))
        collapsed = params.int_list(request, "collapsed")
        return self._answer(request, loaded, lambda: window(loaded.model, start, end, width, frozenset(collapsed)))

    def trace_event(self, request: Request) -> Response:
        loaded = self._trace(request)
        row = int(params.number(request, "id", minimum=0))
        if row >= loaded.model.n_events:
            raise ApiError(404, f"no event with id {row} in this trace")
        return self._answer(request, loaded, lambda: event_details(loaded.model, row))

    def trace_search(self, request: Request) -> Response:
        loaded = self._trace(request)
        query = params.text(request, "q")
        offset = int(params.number(request, "offset", required=False, default=0, minimum=0))
        limit = int(params.number(request, "limit", required=False, default=100, minimum=1, maximum=1000))
        return self._answer(request, loaded, lambda: search(loaded.model, query, offset, limit))

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
        except LookupFailed as err:
            raise ApiError(err.status, str(err)) from None
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
            "/overview": json_route(self.overview),
            "/operators": json_route(self.operators),
            "/kernels": json_route(self.kernels),
            "/memory/curve": json_route(self.memory_curve),
            "/memory/events": json_route(self.memory_events),
            "/memory/stats": json_route(self.memory_stats),
            "/modules": json_route(self.modules),
            "/modules/timeline": json_route(self.modules_timeline),
            "/distributed": json_route(self.distributed),
            "/diff": json_route(self.diff),
            "/diff/node": json_route(self.diff_node),
            "/idle": json_route(self.idle),
            "/launch_stats": json_route(self.launch_stats),
            "/queue_length": json_route(self.queue_length),
            "/memory_bandwidth": json_route(self.memory_bandwidth),
            "/kernel_sequences": json_route(self.kernel_sequences),
            "/critical_path": json_route(self.critical_path),
            "/annotations": json_route(self.annotations),
            "/trace/window": json_route(self.trace_window),
            "/trace/event": json_route(self.trace_event),
            "/trace/search": json_route(self.trace_search),
            "/trace/file": json_route(self.trace_file),
            "/trace/range": json_route(self.trace_range),
        }
