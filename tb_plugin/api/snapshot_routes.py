"""The routes of the Memory view's snapshot mode: an allocator snapshot of a run, named by its file name.

Each validates its parameters, asks the workspace for the decoded snapshot (404 unknown, 409 still being read, 422
refused or unreadable, with the reason) and answers an analysis of :mod:`..analysis.snapshot_view` or
:mod:`..analysis.snapshot_timeline`, encoded once per snapshot and query (:func:`.answers.snapshot_answer`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from werkzeug.wrappers import Request, Response

from ..analysis import snapshot_view as view
from ..analysis.snapshot_history import device_history
from ..analysis.snapshot_timeline import MAX_BANDS, timeline_window
from ..model.snapshot import AllocatorSnapshot
from ..workspace import Workspace
from . import params
from .answers import snapshot_answer
from .http import ApiError, encoded_response

POSITION_MAX = 10**12


class SnapshotApi:
    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace

    def _snapshot(self, request: Request) -> tuple[AllocatorSnapshot, int]:
        """The snapshot the request names and the device it asks about (default: see ``view.default_device``)."""
        run, name = params.text(request, "run"), params.text(request, "snapshot")
        snap = self.workspace.snapshots.get(run, name)
        if request.args.get("device", "") == "":
            return snap, view.default_device(snap)
        device = params.integer(request, "device", minimum=0, maximum=1 << 16)
        if device not in snap.devices:
            listed = ", ".join(str(d) for d in snap.devices) or "none"
            raise ApiError(404, f"{snap.name} has nothing on device {device}; its devices: {listed}")
        return snap, device

    def _answer(self, request: Request, snap: AllocatorSnapshot, compute: Callable[[], Any]) -> Response:
        key = (request.path, tuple(sorted(request.args.items(multi=True))))
        return encoded_response(request, snapshot_answer(snap, key, compute))

    @staticmethod
    def _position(request: Request, name: str, default: int) -> int:
        """A position of the history (-1: before its first entry)."""
        if request.args.get(name, "") == "":
            return default
        return params.integer(request, name, minimum=-1, maximum=POSITION_MAX)

    def summary(self, request: Request) -> Response:
        max_points = params.integer(request, "max_points", required=False, default=view.CURVE_POINTS, minimum=16,
                                    maximum=100_000)
        snap, device = self._snapshot(request)
        return self._answer(request, snap, lambda: view.snapshot_summary(snap, device, max_points))

    def timeline(self, request: Request) -> Response:
        width = params.integer(request, "width_px", required=False, default=1000, minimum=1, maximum=8192)
        height = params.integer(request, "height_px", required=False, default=400, minimum=16, maximum=8192)
        bands = params.integer(request, "max_bands", required=False, default=MAX_BANDS, minimum=0, maximum=5000)
        start = self._position(request, "start", 0)
        end = self._position(request, "end", POSITION_MAX)
        pin = params.integer(request, "pin", minimum=0) if request.args.get("pin", "") != "" else None
        snap, device = self._snapshot(request)
        lo, hi = min(start, end), max(start, end)
        return self._answer(request, snap, lambda: timeline_window(snap, device, lo, hi, width, height, bands, pin))

    def live(self, request: Request) -> Response:
        group_by = params.text(request, "group_by", required=False, default="frame", choices=view.GROUPINGS)
        limit = params.integer(request, "limit", required=False, default=50, minimum=1, maximum=1000)
        snap, device = self._snapshot(request)
        at = self._position(request, "at", device_history(snap, device).peak)
        return self._answer(request, snap, lambda: view.live_set(snap, device, at, group_by, limit))

    def allocation(self, request: Request) -> Response:
        i = params.integer(request, "id", minimum=0)
        snap, device = self._snapshot(request)
        h = device_history(snap, device)
        if i >= len(h.size):
            raise ApiError(404, f"no allocation {i} on device {device} of {snap.name} ({len(h.size)} allocations)")
        at = self._position(request, "at", int(h.start[i]))
        return self._answer(request, snap, lambda: view.allocation(snap, device, i, at))

    def segments(self, request: Request) -> Response:
        limit = params.integer(request, "limit", required=False, default=200, minimum=1, maximum=5000)
        snap, device = self._snapshot(request)
        at = self._position(request, "at", device_history(snap, device).n - 1)
        return self._answer(request, snap, lambda: view.segments_view(snap, device, at, limit))

    def routes(self) -> dict[str, Callable[[Request], Response]]:
        return {"/snapshot/summary": self.summary, "/snapshot/timeline": self.timeline, "/snapshot/live": self.live,
                "/snapshot/allocation": self.allocation, "/snapshot/segments": self.segments}
