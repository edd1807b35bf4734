"""The Capture dialog's routes: which run folders a job listens in, a new request (POST), and where one stands.

The only routes that write, and only into a run folder's ``.capture/`` (:mod:`tb_plugin.capture.requests`), only
when TensorBoard was started with ``--profiler_capture`` (a shared TensorBoard must not let every visitor make
jobs profile themselves). A request names a run the catalog listed (never a path), options from a whitelist
within bounds, and gets a random id. A POST must come from this page: a JSON body with the plugin's own header
(which a cross-site form cannot send without a CORS preflight TensorBoard never grants) and a Host naming this
machine (a DNS-rebinding page cannot pass).
"""

from __future__ import annotations

import errno
import ipaddress
import socket
import threading
import time
from typing import Any

import msgspec
from werkzeug.wrappers import Request, Response

from ..capture import protocol as p
from ..capture.folder import CaptureFolder, FolderError
from ..capture.requests import NotFound, listeners, read_progress, submit
from ..catalog import remote
from ..workspace import Workspace
from . import params
from .http import ApiError, json_response

CAPTURE_HEADER = "X-PTP-Capture"  # what the page sends with a POST; a plain HTML form cannot
MAX_BODY = 4096
FRESH_S = 90.0  # a listener file older than this is a job that stopped (three heartbeats on an object store)
MAX_TARGETS = 256
PROGRESS_TTL_S = 1.0  # a request's progress read from its files is reused this long (the page polls it)
OFF = ("Capture is off on this TensorBoard: start it with --profiler_capture to let this page ask running jobs for "
       "traces (anyone who can open the page can then make them profile themselves), or run "
       "`pytorch-tb-profiler capture LOGDIR/RUN --steps 3` where the logdir is writable.")


class CaptureRoutes:
    """``/capture`` (GET: targets; POST: a new request) and ``/capture/status``."""

    def __init__(self, workspace: Workspace, enabled: bool) -> None:
        self.workspace = workspace
        self.enabled = enabled
        self._recent: dict[tuple[str, str], tuple[float, dict[str, Any]]] = {}
        self._lock = threading.Lock()

    def capture(self, request: Request) -> Response:
        if request.method == "POST":
            return self._submit(request)
        if request.method not in ("GET", "HEAD"):
            raise ApiError(405, f"{request.method} is not allowed here")
        run = params.text(request, "run", required=False) or None
        folders = self.workspace.capture_folders()
        if run is not None and run not in folders:
            raise ApiError(404, f"unknown run {run!r}")
        now = time.time()
        targets = [_target(f.run, f.listeners, now) for f in sorted(folders.values(), key=_listening_first)]
        job = self._job(self._folder(run)) if run is not None else None
        for target in targets:  # the run asked about: its count read now (a job that ended says so at exit)
            if job is not None and target["run"] == run:
                target["listening"] = job["listening"]
        return json_response(request, {"enabled": self.enabled, "message": None if self.enabled else OFF,
                                       "targets": targets[:MAX_TARGETS], "job": job})

    @staticmethod
    def _job(folder: CaptureFolder) -> dict[str, Any]:
        """The job listening in one folder, from its lowest rank's heartbeat (read now, not at the last scan)."""
        try:
            count, first = listeners(folder)
        except FolderError as err:
            raise ApiError(502, str(err)) from None
        return {"listening": count, "ended": first is not None and first.state == "ended",
                "world_size": first.world_size if first else None, "step": first.step if first else None,
                "steps_per_s": first.steps_per_s if first else None,
                "heard_s": round(max(0.0, time.time() - first.updated), 1) if first else None}

    def status(self, request: Request) -> Response:
        run, request_id = params.text(request, "run"), params.text(request, "id")
        if not p.is_id(request_id):
            raise ApiError(400, "query parameter 'id' must be a capture request id (16 hex digits)")
        folder = self._folder(run)
        key, now = (run, request_id), time.monotonic()
        with self._lock:
            kept = self._recent.get(key)
        if kept is not None and now - kept[0] < PROGRESS_TTL_S:
            return json_response(request, kept[1])
        try:
            answer = read_progress(folder, request_id).as_dict(run)
        except NotFound as err:
            raise ApiError(404, str(err)) from None
        except FolderError as err:
            raise ApiError(502, str(err)) from None
        with self._lock:
            self._recent = {k: v for k, v in self._recent.items() if now - v[0] < PROGRESS_TTL_S}
            self._recent[key] = (now, answer)
        return json_response(request, answer)

    def _folder(self, run: str) -> CaptureFolder:
        found = self.workspace.capture_folders().get(run)
        if found is None:
            raise ApiError(404, f"unknown run {run!r}")
        try:
            return CaptureFolder(found.url, found.access)
        except Exception as err:  # noqa: BLE001 - a store's package missing, a URL it cannot use: said, not a 500
            raise ApiError(502, remote.scrub(f"cannot use the folder of run {run!r}: {err}")) from None

    def _submit(self, request: Request) -> Response:
        if not self.enabled:
            raise ApiError(403, OFF)
        _same_page(request)
        body = _body(request)
        run = params.text(request, "run")
        folder = self._folder(run)
        try:
            steps, options, deadline = p.check_options(
                body.get("steps", p.DEFAULT_STEPS), body.get("activities", list(p.DEFAULT_ACTIVITIES)),
                {k: body.get(k, False) for k in ("record_shapes", "profile_memory", "with_stack")},
                body.get("deadline_s", p.DEFAULT_DEADLINE_S))
        except p.OptionsError as err:
            raise ApiError(400, str(err)) from None
        unknown = set(body) - {"steps", "activities", "record_shapes", "profile_memory", "with_stack", "deadline_s"}
        if unknown:
            raise ApiError(400, f"unknown field {sorted(unknown)[0][:40]!r} in the capture request")
        try:
            made = submit(folder, steps, options, deadline, f"TensorBoard page (from {request.remote_addr or '?'})")
        except FolderError as err:
            raise ApiError(_write_status(err), f"cannot write the capture request: {err}") from None
        answer = read_progress(folder, made.id).as_dict(run)
        return json_response(request, answer, 202)


