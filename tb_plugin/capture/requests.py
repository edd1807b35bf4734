"""The requester's side, shared by the page's server and the CLI: write a request into a run folder's
``.capture/``, and read back where it stands (:func:`.progress.progress` over the files the ranks wrote).

Nothing else is ever written: no trace, no file outside ``.capture/``. Old requests (a day past their deadline)
are removed with their plan and status files when a new one is written, so the folder does not grow forever.
"""

from __future__ import annotations

import contextlib
import time
from concurrent.futures import ThreadPoolExecutor

from . import protocol as p
from .folder import CaptureFolder, FolderError
from .progress import Progress, progress

__all__ = ["FolderError", "NotFound", "read_progress", "submit"]

KEEP_S = 24 * 3600.0  # files of a request this long past its deadline are removed by the next submit
MAX_PRUNE = 1000
READERS = 16  # threads reading status files from an object store (one request each)


class NotFound(LookupError):
    """No request of that id in the folder."""


def submit(folder: CaptureFolder, steps: int, options: p.Options, deadline_s: float, requester: str,
           now: float | None = None) -> p.Request:
    """Write a new request; raises :class:`FolderError` (the folder cannot be written: read-only, full, refused)."""
    now = time.time() if now is None else now
    request = p.Request(id=p.new_id(), steps=steps, options=options, requester=p.clean_requester(requester),
                        created=now, deadline=now + deadline_s)
    folder.write(p.request_name(request.id), p.encode(request))
    with contextlib.suppress(FolderError):  # the request is written; old files can go next time
        prune(folder, now)
    return request


def prune(folder: CaptureFolder, now: float) -> int:
    """Remove the files of requests whose deadline is more than :data:`KEEP_S` ago; the number removed."""
    names = folder.names()
    removed = 0
    for name in names:
        request_id = p.request_id_of(name)
        if request_id is None or removed >= MAX_PRUNE:
            continue
        request = p.decode(folder.read(name), p.Request)
        if request is None or now - request.deadline < KEEP_S:
            continue
        for other in names:
            if other == name or other == p.plan_name(request_id) or p.status_rank_of(other, request_id) is not None:
                folder.remove(other)
                removed += 1
    return removed


def read_progress(folder: CaptureFolder, request_id: str, now: float | None = None) -> Progress:
    """Where request ``request_id`` stands; raises :class:`NotFound` or :class:`FolderError`."""
    entries = folder.entries()
    names = {name for name, _ in entries}
    if p.request_name(request_id) not in names:
        raise NotFound(f"no capture request {request_id} in {folder.shown}")
    request = p.decode(folder.read(p.request_name(request_id)), p.Request)
    if request is None:
        raise NotFound(f"the capture request {request_id} in {folder.shown} cannot be read")
    plan = p.decode(folder.read(p.plan_name(request_id)), p.Plan) if p.plan_name(request_id) in names else None
    status_names = sorted(n for n in names if p.status_rank_of(n, request_id) is not None)
    statuses = {s.rank: s for s in _read_all(folder, status_names, p.Status) if s.id == request_id}
    heard = {rank: mtime for name, mtime in entries if (rank := p.listener_rank_of(name)) is not None}
    heartbeat = _heartbeat(folder, heard)
    return progress(request, plan, statuses, heard, heartbeat, time.time() if now is None else now, folder.shown)


def _read_all(folder: CaptureFolder, names: list[str], kind: type) -> list:  # type: ignore[type-arg]
    def read(name: str) -> object:
        return p.decode(folder.read(name), kind)

    if folder.is_local or len(names) < 2:
        found = [read(name) for name in names]
    else:
        with ThreadPoolExecutor(min(READERS, len(names))) as pool:
            found = list(pool.map(read, names))
    return [item for item in found if item is not None]


def _heartbeat(folder: CaptureFolder, heard: dict[int, float]) -> float:
    """The job's heartbeat interval, from the lowest rank's listener file (every rank uses the same)."""
    if not heard:
        return 30.0
    listener = p.decode(folder.read(p.listener_name(min(heard))), p.Listener)
    return float(listener.heartbeat_s) if listener is not None else 30.0


def listeners(folder: CaptureFolder, now: float | None = None) -> tuple[int, p.Listener | None]:
    """(how many ranks are listening now, the lowest one's heartbeat): what the page shows before a request."""
    now = time.time() if now is None else now
    heard = {rank: mtime for name, mtime in folder.entries() if (rank := p.listener_rank_of(name)) is not None}
    if not heard:
        return 0, None
    first = p.decode(folder.read(p.listener_name(min(heard))), p.Listener)
    beat = first.heartbeat_s if first is not None else 30.0
    fresh = sum(now - mtime <= 3 * beat + 5.0 for mtime in heard.values())
    if first is not None and first.state == "ended":
        return 0, first
    return fresh, first
