"""Runs parse jobs in at most N worker processes and tracks each file's state for ``/runs``.

A process per file, not a shared pool: a worker that crashes or is killed for memory fails only its own file
(a broken ``ProcessPoolExecutor`` would fail every queued file). On Linux the processes come from a fork server
that has already imported the loader, so each start costs milliseconds.

Scale-out (additive; without it nothing changes): an entry that was preprocessed (its rank summary beside the
model, ``pytorch-tb-profiler preprocess``) is *ready* without opening its model, which is memory-mapped on first
use only, so a 1,024-rank job costs the server its summaries, not its models. With a ``shared`` cache on another
store, complete entries are found by one listing per scan and their summaries copied in, their models when opened.
With a ``runner`` (a Dask cluster), parses run on the cluster's workers, which publish into the shared cache.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import queue
import signal
import sys
import threading
import time
import types
from collections.abc import Callable, Hashable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any, Protocol

from ..catalog.catalog import TraceFile
from ..model.tables import MODEL_FILES, TraceModel, model_of
from . import budget, entries
from .cache import SOURCE_FILE, ParseCache, Stored
from .shared import SUMMARY_FILES, SharedCache

log = logging.getLogger(__name__)

QUEUED, LOADING, READY, FAILED = "queued", "loading", "ready", "failed"

# How long one load may take before it is stopped and its span fails (``--profiler_load_timeout``). A 2 GB trace
# loads in well under a minute on 2 cores; a load that takes this long is stuck (a stalled network mount or store)
# and would hold one of the few loader slots for good.
DEFAULT_LOAD_TIMEOUT = 600.0


def default_workers() -> int:
    return budget.loader_slots()


@contextlib.contextmanager
def _main_module_hidden() -> Iterator[None]:
    """Start processes without re-running the parent's ``__main__`` in them.

    spawn and forkserver re-import the parent's main script in each child; under the ``tensorboard`` CLI that
    imports all of TensorBoard (seconds per worker), and from a notebook or stdin it fails outright. The worker
    needs nothing from ``__main__``, so it is swapped for an empty module while the process starts.
    """
    real = sys.modules["__main__"]
    sys.modules["__main__"] = types.ModuleType("__main__")
    try:
        yield
    finally:
        sys.modules["__main__"] = real


def _context(stored: Stored | None = None) -> Any:
    """Processes from a fork server that has imported the worker (and the module of what it stores beside the
    parse: the analyses the first views need), so a worker starts without importing them."""
    if sys.platform.startswith("linux"):
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(["tb_plugin.jobs.worker", *([type(stored).__module__] if stored else [])])
        return ctx
    return multiprocessing.get_context("spawn")


@dataclass
class _Job:
    # the file version this job loads (its ``access``: the credentials the worker opens it with; its ``problem``:
    # why the listing already knows it cannot be loaded, then it never takes a slot)
    file: TraceFile
    entry: Path
    state: str = QUEUED
    error: str | None = None
    model: TraceModel | None = None
    progress: Any = None  # a shared double while the worker runs
    process: Any = None
    conn: Connection | None = None
    done_progress: float = 0.0
    started: float = 0.0  # time.monotonic() when its loader process started
    lazy: bool = False  # preprocessed: ready with its summary; the model is opened on first use
    fetching: bool = False  # its model is being copied from the shared cache
    remote_result: tuple[bool, str | None] | None = None  # a runner's answer: (ok, reason)
    # the last good parse of an earlier version of the file, served until this version is ready (or fails)
    previous: tuple[TraceFile, TraceModel] | None = None
    cache_failures: int = 0  # its entry failed the check when opened: parsed again (a few times at most)
    looked: bool = False  # its entry was looked for in the cache
    skip_cache: bool = False  # its entry is damaged and could not be removed (being read): parse, do not open it
    after: _After | None = None  # its loader process, still computing views after the trace turned ready


@dataclass
class _After:
    """A loader process that answered (the trace is ready) and goes on computing the views it left for after
    ready (``cache.Later``): it tells of each part on ``conn`` as it lands in the entry."""

    process: Any
    conn: Connection
    started: float
    parts: set[str]


class Runner(Protocol):
    """Parses on other machines (``scaleout.executors.DaskRunner``): the result lands in the shared cache."""

    description: str

    def submit(self, file: TraceFile, done: Callable[[bool, str | None], None]) -> None: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class JobStatus:
    state: str
    progress: float
    error: str | None
    # READY with the last good parse of an earlier version while this one loads (``progress`` is the new one's)
    updating: bool = False


# Files of an entry the model does not need when opened (the others, beyond the model's own, are what ``Stored``
# wrote: opened with the model, dropped alone when damaged).
_NOT_MODEL = frozenset({SOURCE_FILE, *SUMMARY_FILES})
# A file version whose fresh parse fails the check this often when opened (a cache folder that corrupts what is
# written) fails with the reason instead of being parsed forever.
MAX_CACHE_FAILURES = 3


class LoadScheduler:
    """Parses files in the background; ``status`` and ``model`` answer at once and never wait for parsing."""

    def __init__(self, cache: ParseCache, max_workers: int | None = None,
                 on_ready: Callable[[TraceModel], None] | None = None,
                 load_timeout: float | None = DEFAULT_LOAD_TIMEOUT, shared: SharedCache | None = None,
                 runner: Runner | None = None,
                 on_preprocessed: Callable[[Hashable, Path], object] | None = None,
                 stored: Stored | None = None, on_loaded: Callable[[TraceFile], None] | None = None) -> None:
        self.cache = cache
        self.stored = stored
        self.shared = shared
        self.runner = runner
        self._shared_done: set[str] = set()
        self._open_lock = threading.Lock()
        self._parsed_here = 0  # loader processes started
        self._parsed_remote = 0  # parses submitted to the runner
        self._fetcher = ThreadPoolExecutor(2, thread_name_prefix="pytorch-profiler-fetch") if shared else None
        # reads each preprocessed entry's summary as it turns ready, so the first job-level answer reads none
        self._on_preprocessed = on_preprocessed
        self._summary_reader = ThreadPoolExecutor(1, thread_name_prefix="pytorch-profiler-summaries")
        self.load_timeout = load_timeout or None  # seconds; None or 0: no limit
        # after each model is open (on one background thread): ``on_ready`` with the model, then ``on_loaded`` with
        # its file (the workspace builds a job's summary once its last rank is ready)
        self._warm = _Warmer(on_ready, on_loaded) if on_ready is not None or on_loaded is not None else None
        self.max_workers = max(1, max_workers or default_workers())
        self._ctx = _context(stored)
        self._jobs: dict[Hashable, _Job] = {}
        self._lock = threading.Lock()
        self._wake_r, self._wake_w = self._ctx.Pipe(duplex=False)
        self._closed = False
        self._thread = threading.Thread(target=self._loop, name="pytorch-profiler-loader", daemon=True)
        self._thread.start()

    # ---- requests -------------------------------------------------------------------------------------------
    def request(self, file: TraceFile) -> None:
        """Make sure ``file.key`` shows this exact file version; a changed file is parsed again.

        ``file.access`` (a picklable ``catalog.storage.Access``) carries the credentials and endpoints the listing
        used, so the worker process opens a remote file the same way. ``file.problem`` (the listing found it is not
        a regular file) fails the span at once with that reason, without a loader process.
        """
        with self._lock:
            job = self._jobs.get(file.key)
            if job is not None and job.file == file:
                return
            previous = None
            if job is not None:
                self._stop(job)
                if job.file.url == file.url:  # the same file, rewritten (not another file at this position)
                    previous = (job.file, job.model) if job.model is not None else job.previous
            job = _Job(file=file, entry=self.cache.entry(file.identity))
            if file.problem is not None:
                job.state, job.error = FAILED, f"{file.filename}: {file.problem}; it is not loaded"
            else:  # a file rewritten in place: its last good parse is served until the new one is ready
                job.previous = previous
            self._jobs[file.key] = job
        self._wake()

    def forget(self, key: Hashable) -> None:
        with self._lock:
            job = self._jobs.pop(key, None)
            if job is not None:
                self._stop(job)

    def status(self, key: Hashable) -> JobStatus | None:
        with self._lock:
            job = self._jobs.get(key)
            return self._status_of(job) if job is not None else None

    @staticmethod
    def _status_of(job: _Job) -> JobStatus:
        progress = job.done_progress
        if job.state == LOADING and job.progress is not None:
            progress = float(job.progress.value)
        if job.previous is not None and job.state in (QUEUED, LOADING):
            return JobStatus(READY, round(progress, 3), None, updating=True)
        return JobStatus(job.state, round(progress, 3), job.error)

    def statuses(self) -> dict[Hashable, JobStatus]:
        """Every file's status at once (one lock for a listing of thousands of files)."""
        with self._lock:
            return {key: self._status_of(job) for key, job in self._jobs.items()}

    def cached_source(self, file: TraceFile) -> Path | None:
        """The cached original bytes of a loaded remote file version (the one a span shows: the last good one
        while a rewritten file loads again), if its worker kept them and they are as it wrote them (size and
        CRC-32 against the entry's manifest: the download must be the file, not a damaged copy of it)."""
        entry = self.cache.entry(file.identity)
        problem = entries.verify(entry, (SOURCE_FILE,))
        if problem is None:
            return entry / SOURCE_FILE
        if (entry / SOURCE_FILE).exists():
            log.warning("not serving the cached copy of %s: %s", file.filename, problem)
        return None

    def model(self, key: Hashable, open_lazy: bool = True) -> TraceModel | None:
        """The loaded model; a preprocessed one is opened now (``open_lazy``), or its copy from the shared cache
        started (then None until it is here: the caller answers "still loading")."""
        with self._lock:
            job = self._jobs.get(key)
            if job is not None and job.model is None and job.previous is not None:
                return job.previous[1]
            if job is None or job.model is not None or not (open_lazy and job.lazy and job.state == READY):
                return job.model if job is not None else None
            fetching = job.fetching
        if not fetching and self.cache.has(job.entry):
            return self._open_lazy(job)
        with self._lock:
            if self._fetcher is not None and not job.fetching:
                job.fetching = True
                self._fetcher.submit(self._fetch_model, job)
        return None

    def serving(self, key: Hashable, open_lazy: bool = True) -> tuple[TraceFile, TraceModel] | None:
        """The file version whose parse answers for ``key`` now, and that parse: the listed version once ready,
        the last good one while a rewritten file loads again (None while neither is at hand; a preprocessed model
        is opened for it with ``open_lazy``, as :meth:`model` does)."""
        model = self.model(key, open_lazy)
        with self._lock:
            job = self._jobs.get(key)
            if job is None or model is None:
                return None
            if job.model is model:
                return (job.file, model) if job.state == READY else None
            return job.previous if job.previous is not None and job.previous[1] is model else None

    def preprocessed(self, key: Hashable) -> Path | None:
        """The cache entry holding this ready file's rank summary, if it was preprocessed."""
        with self._lock:
            job = self._jobs.get(key)
            return job.entry if job is not None and job.state == READY and job.lazy else None

    def reparse(self, key: Hashable, reason: str) -> None:
        """The preprocessed entry of ``key`` cannot be read (its summary failed the check): remove it and parse the
        file here (a miss, as for any damaged entry)."""
        with self._lock:
            job = self._jobs.get(key)
        if job is None or not job.lazy:
            return
        self._damaged(job, reason)
        with self._lock:
            job.lazy, job.model, job.state, job.done_progress = False, None, QUEUED, 0.0
        self._wake()

    def counts(self) -> dict[str, int]:
        """How the files were made ready (for logs, tests and benchmarks): parsed here, parsed on the cluster,
        ready from a preprocessed summary, and models open now."""
        with self._lock:
            jobs = list(self._jobs.values())
            return {"parsed_here": self._parsed_here, "parsed_remote": self._parsed_remote,
                    "preprocessed": sum(1 for j in jobs if j.lazy),
                    "models_open": sum(1 for j in jobs if j.model is not None)}

    def shared_url(self) -> str | None:
        return self.shared.url if self.shared is not None else None

    def refresh_shared(self) -> None:
        """List the shared cache's complete entries (once per scan: one listing, whatever the number of files)."""
        if self.shared is None:
            return
        done = self.shared.done()
        with self._lock:
            self._shared_done = done
        self._wake()

    def close(self) -> None:
        self._closed = True
        if self.runner is not None:
            self.runner.close()
        self._summary_reader.shutdown(wait=False, cancel_futures=True)
        if self._fetcher is not None:
            self._fetcher.shutdown(wait=False, cancel_futures=True)
        with self._lock:
            for job in self._jobs.values():
                self._stop(job)
        self._wake()
        self._thread.join(timeout=5)

    # ---- the loop ---------------------------------------------------------------------------------------------
    def _wake(self) -> None:
        with contextlib.suppress(OSError):
            self._wake_w.send(None)

    def _stop(self, job: _Job) -> None:
        if job.process is not None and job.process.is_alive():
            job.process.kill()
        if job.conn is not None:
            job.conn.close()
        job.process, job.conn = None, None
        if job.after is not None:
            self._end_after(job)

    def _end_after(self, job: _Job) -> None:
        """Stop ``job``'s loader process computing views after ready (or take in its end): the parts that did not
        land are computed by the server on first use."""
        after, job.after = job.after, None
        if after is None:
            return
        if after.process.is_alive():
            after.process.kill()
        after.conn.close()
        if job.model is not None and self.stored is not None and after.parts:
            self.stored.abandon(job.model, after.parts)

    def _loop(self) -> None:
        while not self._closed:
            self._start_jobs()
            with self._lock:
                loading = [job for job in self._jobs.values() if job.state == LOADING and job.process is not None]
            # A worker's answer (its conn) arrives before the process has exited: the exit frees the inflated
            # trace (gigabytes for a large one), which the span need not wait for. Its sentinel tells of a death.
            running = {job.process.sentinel: job for job in loading}
            running.update({job.conn: job for job in loading if job.conn is not None})
            with self._lock:
                later = [job for job in self._jobs.values() if job.after is not None]
            views = {obj: job for job in later if job.after is not None
                     for obj in (job.after.conn, job.after.process.sentinel)}
            ready = wait([self._wake_r, *running, *views], timeout=self._next_deadline(loading))
            if self._wake_r in ready:
                self._drain_wakeups()
            done = {id(job): job for obj, job in running.items() if obj in ready}  # conn and sentinel: once
            for job in done.values():
                self._finish(job)
            for job in {id(job): job for obj, job in views.items() if obj in ready}.values():
                self._take_parts(job)
            self._collect_remote()
            self._expire()

    def _next_deadline(self, running: Iterable[_Job]) -> float:
        """Seconds the loop may sleep: at most 1, less when a load's time limit runs out sooner."""
        if self.load_timeout is None:
            return 1.0
        now = time.monotonic()
        return max(0.0, min([1.0, *(job.started + self.load_timeout - now for job in running)]))

    def _expire(self) -> None:
        """Stop loads that ran past the time limit: their span fails with the reason and the slot is free. Views
        computed after ready past it are stopped too (the server computes them on first use)."""
        if self.load_timeout is None:
            return
        now = time.monotonic()
        with self._lock:
            for job in self._jobs.values():
                if job.after is not None and now - job.after.started > self.load_timeout:
                    log.warning("stopped computing the views of %s after %g s: computed on first use",
                                job.file.filename, self.load_timeout)
                    self._end_after(job)
            for job in self._jobs.values():
                if job.state == LOADING and job.process is not None and now - job.started > self.load_timeout:
                    self._stop(job)
                    _fail(job, f"{job.file.filename}: loading took longer than {self.load_timeout:g} s and was "
                               "stopped (is the file on a stalled mount or store? the limit is "
                               "--profiler_load_timeout)")

    def _drain_wakeups(self) -> None:
        while self._wake_r.poll():
            self._wake_r.recv()

    def _start_jobs(self) -> None:
        """Open what the cache holds and start loader processes while slots are free. Each job's entry is looked
        for once, when the job is first seen (so thousands of queued files cost no file system call per turn of the
        loop), and again only when something may have put it there (a cluster's parse)."""
        with self._lock:
            queued = [job for job in self._jobs.values() if job.state == QUEUED]
            busy = sum(1 for job in self._jobs.values() if job.state == LOADING and not job.lazy)
            waiting = sum(1 for job in self._jobs.values() if job.state in (LOADING, QUEUED) and not job.lazy)
            shared_done = self._shared_done
        adopt = []
        preprocessed = 0
        for job in queued:
            if not job.looked and not job.skip_cache:
                job.looked = True
                failure = self.cache.failure(job.entry)
                if failure is not None:  # this file version failed before, for a reason that does not change
                    with self._lock:
                        _fail(job, failure)
                    continue
                if self.cache.has_summary(job.entry):
                    self._ready_lazy(job)
                    preprocessed += 1
                    continue
                if self.cache.has(job.entry) and self._open_cached(job):
                    continue
            if job.entry.name in shared_done:
                adopt.append(job)
                continue
            if busy >= self.max_workers:
                continue
            self._spawn(job, waiting)
            busy += 1
        if preprocessed:
            log.info("%d traces ready from the preprocessed cache %s without parsing", preprocessed,
                     self.cache.directory)
        if adopt:
            self._adopt(adopt)
            log.info("%d traces ready from the shared cache %s without parsing", len(adopt), self.shared_url())

    def _ready_lazy(self, job: _Job) -> None:
        """A preprocessed entry turns ready once its summary is read (by the summary thread, in arrival order): a
        span that says 'ready' answers the job-level view from memory, never by reading 1,024 files in a request."""
        self.cache.touch(job.entry)
        with self._lock:
            job.lazy = True
            job.state = LOADING if self._on_preprocessed is not None else READY
        if self._on_preprocessed is not None:
            self._summary_reader.submit(self._preprocessed_hook, job)
        else:
            job.done_progress = 1.0

    def _preprocessed_hook(self, job: _Job) -> None:
        assert self._on_preprocessed is not None
        try:
            self._on_preprocessed(job.file.key, job.entry)
        except Exception as err:  # noqa: BLE001 - a damaged entry is a miss: the file is parsed here
            self._damaged(job, f"its rank summary cannot be read ({err})")
            with self._lock:
                job.lazy, job.state = False, QUEUED
            self._wake()
            return
        with self._lock:
            job.state, job.done_progress = READY, 1.0

    def _adopt(self, jobs: list[_Job]) -> None:
        """Copy the summaries of entries complete in the shared cache (one batch); their models wait until used."""
        assert self.shared is not None
        try:
            self.shared.fetch([job.entry.name for job in jobs], self.cache.directory, summary_only=True)
        except Exception as err:  # noqa: BLE001 - the store refused or went away: parse them here instead
            log.warning("cannot copy summaries from the shared cache %s: %s", self.shared.url, err)
            with self._lock:
                self._shared_done = self._shared_done - {job.entry.name for job in jobs}
            return
        for job in jobs:
            if self.cache.has_summary(job.entry):
                self._ready_lazy(job)

    def _open_lazy(self, job: _Job) -> TraceModel | None:
        with self._open_lock:  # one opening per model, however many requests ask at once
            if job.model is None:
                try:
                    model = self._open(job.entry)
                except Exception as err:  # noqa: BLE001 - a damaged entry is a miss: the trace is parsed here
                    self._damaged(job, str(err))
                    with self._lock:
                        job.lazy, job.state, job.done_progress = False, QUEUED, 0.0
                    self._wake()
                    return None
                with self._lock:
                    job.model = model
                if self._warm is not None:
                    self._warm.submit(model, job.file)
        return job.model

    def _fetch_model(self, job: _Job) -> None:
        assert self.shared is not None
        try:
            self.shared.fetch([job.entry.name], self.cache.directory, summary_only=False)
        except Exception as err:  # noqa: BLE001 - the next use tries again; the reason is logged
            log.warning("cannot copy %s from the shared cache: %s", job.file.filename, err)
        finally:
            with self._lock:
                job.fetching = False

    def _open_cached(self, job: _Job) -> bool:
        """Open the entry found in the cache; False when it is damaged (a miss: the file is parsed again)."""
        try:
            model = self._open(job.entry)
        except Exception as err:  # noqa: BLE001 - a damaged cache entry is re-parsed, not fatal
            self._damaged(job, str(err))
            return False
        with self._lock:
            job.model, job.state, job.done_progress = model, READY, 1.0
            job.previous = None
        if self._warm is not None:
            self._warm.submit(model, job.file)
        return True

    def _damaged(self, job: _Job, reason: str) -> None:
        """The job's entry cannot be used: remove it (a miss), or parse without it when another process reads it."""
        self.cache.discard(job.entry, f"{job.file.filename}: {reason}")
        with self._lock:
            job.cache_failures += 1
            job.skip_cache = job.entry.exists()

    def _open(self, entry: Path) -> TraceModel:
        """The model of a cache entry, from a verified private copy of its files (``jobs.entries``; BadEntry when it
        cannot be used), with what the loader process stored beside it (a damaged extra is dropped: it is computed
        again on first use)."""
        opened = self.cache.open(entry, MODEL_FILES, lambda name: name not in _NOT_MODEL)
        for name, reason in opened.dropped.items():
            log.warning("ignoring %s in the cache entry %s: %s", name, entry, reason)
        model = model_of(opened.files)
        if self.stored is not None:
            try:
                self.stored.attach(model, opened.files)
            except Exception as err:  # noqa: BLE001 - see the docstring
                log.warning("ignoring the stored results in %s: %s", entry, err)
            for name in entries.part_names(entry):  # added after the entry was published (views after ready)
                self._attach_part(model, entry, name)
        return model

    def _attach_part(self, model: TraceModel, entry: Path, name: str) -> bool:
        """Give ``model`` the part ``name`` added to its entry after ready, verified on its own; False (it is
        computed on first use) when it cannot be read."""
        assert self.stored is not None
        try:
            self.stored.attach(model, self.cache.open_part(entry, name).files)
        except Exception as err:  # noqa: BLE001 - a damaged part is a miss of that part alone
            log.warning("ignoring the part %s of the cache entry %s: %s", name, entry, err)
            return False
        return True

    def _take_parts(self, job: _Job) -> None:
        """Take in what ``job``'s loader process said since (each part that landed, or failed), and its end: the
        parts that did not land are then computed by the server on first use."""
        after, model = job.after, job.model
        if after is None or model is None or self.stored is None:
            return  # the model is not open yet: _finish takes them in once it is
        ended = False
        try:
            while after.conn.poll():
                kind, part, ok = after.conn.recv()
                if kind == "part" and part in after.parts:
                    after.parts.discard(part)
                    if not (ok and self._attach_part(model, job.entry, part)):
                        self.stored.abandon(model, [part])
        except (EOFError, OSError, ValueError, TypeError):
            ended = True
        if ended or not after.parts or not after.process.is_alive():
            with self._lock:
                if job.after is after:
                    self._end_after(job)
            after.process.join(timeout=5)

    def _spawn(self, job: _Job, loading: int | None = None) -> None:
        """Start the parse of ``job``'s file while ``loading`` files (this one included; counted when not given)
        load or wait."""
        if self.runner is not None:
            self._submit_remote(job)
            return
        from .worker import run_job

        recv, send = self._ctx.Pipe(duplex=False)
        progress = self._ctx.Value("d", 0.0, lock=False)
        if loading is None:
            with self._lock:
                loading = 1 + sum(1 for other in self._jobs.values()
                                  if other is not job and other.state in (LOADING, QUEUED) and not other.lazy)
        parts = budget.parts_for(job.file.size, job.file.url.endswith(".gz"), min(max(1, loading), self.max_workers))
        process = self._ctx.Process(target=run_job, args=(job.file, str(job.entry), progress, send, parts, self.stored),
                                    name="pytorch-profiler-parse", daemon=True)
        with self._lock:
            job.state, job.progress, job.conn = LOADING, progress, recv
        try:
            with _main_module_hidden():
                process.start()
        except Exception as err:  # noqa: BLE001
            with self._lock:
                _fail(job, f"cannot start a loader process: {err}")
            return
        finally:
            send.close()
        with self._lock:
            job.process, job.started = process, time.monotonic()
            self._parsed_here += 1

    def _submit_remote(self, job: _Job) -> None:
        """Parse on the cluster; its answer comes back on a client thread and is taken in by the loop."""
        assert self.runner is not None

        def done(ok: bool, reason: str | None) -> None:
            with self._lock:
                job.remote_result = (ok, reason)
            self._wake()

        with self._lock:
            job.state, job.started, job.remote_result = LOADING, time.monotonic(), None
            self._parsed_remote += 1
        try:
            self.runner.submit(job.file, done)
        except Exception as err:  # noqa: BLE001 - the cluster went away: the span says so
            with self._lock:
                _fail(job, f"{job.file.filename}: cannot submit to {self.runner.description}: {err}")

    def _collect_remote(self) -> None:
        """Parses the cluster finished: ready through the shared cache (queued again, found complete there)."""
        with self._lock:
            finished = [job for job in self._jobs.values() if job.state == LOADING and job.remote_result is not None]
        if not finished:
            return
        if self.shared is not None:
            with contextlib.suppress(Exception):
                self.refresh_shared()
        with self._lock:
            for job in finished:
                ok, reason = job.remote_result or (False, None)
                job.remote_result = None
                if ok:
                    job.state, job.looked = QUEUED, False  # its entry is in the cache now: looked for again
                else:
                    _fail(job, reason or f"{job.file.filename}: the cluster could not parse it")

    def _finish(self, job: _Job) -> None:
        message: tuple[Any, ...] | None = None
        conn = job.conn
        try:
            if conn is not None and conn.poll():
                message = conn.recv()
        except (EOFError, OSError):
            message = None
        process = job.process
        if process is not None and message is None:
            process.join(timeout=5)  # no answer: the exit code says why it died
        with self._lock:
            if job.process is not process:  # replaced or forgotten meanwhile
                return
            later = _later_parts(message)
            if later and conn is not None and process is not None and process.is_alive():
                job.after = _After(process, conn, time.monotonic(), set(later))  # goes on: views after ready
                job.process, job.conn = None, None
            else:
                self._stop(job)
            if message is None:
                code = process.exitcode if process is not None else None
                _fail(job, _death_reason(job.file.filename, code))
                return
            status, payload, *rest = message
            if status != "ok":
                _fail(job, str(payload))
        if status != "ok":
            if rest and rest[0]:  # lasting: the file version fails anywhere; the next start says so at once
                self.cache.remember_failure(job.entry, str(payload))
            return
        try:
            model = self._open(job.entry)
        except Exception as err:  # noqa: BLE001 - damaged between its writing and now: parsed again, twice at most
            self._damaged(job, str(err))
            with self._lock:
                self._end_after(job)
                if job.cache_failures >= MAX_CACHE_FAILURES:
                    _fail(job, f"{job.file.filename}: its parse cannot be read back from the cache folder "
                               f"{self.cache.directory} ({err})")
                else:
                    job.state = QUEUED
            return
        if job.after is not None and self.stored is not None:  # before "ready": no request computes them meanwhile
            self.stored.expect(model, job.file, {p: s for p, s in (_later_parts(message) or {}).items()
                                                 if p in job.after.parts})
        with self._lock:
            job.model, job.state, job.done_progress = model, READY, 1.0
            job.previous = None
        if job.after is not None:
            self._take_parts(job)  # any that landed before the model was opened
        if self._warm is not None:
            self._warm.submit(model, job.file)
        try:
            self.cache.evict(keep=self._needed)
        except OSError as err:  # a full cache is a nuisance; a dead loader thread would hang every later load
            log.warning("cannot trim the parse cache %s: %s", self.cache.directory, err)

    def _needed(self) -> set[Path]:
        """Entries eviction must keep: those whose model is still to be opened (a preprocessed span, ready by its
        summary). An opened model no longer needs its entry (it was copied when opened): a restart parses it again
        if it was evicted."""
        with self._lock:
            return {job.entry for job in self._jobs.values() if job.lazy and job.model is None}