def _target(run: str, heard: tuple[tuple[str, float], ...], now: float) -> dict[str, Any]:
    fresh = [mtime for _, mtime in heard if now - mtime <= FRESH_S]
    return {"run": run, "listening": len(fresh),
            "heard_s": round(max(0.0, now - max(fresh)), 1) if fresh else None}


def _listening_first(folder: Any) -> tuple[int, str]:
    return (0 if folder.listeners else 1, folder.run)


def _body(request: Request) -> dict[str, Any]:
    if request.mimetype != "application/json":
        raise ApiError(415, "a capture request is JSON (Content-Type: application/json)")
    if request.content_length is None or request.content_length > MAX_BODY:
        raise ApiError(413, f"a capture request is at most {MAX_BODY} bytes of JSON, with a Content-Length")
    raw = request.get_data(cache=False)[:MAX_BODY + 1]
    try:
        body = msgspec.json.decode(raw)
    except msgspec.DecodeError:
        raise ApiError(400, "the capture request is not valid JSON") from None
    if not isinstance(body, dict):
        raise ApiError(400, "the capture request must be a JSON object")
    return body


def _same_page(request: Request) -> None:
    """Refuse a POST that did not come from this plugin's page (see the module's docstring)."""
    if request.headers.get(CAPTURE_HEADER) != "1":
        raise ApiError(403, f"a capture request must come from the plugin's page (header {CAPTURE_HEADER})")
    host = (request.host or "").lower()
    if not _local_host(host):
        raise ApiError(403, f"capture requests are taken only at an address of this machine, not {host[:80]!r}")
    origin = request.headers.get("Origin")
    if origin and origin.split("://", 1)[-1].lower() != host:
        raise ApiError(403, "a capture request from another site is refused")
    if request.headers.get("Sec-Fetch-Site", "same-origin") not in ("same-origin", "none"):
        raise ApiError(403, "a capture request from another site is refused")


def _local_host(host: str) -> bool:
    """A Host header naming this machine: an IP address, localhost, or its own names (never an arbitrary DNS
    name, which a rebinding attack points at 127.0.0.1)."""
    name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
    name = name.strip("[]")
    try:
        ipaddress.ip_address(name)
        return True
    except ValueError:
        pass
    if name == "localhost" or name.endswith(".localhost"):
        return True
    return name in {socket.gethostname().lower(), socket.getfqdn().lower()}


def _write_status(err: FolderError) -> int:
    """507 for a full disk or quota, 403 for a folder this server may not write, 502 for a store that refused."""
    cause = err.__cause__
    code = cause.errno if isinstance(cause, OSError) else None
    if code in (errno.ENOSPC, errno.EDQUOT):
        return 507
    if code in (errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOTDIR, errno.EEXIST):
        return 403
    return 502
