"""The logdir's allocator snapshots (``torch.cuda.memory._dump_snapshot`` files): decoded one at a time on a thread
of their own, the decoded ones kept within a byte budget, each with its state or its one-line reason."""

from __future__ import annotations

import logging
import queue
import threading
from collections import OrderedDict, defaultdict
from dataclasses import dataclass
from typing import Any

from ..catalog.catalog import Identity, SnapshotFile
from ..loader.snapshot import SnapshotError, load_snapshot
from ..model.derived import compute_once
from ..model.snapshot import AllocatorSnapshot
from .base import LookupFailed

log = logging.getLogger(__name__)

SNAPSHOT_CACHE_BYTES = 1 << 30  # decoded allocator snapshots kept (their columns), least recently used out first
SNAPSHOTS_KEPT = 16  # and at most this many (their encoded answers count against model.memo.ANSWERS)
MAX_SNAPSHOT_BYTES = 2 << 30  # a snapshot file beyond this is not read


@dataclass
class SnapshotEntry:
    """A listed allocator snapshot and its state: queued, loading, ready, or failed with the reason."""

    file: SnapshotFile
    state: str = "queued"
    error: str | None = None


class Snapshots:
    """The logdir's allocator snapshots: decoded one at a time on a thread of their own (the scan never waits),
    the decoded ones kept within a byte budget, least recently used out (one asked for again is decoded again, in
    the request). A snapshot that cannot be read keeps its one-line reason, shown where the user looks."""

    def __init__(self, max_bytes: int = SNAPSHOT_CACHE_BYTES) -> None:
        self.max_bytes = max_bytes
        self._entries: dict[Identity, SnapshotEntry] = {}
        self._decoded: OrderedDict[Identity, AllocatorSnapshot] = OrderedDict()
        self._computing: dict[Any, Any] = {}
        self._lock = threading.Lock()
        self._queue: queue.Queue[SnapshotFile | None] = queue.Queue()
        self._thread: threading.Thread | None = None

    def update(self, listed: list[SnapshotFile]) -> None:
        """Take the scan's list: new files are queued for decoding, gone ones forgotten."""
        with self._lock:
            fresh = {f.identity: self._entries.get(f.identity) or SnapshotEntry(f) for f in listed}
            new = [e.file for i, e in fresh.items() if i not in self._entries]
            self._entries = fresh
            for gone in [i for i in self._decoded if i not in fresh]:
                del self._decoded[gone]
        for f in new:
            self._queue.put(f)
        if new and self._thread is None:
            self._thread = threading.Thread(target=self._work, name="pytorch-profiler-snapshots", daemon=True)
            self._thread.start()

    def close(self) -> None:
        self._queue.put(None)

    def _work(self) -> None:
        while (f := self._queue.get()) is not None:
            with self._lock:
                entry = self._entries.get(f.identity)
                if entry is None or entry.state != "queued":
                    continue
                entry.state = "loading"
            try:
                self.decoded(entry)
            except SnapshotError:
                pass  # the entry keeps the reason
            except Exception as err:
                log.exception("reading the snapshot %s failed", f.filename)
                self._fail(entry, f"{f.filename}: cannot be read ({type(err).__name__}: {err})")

    def _fail(self, entry: SnapshotEntry, reason: str) -> None:
        with self._lock:
            entry.state, entry.error = "failed", reason

    def decoded(self, entry: SnapshotEntry) -> AllocatorSnapshot:
        """The entry's snapshot, decoded once (kept within the budget); :class:`SnapshotError` when it cannot be."""
        key = entry.file.identity
        with self._lock:
            snap = self._decoded.get(key)
            if snap is not None:
                self._decoded.move_to_end(key)
                return snap
        return compute_once({}, self._computing, key, lambda: self._decode(entry))

    def _decode(self, entry: SnapshotEntry) -> AllocatorSnapshot:
        f = entry.file
        try:
            if f.size > MAX_SNAPSHOT_BYTES:
                raise SnapshotError(f"{f.filename}: {f.size / 2**20:,.0f} MiB is more than the "
                                    f"{MAX_SNAPSHOT_BYTES >> 20} MiB a snapshot is read up to")
            snap = load_snapshot(f.url, f.access)
        except MemoryError:
            reason = f"{f.filename}: not enough memory to read it"
            self._fail(entry, reason)
            raise SnapshotError(reason) from None
        except SnapshotError as err:
            self._fail(entry, str(err))
            raise
        with self._lock:
            entry.state, entry.error = "ready", None
            if f.identity in self._entries:
                self._decoded[f.identity] = snap
                self._evict()
        return snap

    def _evict(self) -> None:
        total = sum(s.nbytes for s in self._decoded.values())
        while (total > self.max_bytes or len(self._decoded) > SNAPSHOTS_KEPT) and len(self._decoded) > 1:
            _, gone = self._decoded.popitem(last=False)
            total -= gone.nbytes

    def by_run(self) -> dict[str, list[dict[str, Any]]]:
        """Each run's snapshots as the listing shows them (sorted by file name)."""
        with self._lock:
            entries = sorted(self._entries.values(), key=lambda e: (e.file.folder, e.file.filename))
            rows = [(e.file, e.state, e.error) for e in entries]
        out: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for f, state, error in rows:
            out[f.folder].append({"name": f.filename, "file": f.filename, "size_bytes": f.size, "mtime": f.mtime,
                                  "state": state, "error": error})
        return out

    def entry(self, run: str, name: str) -> SnapshotEntry:
        with self._lock:
            found = next((e for e in self._entries.values() if e.file.key == (run, name)), None)
            known_run = any(e.file.folder == run for e in self._entries.values())
        if found is None:
            raise LookupFailed(404, f"run {run!r} has no snapshot {name!r}" if known_run else
                               f"no snapshot {name!r} in run {run!r}")
        return found

    def get(self, run: str, name: str) -> AllocatorSnapshot:
        """The decoded snapshot ``name`` of ``run``: 404 unknown, 409 while queued or loading, 422 failed."""
        entry = self.entry(run, name)
        with self._lock:
            state, error = entry.state, entry.error
        if state == "failed":
            raise LookupFailed(422, error or f"{name} could not be read")
        if state != "ready":
            raise LookupFailed(409, f"{name} is still being read; try again when its state is 'ready'")
        try:
            return self.decoded(entry)
        except SnapshotError as err:
            raise LookupFailed(422, str(err)) from None