class _Warmer:
    """Runs the callbacks on each newly loaded model in one background thread (e.g. to build the timeline index
    before anyone opens the Trace view), so the loader's loop and requests never wait for them."""

    def __init__(self, on_ready: Callable[[TraceModel], None] | None,
                 on_loaded: Callable[[TraceFile], None] | None) -> None:
        self._on_ready = on_ready
        self._on_loaded = on_loaded
        self._queue: queue.Queue[tuple[TraceModel, TraceFile]] = queue.Queue()
        threading.Thread(target=self._run, name="pytorch-profiler-warm", daemon=True).start()

    def submit(self, model: TraceModel, file: TraceFile) -> None:
        self._queue.put((model, file))

    def _run(self) -> None:
        while True:
            model, file = self._queue.get()
            try:
                if self._on_ready is not None:
                    self._on_ready(model)
                if self._on_loaded is not None:
                    self._on_loaded(file)
            except Exception:
                log.exception("precomputing views of %s failed", model.meta.get("source"))


def _later_parts(message: tuple[Any, ...] | None) -> dict[str, float] | None:
    """The parts a worker's "ok" says it goes on computing after ready, with the seconds each is expected in."""
    if not message or message[0] != "ok" or not isinstance(message[1], dict):
        return None
    later = message[1].get("later")
    return {str(k): float(v) for k, v in later.items()} if isinstance(later, dict) else None


def _fail(job: _Job, reason: str) -> None:
    """The job's file cannot be loaded: its span fails with ``reason`` (an earlier version's parse is no longer
    served: the file as it is now is what the span shows)."""
    job.state, job.error, job.previous = FAILED, reason, None


def _death_reason(name: str, code: int | None) -> str:
    if code is not None and code < 0:
        try:
            signame = signal.Signals(-code).name
        except ValueError:
            signame = f"signal {-code}"
        hint = " (most likely out of memory)" if -code == signal.SIGKILL else ""
        return f"{name}: the loader process was killed by {signame}{hint}"
    return f"{name}: the loader process exited unexpectedly (exit code {code})"
