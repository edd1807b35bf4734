"""The workspace itself: the files listed, kept in step with the loader, behind one object the API can ask; its
parts each own one seam (the logdirs' listing: ``scan``; the runs' listing: ``listing``; memory timeline exports:
``exports``; allocator snapshots: ``snapshots``; rank summaries and the job's answer: ``summaries``)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ..analysis.rank_summary import RankSummary
from ..analysis.views import available_views, merge_views
from ..catalog import remote
from ..catalog.catalog import CaptureFolder, TraceFile
from ..jobs.cache import ParseCache, Stored
from ..jobs.scheduler import DEFAULT_LOAD_TIMEOUT, FAILED, LOADING, READY, LoadScheduler, Runner
from ..jobs.shared import SharedCache
from ..model.tables import TraceModel
from ..timeline.stored import StoredIndex
from . import listing as runs_listing
from .base import Key, LoadedTrace, LookupFailed, SpanSummaries
from .exports import ExportEntry, Exports
from .scan import LogdirScanner
from .snapshots import Snapshots
from .summaries import RankSummaries

log = logging.getLogger(__name__)


class Workspace:
    def __init__(self, roots: list[tuple[str | None, str]], *, cache_dir: str | None = None,
                 workers: int | None = None, rescan_seconds: float = 10.0, cache_max_bytes: int = 4 << 30,
                 on_ready: Callable[[TraceModel], None] | None = None,
                 load_timeout: float | None = DEFAULT_LOAD_TIMEOUT, any_json: bool = False,
                 dask_scheduler: str | None = None, dask_timeout: float = 10.0, stored: Stored | None = None) -> None:
        """``cache_dir``: a local folder, or a URL of a shared cache that ``preprocess`` filled (models are then
        copied into the default local cache when opened); ``dask_scheduler``: parse on that Dask cluster, into the
        shared cache, instead of in local processes (``dask_timeout``: seconds to wait for it to answer);
        ``stored``: what the loader processes compute and store beside each parse (default: the Trace view's index;
        the plugin passes the first views' answers too)."""
        self._scanner = LogdirScanner(roots, any_json)
        self.rescan_seconds = rescan_seconds
        self._setup_errors: list[str] = []  # the shared cache or the Dask cluster could not be used
        if cache_dir and cache_dir.lower().startswith("file://"):
            cache_dir = cache_dir[len("file://"):]
        shared = self._shared_cache(cache_dir)
        # a cache on another store is copied into the default local cache, where models are memory-mapped from
        cache = ParseCache(None if cache_dir and remote.is_url(cache_dir) else cache_dir, cache_max_bytes)
        if cache.problem is not None:
            self._setup_errors.append(cache.problem)
        runner = self._runner(dask_scheduler, shared.url if shared is not None else str(cache.directory),
                              dask_timeout)
        # the scheduler reads each preprocessed summary as it turns ready, and tells of each trace loaded (the
        # job's answer is built when a span's last rank is ready); no job is asked for before the first scan
        self.scheduler = LoadScheduler(cache, workers, on_ready=on_ready, load_timeout=load_timeout, shared=shared,
                                       runner=runner,
                                       on_preprocessed=lambda key, entry: self.summaries.read(key, entry),
                                       stored=stored if stored is not None else StoredIndex(),
                                       on_loaded=lambda f: self.summaries.after_ready(f))
        self.summaries = RankSummaries(self.scheduler, self._run_files)
        self._files: dict[Key, TraceFile] = {}
        self.exports = Exports()
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

    def _runner(self, address: str | None, cache_url: str, timeout: float) -> Runner | None:
        if not address:
            return None
        from ..scaleout.executors import DaskRunner

        try:
            return DaskRunner(address, cache_url, timeout)
        except Exception as err:  # noqa: BLE001 - Dask missing, the scheduler unreachable: parse locally instead
            self._setup_errors.append(f"cannot use the Dask scheduler {address}: {err}; traces are parsed here")
            return None

    @property
    def logdir_display(self) -> str:
        # a SAS token in a logdir URL's query string is a credential: never shown
        return ",".join(f"{n}:{p}" if n else p for n, p in ((n, remote.scrub_url(p)) for n, p in self._scanner.roots))

    @property
    def _summaries(self) -> dict[Any, RankSummary]:
        """The preprocessed summaries read, by (entry, worker) (tests read which were)."""
        return self.summaries.read_ones

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
    def scan_once(self) -> None:
        catalog, files = self._scanner.scan()
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
            self.summaries.forget_all_but(e for key in fresh if (e := self.scheduler.preprocessed(key)) is not None)
        self.exports.update(catalog.exports)
        self.snapshots.update(catalog.snapshots)
        self._scanned.set()

    def _scan_loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.scan_once()
            except Exception as err:  # noqa: BLE001 - the scan thread must survive; the message holds no secret
                log.error("scanning the logdir failed: %s", remote.scrub(f"{type(err).__name__}: {err}"))
                self._scanned.set()
            if self.rescan_seconds <= 0 and not self._scanner.pending:
                return
            delay = self.rescan_seconds if self.rescan_seconds > 0 else 2.0
            if self._scanner.pending:
                delay = min(delay, 2.0)
            self._stop.wait(delay)

    # ---- the listing ------------------------------------------------------------------------------------------
    def has_roots(self) -> bool:
        return bool(self._scanner.roots)

    def has_runs(self) -> bool:
        return bool(self._files) or bool(self.snapshots.by_run())

    def scanning(self) -> bool:
        return not self._scanned.is_set()

    def errors(self) -> list[str]:
        return self._setup_errors + self._scanner.errors()

    def listing(self) -> list[dict[str, Any]]:
        """Runs → workers → spans with their load state, sorted for people (spans numerically), and each run's
        allocator snapshots (a folder of snapshots only is a run without workers)."""
        grouped, statuses, snapshots = self._grouped(), self.scheduler.statuses(), self.snapshots.by_run()
        return [runs_listing.run_entry(run, grouped.get(run, {}), statuses, snapshots)
                for run in sorted(set(grouped) | set(snapshots))]

    def listing_of(self, run: str) -> dict[str, Any] | None:
        grouped, snapshots = self._grouped(run), self.snapshots.by_run()
        if run not in grouped and run not in snapshots:
            return None
        return runs_listing.run_entry(run, grouped.get(run, {}), self.scheduler.statuses(), snapshots)

    def runs_page(self, limit: int, offset: int = 0, query: str = "", run: str | None = None) -> dict[str, Any]:
        """A page of the listing, for logdirs of thousands of runs (see :func:`runs_listing.runs_page`)."""
        return runs_listing.runs_page(self._grouped(), self.scheduler.statuses(), self.snapshots.by_run(), limit,
                                      offset, query, run)

    def _grouped(self, only: str | None = None) -> runs_listing.Grouped:
        """The listed files by run and worker (of one run, given ``only``)."""
        with self._lock:
            files = [f for f in self._files.values() if only is None or f.run == only]
        return runs_listing.grouped(files)

    def capture_folders(self) -> dict[str, CaptureFolder]:
        """Every run folder a capture request may go to, by run name: the folders of the runs listed (a job may
        write into them) and the folders where a running job announced itself (``.capture/listener-*.json``),
        with or without traces yet. Names come from the listing only, so a request can name no other folder."""
        with self._lock:
            files = list(self._files.values())
        catalog = self._scanner.catalog
        found = dict(catalog.capture) if catalog is not None else {}
        for f in files:
            if f.run not in found:
                found[f.run] = CaptureFolder(f.run, _folder_of(f.url), f.access)
        return found

    # ---- one span's file and trace ------------------------------------------------------------------------------
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
        from ..loader.source import Unreadable, open_source

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

    def exports_of(self, loaded: LoadedTrace) -> tuple[list[ExportEntry], list[ExportEntry]]:
        """(exports that belong to this trace, exports beside it that could not be read): see :meth:`Exports.of`."""
        with self._lock:
            runs = {f.run for f in self._files.values()}
        return self.exports.of(loaded, runs)

    # ---- a run's spans ------------------------------------------------------------------------------------------
    def _run_files(self, run: str) -> list[TraceFile]:
        """The files of one run, copied under the lock (the scan thread replaces the listing)."""
        with self._lock:
            return [f for f in self._files.values() if f.run == run]

    def _span_files(self, run: str, span: str) -> list[TraceFile]:
        """The files of one span of a run, sorted by worker: 404 when the run or the span is unknown."""
        files = self._run_files(run)
        if not files:
            raise LookupFailed(404, f"unknown run {run!r}")
        files = sorted((f for f in files if f.span == span), key=lambda f: f.worker)
        if not files:
            raise LookupFailed(404, f"run {run!r} has no span {span!r}")
        return files

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
        lists += [s.views for f in files if (s := self.summaries.preprocessed(f)) is not None]
        return merge_views(lists)

    def span_summaries(self, run: str, span: str) -> list[tuple[TraceFile, RankSummary]]:
        """The rank summary of every ready worker of one span: read from its preprocessed cache entry, or computed
        from its loaded model. What the job-level views read: no model is opened for them."""
        return self.summaries.of_span(run, span)

    def span_ranks(self, run: str, span: str) -> SpanSummaries:
        """Every worker's summary of one span (the job-level Distributed view): 404 when the run or the span is
        unknown, 409 while any worker still loads (the answer would change), 422 when none loaded; the failed
        workers are named. A preprocessed worker's summary comes from its cache entry: no model is opened for it."""
        return self.summaries.ranks(self._span_files(run, span), span)


def _open_listed_local(trace_file: TraceFile) -> Any:
    """Open a local trace file only if it is still the regular file, of the size and mtime, that was listed: a
    link retargeted since (to ``/etc/passwd``, to a FIFO) is refused, not served."""
    from ..catalog.storage import NotRegularFile, open_local

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
