"""The workspace: the catalog of trace files, kept in step with the loader, behind one object the API can ask.

It owns the background rescan thread. Every public method answers from memory at once: requests never wait for
a listing or a parse.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections import OrderedDict, defaultdict
from collections.abc import Callable, Hashable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .analysis.distributed import job_distributed
from .analysis.memory_category_view import export_overlap
from .analysis.overview import overview
from .analysis.rank_summary import RankSummary, rank_summary
from .analysis.views import available_views, merge_views
from .catalog import remote
from .catalog.catalog import CaptureFolder, Catalog, ExportFile, Identity, Root, SnapshotFile, TraceFile
from .catalog.names import span_keys, span_order
from .catalog.storage import Storage
from .jobs.cache import ParseCache, Stored
from .jobs.scheduler import DEFAULT_LOAD_TIMEOUT, FAILED, LOADING, QUEUED, READY, LoadScheduler, Runner
from .jobs.shared import SharedCache
from .loader.memory_export import ExportError, load_export
from .loader.snapshot import SnapshotError, load_snapshot
from .model.derived import compute_once
from .model.memo import RESULTS, BoundedMemo
from .model.memory_categories import MemoryExport
from .model.snapshot import AllocatorSnapshot
from .model.tables import TraceModel
from .timeline.index import timeline_index
from .timeline.stored import StoredIndex

log = logging.getLogger(__name__)

Key = tuple[str, str, str]
PRECOMPUTE_THREAD_EVENTS = 100_000  # a trace this big builds its Trace view index beside its Overview


def precompute(model: TraceModel) -> None:
    """Build what the first page views need as soon as a trace is loaded (in a background thread).

    The Overview (the landing page) and the Trace view's index are built side by side, so neither page waits for
    the other's: the index is mostly numpy sorts, which release the GIL, so the two overlap on two cores. A small
    trace's are built one after the other: starting a thread costs more than its index (a logdir of thousands of
    small runs spent a third of its loading time there).
    """
    if model.n_events < PRECOMPUTE_THREAD_EVENTS:
        _build_index(model)
        overview(model)
        return
    index = threading.Thread(target=_build_index, args=(model,), name="pytorch-profiler-index", daemon=True)
    index.start()
    overview(model)
    index.join()


def _build_index(model: TraceModel) -> None:
    try:
        timeline_index(model)
    except Exception:  # a request for the Trace view computes it again and reports the error there
        log.exception("building the timeline index of %s failed", model.meta.get("source"))


# Job-level results (the Distributed view's answer as data) per set of rank identities: every rank's Overview reads it
# for its job picture, so at 1,024 ranks it is computed once, not once per rank opened; built as soon as a span's last
# rank turns ready (``Workspace._after_ready``). Kept within the results' byte budget.
_JOB_RESULTS = BoundedMemo(RESULTS)
_JOB_COMPUTING: dict[Any, Future[Any]] = {}


def job_result(key: Hashable, compute: Callable[[], Any]) -> Any:
    """``compute()`` for ``key`` (the identities of every rank it reads), computed once; callers must not change
    the result."""
    return compute_once(_JOB_RESULTS, _JOB_COMPUTING, key, compute)


def job_of(ranks: list[tuple[TraceFile, RankSummary]]) -> dict[str, Any]:
    """The job-level Distributed answer over these (file, summary) ranks: the per-job summary every rank's
    Overview reads (its job picture, the straggler, the job's MFU), computed once per set of rank files."""
    key = ("job", tuple(sorted((f.key, f.identity) for f, _ in ranks)))
    result: dict[str, Any] = job_result(key, lambda: job_distributed([s for _, s in ranks]))
    return result


class LookupFailed(Exception):
    """A request named something the workspace cannot give; ``status`` is the HTTP status to answer with."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class LoadedTrace:
    file: TraceFile
    model: TraceModel


@dataclass(frozen=True)
class SpanSummaries:
    """The workers of one span of a run as rank summaries: (file, summary) of those that loaded, and the workers
    whose trace failed (sorted)."""

    ranks: list[tuple[TraceFile, RankSummary]]
    failed: list[str]


_SCORES = {READY: 2, LOADING: 1, QUEUED: 1, FAILED: 0}  # how a run is chosen to open first (as the client does)
_URGENCY = {LOADING: 0, QUEUED: 1, FAILED: 2}  # the order spans that are not ready are told of
ATTENTION_SPANS = 50  # loading and failed spans (of each) a page of /runs tells of; its counts cover every span
SUMMARY_READERS = 8  # threads reading preprocessed rank summaries for a job-level answer
MAX_EXPORT_BYTES = 512 << 20  # a memory timeline export beyond this is not read (a scan must stay short)


@dataclass(frozen=True)
class ExportEntry:
    """A listed memory timeline export and what became of it: decoded, or why not (shown, never raised)."""

    file: ExportFile
    export: MemoryExport | None
    error: str | None


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


class Workspace:
    def __init__(self, roots: list[tuple[str | None, str]], *, cache_dir: str | None = None,
                 workers: int | None = None, rescan_seconds: float = 10.0, cache_max_bytes: int = 4 << 30,
                 on_ready: Callable[[TraceModel], None] | None = None,
                 load_timeout: float | None = DEFAULT_LOAD_TIMEOUT, any_json: bool = False,
                 dask_scheduler: str | None = None, stored: Stored | None = None) -> None:
        """``cache_dir``: a local folder, or a URL of a shared cache that ``preprocess`` filled (models are then
        copied into the default local cache when opened); ``dask_scheduler``: parse on that Dask cluster, into the
        shared cache, instead of in local processes; ``stored``: what the loader processes compute and store beside
        each parse (default: the Trace view's index; the plugin passes the first views' answers too)."""
        self._roots_spec = roots
        self._any_json = any_json
        self._catalog: Catalog | None = None
        self._root_errors: list[str] = []
        self._unopened: list[tuple[str | None, str]] = []  # logdirs whose storage could not be opened yet
        self._lasting_errors: list[str] = []  # logdirs that cannot open until a restart (a package is missing)
        self.rescan_seconds = rescan_seconds
        self._setup_errors: list[str] = []  # the shared cache or the Dask cluster could not be used
        if cache_dir and cache_dir.lower().startswith("file://"):
            cache_dir = cache_dir[len("file://"):]
        shared = self._shared_cache(cache_dir)
        # a cache on another store is copied into the default local cache, where models are memory-mapped from
        cache = ParseCache(None if cache_dir and remote.is_url(cache_dir) else cache_dir, cache_max_bytes)
        if cache.problem is not None:
            self._setup_errors.append(cache.problem)
        runner = self._runner(dask_scheduler, shared.url if shared is not None else str(cache.directory))
        self.scheduler = LoadScheduler(cache, workers, on_ready=on_ready, load_timeout=load_timeout, shared=shared,
                                       runner=runner, on_preprocessed=self._read_summary,
                                       stored=stored if stored is not None else StoredIndex(),
                                       on_loaded=self._after_ready)
        self._summaries: dict[Any, RankSummary] = {}  # preprocessed summaries read, by (entry, worker)
        self._summaries_computing: dict[Any, Any] = {}
        self._files: dict[Key, TraceFile] = {}
        self._exports: dict[Identity, ExportEntry] = {}  # by file identity
        self.snapshots = Snapshots()
        self._lock = threading.Lock()
        self._scanned = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._scan_loop, name="pytorch-profiler-scan", daemon=True)

    def _shared_cache(self, cache_dir: str | None) -> SharedCache | None:
        if not cache_dir or not remote.is_url(cache_dir):
            return None
        try:
            return SharedCache(cache_dir)
        except Exception as err:  # noqa: BLE001 - a URL of no known form, a missing package: said where one looks
            self._setup_errors.append(remote.scrub(f"cannot use the cache {remote.scrub_url(cache_dir)}: {err}; "
                                                   "traces are parsed here into a local cache"))
            return None

    def _runner(self, address: str | None, cache_url: str) -> Runner | None:
        if not address:
            return None
        from .scaleout.executors import DaskRunner

        try:
            return DaskRunner(address, cache_url)
        except Exception as err:  # noqa: BLE001 - Dask missing, the scheduler unreachable: parse locally instead
            self._setup_errors.append(f"cannot use the Dask scheduler {address}: {err}; traces are parsed here")
            return None

    @property
    def logdir_display(self) -> str:
        # a SAS token in a logdir URL's query string is a credential: never shown
        return ",".join(f"{n}:{p}" if n else p for n, p in ((n, remote.scrub_url(p)) for n, p in self._roots_spec))

    def start(self) -> Workspace:
        self._thread.start()
        return self

    def close(self) -> None:
        self._stop.set()
        self.scheduler.close()
        self.snapshots.close()

    def wait_scanned(self, timeout: float | None = None) -> bool:
        """Wait for the first scan to end (tests and benchmarks time from it; requests never wait)."""
        return self._scanned.wait(timeout)

    # ---- scanning ---------------------------------------------------------------------------------------------
    def _make_catalog(self) -> Catalog:
        catalog = Catalog([], any_json=self._any_json)
        self._unopened, self._lasting_errors = list(self._roots_spec), []
        self._open_roots(catalog)
        return catalog

    def _open_roots(self, catalog: Catalog) -> None:
        """Open the logdirs not open yet; one that fails says why in ``errors()`` and is tried again next scan
        (an HDFS namenode that was down), except when a package is missing, which needs a restart anyway."""
        errors: list[str] = []
        still: list[tuple[str | None, str]] = []
        for name, path in self._unopened:
            shown = remote.scrub_url(path)
            try:
                catalog.roots.append(Root(name, Storage(path)))
            except remote.MissingBackend as err:
                self._lasting_errors.append(f"cannot open logdir {shown}: {err}")
            except remote.RemoteError as err:  # a URL of no known form, a store that cannot be reached: what to do
                errors.append(remote.scrub(f"cannot open logdir {shown}: {err}"))
                still.append((name, path))
            except Exception as err:  # noqa: BLE001 - anything else: tell the user, keep the other logdirs going
                errors.append(f"cannot open logdir {shown}: {remote.explain(err, None, 'open')}")
                still.append((name, path))
        self._unopened = still
        self._root_errors = self._lasting_errors + errors

    def scan_once(self) -> None:
        if self._catalog is None:
            self._catalog = self._make_catalog()
        elif self._unopened:
            self._open_roots(self._catalog)
        files = self._catalog.scan()
        unlisted = []
        try:
            self.scheduler.refresh_shared()
        except Exception as err:  # noqa: BLE001 - the shared cache is unreachable now: say so, parse here
            unlisted.append(remote.scrub(f"cannot list the cache {self.scheduler.shared_url()}: {err}"))
        self._setup_errors = [e for e in self._setup_errors if not e.startswith("cannot list the cache")] + unlisted
        fresh = {f.key: f for f in files}
        with self._lock:
            gone = set(self._files) - set(fresh)
            self._files = fresh
        for key in gone:
            self.scheduler.forget(key)
        for f in fresh.values():
            self.scheduler.request(f)
        if gone:  # summaries of removed files go too (the memo is keyed by cache entry)
            live = {entry for key in fresh if (entry := self.scheduler.preprocessed(key)) is not None}
            self._summaries = {k: v for k, v in list(self._summaries.items()) if k[0] in live}
        self._decode_exports(self._catalog.exports)
        self.snapshots.update(self._catalog.snapshots)
        self._scanned.set()

    def _decode_exports(self, listed: list[ExportFile]) -> None:
        """Decode new memory timeline exports in the scan thread (small files; a bad one gets its error)."""
        known = self._exports
        fresh: dict[Identity, ExportEntry] = {}
        for f in listed:
            entry = known.get(f.identity)
            if entry is None:
                entry = _decode_export(f)
            fresh[f.identity] = entry
        with self._lock:
            self._exports = fresh

    def _scan_loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.scan_once()
            except Exception as err:  # noqa: BLE001 - the scan thread must survive; the message holds no secret
                log.error("scanning the logdir failed: %s", remote.scrub(f"{type(err).__name__}: {err}"))
                self._scanned.set()
            if self.rescan_seconds <= 0 and not (self._catalog and self._catalog.pending):
                return
            delay = self.rescan_seconds if self.rescan_seconds > 0 else 2.0
            if self._catalog is not None and self._catalog.pending:
                delay = min(delay, 2.0)
            self._stop.wait(delay)

    # ---- questions ------------------------------------------------------------------------------------------------
    def has_roots(self) -> bool:
        return bool(self._roots_spec)

    def has_runs(self) -> bool:
        return bool(self._files) or bool(self.snapshots.by_run())

    def scanning(self) -> bool:
        return not self._scanned.is_set()

    def errors(self) -> list[str]:
        catalog_errors = list(self._catalog.errors.values()) if self._catalog else []
        return self._setup_errors + self._root_errors + catalog_errors

    def listing(self) -> list[dict[str, Any]]:
        """Runs → workers → spans with their load state, sorted for people (spans numerically), and each run's
        allocator snapshots (a folder of snapshots only is a run without workers)."""
        grouped, statuses, snapshots = self._grouped(), self.scheduler.statuses(), self.snapshots.by_run()
        return [self._run_entry(run, grouped.get(run, {}), statuses, snapshots)
                for run in sorted(set(grouped) | set(snapshots))]

    def listing_of(self, run: str) -> dict[str, Any] | None:
        grouped, snapshots = self._grouped(run), self.snapshots.by_run()
        if run not in grouped and run not in snapshots:
            return None
        return self._run_entry(run, grouped.get(run, {}), self.scheduler.statuses(), snapshots)

    def runs_page(self, limit: int, offset: int = 0, query: str = "", run: str | None = None) -> dict[str, Any]:
        """A page of the listing, for logdirs of thousands of runs: the ``limit`` runs from ``offset`` (by name)
        whose name holds ``query`` (any case), the run named ``run`` and the run to open first (``newest``: the
        best loaded, newest; what a client picks with no selection) whatever the page, span counts by state over
        every run, and up to :data:`ATTENTION_SPANS` spans loading and as many failed anywhere (what the page's
        progress and error cards show)."""
        grouped, statuses, snapshots = self._grouped(), self.scheduler.statuses(), self.snapshots.by_run()
        names = sorted(set(grouped) | set(snapshots))
        needle = query.casefold()
        matched = [n for n in names if needle in n.casefold()] if needle else names
        states = dict.fromkeys((QUEUED, LOADING, READY, FAILED, "updating"), 0)
        busy: list[tuple[int, str, TraceFile]] = []
        best: tuple[int, float, str] | None = None
        for name in names:
            score, mtime = -1, 0.0
            for shot in snapshots.get(name, []):  # a run's snapshots count as the client counts them
                score, mtime = max(score, _SCORES.get(shot["state"], 1)), max(mtime, shot["mtime"])
            for f in (f for files in grouped.get(name, {}).values() for f in files):
                status = statuses.get(f.key)
                state = status.state if status is not None else QUEUED
                states[state] += 1
                states["updating"] += status is not None and status.updating
                score, mtime = max(score, _SCORES[state]), max(mtime, f.mtime)
                if state != READY:
                    busy.append((_URGENCY[state], name, f))
            if best is None or (score, mtime) > best[:2]:  # ties: the first by name, as the client picks
                best = (score, mtime, name)
        shown: set[str] = set(matched[offset:offset + limit]) | ({run} & set(names) if run else set())
        if best is not None:
            shown.add(best[2])
        return {
            "runs": [self._run_entry(n, grouped.get(n, {}), statuses, snapshots) for n in sorted(shown)],
            "total_runs": len(names), "matched": len(matched), "offset": offset, "limit": limit,
            "newest": best[2] if best else None, "states": states,
            "attention": self._attention(_first_of_each(busy), grouped, statuses),
        }

    def _attention(self, busy: list[tuple[int, str, TraceFile]], grouped: dict[str, dict[str, list[TraceFile]]],
                   statuses: dict[Any, Any]) -> list[dict[str, Any]]:
        """The listing's entries of these loading or failed spans, each with its run and worker."""
        out = []
        for _, run, f in busy:
            span = next(s for s in self._span_entries(grouped[run][f.worker], statuses) if s["file"] == f.filename)
            out.append({"run": run, "worker": f.worker, **span})
        return out

    def _grouped(self, only: str | None = None) -> dict[str, dict[str, list[TraceFile]]]:
        """The listed files by run and worker (of one run, given ``only``)."""
        with self._lock:
            files = [f for f in self._files.values() if only is None or f.run == only]
        runs: dict[str, dict[str, list[TraceFile]]] = defaultdict(lambda: defaultdict(list))
        for f in files:
            runs[f.run][f.worker].append(f)
        return runs

    def _run_entry(self, run: str, workers: dict[str, list[TraceFile]], statuses: dict[Any, Any],
                   snapshots: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
        return {"name": run, "workers": [{"name": worker, "spans": self._span_entries(workers[worker], statuses)}
                                         for worker in sorted(workers)], "snapshots": snapshots.get(run, [])}

    @staticmethod
    def _span_entries(files: list[TraceFile], statuses: dict[Any, Any]) -> list[dict[str, Any]]:
        """A worker's spans, sorted for people (numerically), with their stable keys and load state."""
        files = sorted(files, key=lambda f: span_order(f.span))
        out = []
        for f, key in zip(files, span_keys([(f.span, f.stamp) for f in files])):
            status = statuses.get(f.key)
            out.append({
                "span": f.span,
                "key": key,
                "mtime": f.mtime,
                "state": status.state if status else "queued",
                "progress": status.progress if status else 0.0,
                "error": status.error if status else None,
                "file": f.filename,
                "size_bytes": f.size,
                "updating": bool(status and status.updating),
            })
        return out

    def capture_folders(self) -> dict[str, CaptureFolder]:
        """Every run folder a capture request may go to, by run name: the folders of the runs listed (a job may
        write into them) and the folders where a running job announced itself (``.capture/listener-*.json``),
        with or without traces yet. Names come from the listing only, so a request can name no other folder."""
        with self._lock:
            files = list(self._files.values())
        found = dict(self._catalog.capture) if self._catalog is not None else {}
        for f in files:
            if f.run not in found:
                found[f.run] = CaptureFolder(f.run, _folder_of(f.url), f.access)
        return found

    def file(self, run: str, worker: str, span: str) -> TraceFile:
        """The file of a span, named by its label (``1``) or its stable key, the file name's stamp."""
        with self._lock:
            f = self._files.get((run, worker, span)) or _by_stamp(self._files.values(), run, worker, span)
            known_run = any(k[0] == run for k in self._files)
            known_worker = any(k[:2] == (run, worker) for k in self._files)
        if f is None:
            if not known_run:
                raise LookupFailed(404, f"unknown run {run!r}")
            if not known_worker:
                raise LookupFailed(404, f"run {run!r} has no worker {worker!r}")
            raise LookupFailed(404, f"worker {worker!r} of run {run!r} has no span {span!r}")
        return f

    def open_file(self, trace_file: TraceFile) -> Any:
        """The original file, unchanged, as a binary stream (for download and hand-off to other viewers).

        Callers serve only spans that loaded as traces (a file that failed to parse may be anything a link under
        a trace's name points to, ``/etc/passwd``). A local file must still be the regular file, of the size and
        mtime, that was listed (else ``LookupFailed(409)``): never a FIFO, which would hang the request.
        A remote file loaded by this server comes from the copy its loader kept in the parse cache; otherwise it
        is opened with the credentials the listing used and streamed. A missing file raises ``OSError``; a store
        that refuses or cannot be reached raises ``LookupFailed(502)`` with the reason.
        """
        from .loader.source import Unreadable, open_source

        cached = self.scheduler.cached_source(trace_file)
        if cached is not None:
            return open(cached, "rb")
        if not trace_file.is_remote:
            return _open_listed_local(trace_file)
        try:
            stream, _ = open_source(trace_file.url, trace_file.access)
        except Unreadable as err:  # the store refused or cannot be reached: a message, never a 500
            raise LookupFailed(502, str(err)) from None
        return stream

    def trace(self, run: str, worker: str, span: str) -> LoadedTrace:
        """The loaded model of one span; 409 while it loads, 422 when it failed (with the reason)."""
        f = self.file(run, worker, span)
        loaded = self._loaded(f)
        if isinstance(loaded, LoadedTrace):
            return loaded
        if loaded == FAILED:
            status = self.scheduler.status(f.key)
            raise LookupFailed(422, (status.error if status else None) or f"{f.filename} failed to load")
        raise LookupFailed(409, f"{f.filename} is still loading; try again when its state is 'ready'")

    def _loaded(self, f: TraceFile) -> LoadedTrace | str:
        """The file's trace once it is ready, else its state: ``FAILED``, or ``LOADING`` (queued ones too). While a
        rewritten file loads again, the trace of its last good parse (with the file version it was parsed from)."""
        status = self.scheduler.status(f.key)
        serving = self.scheduler.serving(f.key)
        if status is not None and status.state == FAILED:
            return FAILED
        if serving is None or status is None or status.state != READY:
            return LOADING
        return LoadedTrace(*serving)

    def _span_files(self, run: str, span: str) -> list[TraceFile]:
        """The files of one span of a run, sorted by worker: 404 when the run or the span is unknown."""
        files = self._run_files(run)
        if not files:
            raise LookupFailed(404, f"unknown run {run!r}")
        files = sorted((f for f in files if f.span == span), key=lambda f: f.worker)
        if not files:
            raise LookupFailed(404, f"run {run!r} has no span {span!r}")
        return files

    def exports_of(self, loaded: LoadedTrace) -> tuple[list[ExportEntry], list[ExportEntry]]:
        """(exports that belong to this trace, exports beside it that could not be read).

        An export belongs to a trace when it sits in the trace's run folder or in a folder holding no trace (an
        ``exports/`` folder beside the runs), and its times fall in the trace's time range (µs since the epoch
        against the trace's ``baseTimeNanoseconds`` + ``ts``): a folder of several spans gets each export right.
        """
        with self._lock:
            entries = list(self._exports.values())
            runs = {f.run for f in self._files.values()}
        near = [e for e in entries if e.file.folder == loaded.file.run or e.file.folder not in runs]
        mine = [e for e in near if e.export is not None and export_overlap(loaded.model, e.export) > 0]
        broken = [e for e in near if e.error is not None and e.file.folder == loaded.file.run]
        return mine, broken

    def span_label(self, run: str, span: str) -> str:
        """The label (``1``) of a span of a run named by its label or by one of its files' stamps."""
        files = self._run_files(run)
        if any(f.span == span for f in files):
            return span
        return next((f.span for f in files if f.stamp is not None and str(f.stamp) == span), span)

    def traces_of_run(self, run: str) -> list[LoadedTrace]:
        """Every span of a run whose model is loaded (views that look across spans or workers use this); a
        preprocessed span whose model was not opened yet is not opened for this."""
        files = self._run_files(run)
        if not files:
            raise LookupFailed(404, f"unknown run {run!r}")
        out = []
        for f in files:
            serving = self.scheduler.serving(f.key, open_lazy=False)  # with the file version it was parsed from
            if serving is not None:
                out.append(LoadedTrace(*serving))
        return out

    def views_of_run(self, run: str) -> list[str]:
        """The views a run offers: from its loaded models, and the lists in its preprocessed spans' summaries
        (no model is opened to answer); the Memory view too where the run has allocator snapshots."""
        snapshots = bool(self.snapshots.by_run().get(run))
        if snapshots and not self._run_files(run):
            return ["Memory"]  # a folder of allocator snapshots only: the Memory view's snapshot mode
        loaded = self.traces_of_run(run)
        files = self._run_files(run)
        lists = [available_views([t.model for t in loaded])] + [["Memory"]] * snapshots
        lists += [s.views for f in files if (s := self._preprocessed_summary(f)) is not None]
        return merge_views(lists)

    def span_summaries(self, run: str, span: str) -> list[tuple[TraceFile, RankSummary]]:
        """The rank summary of every ready worker of one span: read from its preprocessed cache entry, or computed
        from its loaded model. What the job-level views read: no model is opened for them."""
        files = [f for f in self._run_files(run) if f.span == span]
        return [(f, summary) for f in files if (summary := self._summary(f, open_lazy=False)) is not None]

    def span_ranks(self, run: str, span: str) -> SpanSummaries:
        """Every worker's summary of one span (the job-level Distributed view): 404 when the run or the span is
        unknown, 409 while any worker still loads (the answer would change), 422 when none loaded; the failed
        workers are named. A preprocessed worker's summary comes from its cache entry: no model is opened for it."""
        files = self._span_files(run, span)
        self._read_summaries(files)
        ranks: list[tuple[TraceFile, RankSummary]] = []
        failed: list[str] = []
        loading = 0
        for f in files:
            status = self.scheduler.status(f.key)
            if status is not None and status.state == FAILED:
                failed.append(f.worker)
                continue
            summary = self._summary(f, open_lazy=True) if status is not None and status.state == READY else None
            if summary is None:
                loading += 1
            else:
                ranks.append((f, summary))
        if loading:
            raise LookupFailed(409, f"{loading} of the {len(files)} workers of span {span} are still loading")
        if not ranks:
            raise LookupFailed(422, f"no worker of span {span} could be loaded")
        return SpanSummaries(ranks, failed)

    def _after_ready(self, f: TraceFile) -> None:
        """A trace turned ready (on the scheduler's background thread): when it was the last rank of its span to
        load, build the job's summary now, so that the first Overview of any rank reads it instead of computing it
        (and every rank's summary: stored by the loader, or computed here once)."""
        files = [g for g in self._run_files(f.run) if g.span == f.span]
        if len(files) < 2:
            return
        statuses = [self.scheduler.status(g.key) for g in files]
        if any(s is None or s.state not in (READY, FAILED) for s in statuses):
            return
        ranks = self.span_summaries(f.run, f.span)
        if len(ranks) > 1:
            job_of(ranks)

    def _summary(self, f: TraceFile, open_lazy: bool) -> RankSummary | None:
        """The rank summary of a ready file: the preprocessed one (read once), else computed from its loaded model
        (a preprocessed model is opened for it only with ``open_lazy``); None while neither is at hand."""
        summary = self._preprocessed_summary(f)
        if summary is not None:
            return summary
        model = self.scheduler.model(f.key, open_lazy=open_lazy)
        return rank_summary(model, f.worker) if model is not None else None

    def _run_files(self, run: str) -> list[TraceFile]:
        """The files of one run, copied under the lock (the scan thread replaces the listing)."""
        with self._lock:
            return [f for f in self._files.values() if f.run == run]

    def _read_summaries(self, files: list[TraceFile]) -> None:
        """Read the preprocessed summaries of ``files`` not read yet (the scheduler's one background thread may still
        be at it) on threads: a request sent as 1,024 ranks turn ready reads most of them itself, 1.8 s one after the
        other; threads help only where Parquet's C++ reader runs without the GIL (benchmarks/README.md)."""
        ready = [f for f in files if (s := self.scheduler.status(f.key)) is not None and s.state == READY
                 and (e := self.scheduler.preprocessed(f.key)) is not None and (e, f.key[1]) not in self._summaries]
        if len(ready) > 1:
            with ThreadPoolExecutor(SUMMARY_READERS) as pool:
                list(pool.map(self._preprocessed_summary, ready))

    def _preprocessed_summary(self, f: TraceFile) -> RankSummary | None:
        """The summary stored with a preprocessed span (read once), or None (also when its entry turns out damaged:
        the file is then parsed here, and its summary computed from the model)."""
        entry = self.scheduler.preprocessed(f.key)
        if entry is None:
            return None
        try:
            return self._read_summary(f.key, entry)
        except Exception as err:  # noqa: BLE001 - a damaged entry is a miss, never a 500
            self.scheduler.reparse(f.key, f"its rank summary cannot be read ({err})")
            return None

    def _read_summary(self, key: Any, entry: Path) -> RankSummary:
        """The summary in ``entry`` of the span ``key`` (read once, from a verified copy of its files; the
        scheduler calls this as it turns ready)."""
        from .jobs.shared import SUMMARY_FILES
        from .scaleout.summaries import read_summary

        worker = key[1]

        def read() -> RankSummary:
            return read_summary(self.scheduler.cache.open(entry, SUMMARY_FILES).files, worker)

        return compute_once(self._summaries, self._summaries_computing, (entry, worker), read)


def _first_of_each(busy: list[tuple[int, str, TraceFile]]) -> list[tuple[int, str, TraceFile]]:
    """Loading (then queued) spans and failed ones, each by run name, at most :data:`ATTENTION_SPANS` of each."""
    ordered = sorted(busy, key=lambda b: (b[0], b[1]))
    return [b for b in ordered if b[0] < 2][:ATTENTION_SPANS] + [b for b in ordered if b[0] == 2][:ATTENTION_SPANS]


def _decode_export(f: ExportFile) -> ExportEntry:
    if f.size > MAX_EXPORT_BYTES:
        return ExportEntry(f, None, f"{f.filename}: {f.size / 2**20:,.0f} MiB is more than the "
                                    f"{MAX_EXPORT_BYTES >> 20} MiB a memory timeline export is read up to")
    try:
        return ExportEntry(f, load_export(f.url, f.kind, f.access), None)
    except ExportError as err:
        return ExportEntry(f, None, str(err))
    except MemoryError:
        return ExportEntry(f, None, f"{f.filename}: not enough memory to read it")


def _open_listed_local(trace_file: TraceFile) -> Any:
    """Open a local trace file only if it is still the regular file, of the size and mtime, that was listed: a
    link retargeted since (to ``/etc/passwd``, to a FIFO) is refused, not served."""
    from .catalog.storage import NotRegularFile, open_local

    changed = f"{trace_file.filename} changed since it was loaded; try again when its state is 'ready'"
    try:
        stream, st = open_local(trace_file.url)
    except NotRegularFile as err:
        raise LookupFailed(409, f"{changed} (it is {err.strerror} now)") from None
    if (st.st_size, st.st_mtime) != (trace_file.size, trace_file.mtime):
        stream.close()
        raise LookupFailed(409, changed)
    return stream


def _folder_of(url: str) -> str:
    """The folder of a listed file: a local path split as the OS splits it, a URL at its last ``/``."""
    if remote.is_url(url):
        return url.rsplit("/", 1)[0]
    return str(Path(url).parent)


def _by_stamp(files: Iterable[TraceFile], run: str, worker: str, stamp: str) -> TraceFile | None:
    """A worker's file whose name carries ``stamp`` (a span's stable key); a label match is looked up first."""
    return next((f for f in files if f.run == run and f.worker == worker and f.stamp is not None
                 and str(f.stamp) == stamp), None)
