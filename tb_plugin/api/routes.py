"""The route table: each handler validates its parameters, asks the workspace, calls an analysis, encodes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from werkzeug.wrappers import Request, Response

from ..analysis.summary import summary
from ..analysis.views import available_views
from ..workspace import LookupFailed, Workspace
from . import params
from .http import ApiError, json_response, json_route
from .static import relative_path, serve


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
            traces = self.workspace.traces_of_run(run)
        except LookupFailed as err:
            raise ApiError(err.status, str(err)) from None
        return json_response(request, {"views": available_views([t.model for t in traces])})

    def summary(self, request: Request) -> Response:
        loaded = self._trace(request)
        payload = {"file": loaded.file.filename, "size_bytes": loaded.file.size, **summary(loaded.model)}
        return json_response(request, payload)

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
        }
