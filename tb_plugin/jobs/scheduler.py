"""Runs parse jobs in at most N worker processes and tracks each file's state for ``/runs``.

A process per file, not a shared pool: a worker that crashes or is killed for memory fails only its own file
(a broken ``ProcessPoolExecutor`` would fail every queued file); small files may share a process in turn, and a
death there fails no other file (``jobs.local``). On Linux the processes come from a fork server
that has already imported the loader, so each start costs milliseconds.

Scale-out (additive; without it nothing changes): an entry that was preprocessed (its rank summary beside the
model, ``pytorch-tb-profiler preprocess``) is *ready* without opening its model, which is memory-mapped on first
use only, so a 1,024-rank job costs the server its summaries, not its models. With a ``shared`` cache on another
store, complete entries are found by one listing per scan and their summaries copied in, their models when opened.
With a ``runner`` (a Dask cluster), parses run on the cluster's workers, which publish into the shared cache.

The scheduler holds the jobs (``jobs.job``) and their lock and runs the loop; its parts each own one seam: the
local loader processes (``jobs.local``), the parses on a cluster (``jobs.remote``), the shared cache
(``jobs.adopt``) and the entries of the local parse cache (``jobs.opening``).
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Hashable
from multiprocessing.connection import wait
from pathlib import Path

from ..catalog.catalog import TraceFile
from ..model.tables import TraceModel
from . import DEFAULT_LOAD_TIMEOUT, budget, entries
from .adopt import SharedEntries
from .after import AfterReady
from .cache import SOURCE_FILE, ParseCache, Stored
from .job import FAILED, LOADING, QUEUED, READY, Job, JobStatus, fail, status_of
from .local import LocalLoaders, groups
from .opening import EntryOpener
from .remote import RemoteParses, Runner
from .shared import SharedCache

__all__ = ["DEFAULT_LOAD_TIMEOUT", "FAILED", "LOADING", "MAX_CACHE_FAILURES", "QUEUED", "READY", "JobStatus",
           "LoadScheduler", "Runner", "_Job", "default_workers"]

log = logging.getLogger(__name__)

_Job = Job  # the name tests and older callers use

# A file version whose fresh parse fails the check this often when opened (a cache folder that corrupts what is
# written) fails with the reason instead of being parsed forever.
MAX_CACHE_FAILURES = 3


def default_workers() -> int:
    return budget.loader_slots()


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
        self._jobs: dict[Hashable, Job] = {}
        self._lock = threading.Lock()
        self.entries = EntryOpener(cache, stored, self._lock, self._wake, on_ready, on_loaded, on_preprocessed)
        self.after = AfterReady(self._lock, stored, self.entries.attach_part)
        self.local = LocalLoaders(self._lock, max(1, max_workers or default_workers()), load_timeout or None, stored,
                                  self.after)
        self._adopted = SharedEntries(shared, cache.directory, self._lock) if shared is not None else None
        self._remote = RemoteParses(runner, self._lock, self._wake) if runner is not None else None
        self._wake_r, self._wake_w = self.local.ctx.Pipe(duplex=False)
        self._closed = False
        self._thread = threading.Thread(target=self._loop, name="pytorch-profiler-loader", daemon=True)
        self._thread.start()

    @property
    def max_workers(self) -> int:
        return self.local.max_workers

    @property
    def load_timeout(self) -> float | None:
        """Seconds one load may take (None: no limit); the local loaders stop a load past it."""
        return self.local.load_timeout

    @load_timeout.setter
    def load_timeout(self, seconds: float | None) -> None:
        self.local.load_timeout = seconds or None

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
                self.local.stop(job)
                if job.file.url == file.url:  # the same file, rewritten (not another file at this position)
                    previous = (job.file, job.model) if job.model is not None else job.previous
            job = Job(file=file, entry=self.cache.entry(file.identity))
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
                self.local.stop(job)

    def status(self, key: Hashable) -> JobStatus | None:
        with self._lock:
            job = self._jobs.get(key)
            return status_of(job) if job is not None else None

    def statuses(self) -> dict[Hashable, JobStatus]:
        """Every file's status at once (one lock for a listing of thousands of files)."""
        with self._lock:
            return {key: status_of(job) for key, job in self._jobs.items()}

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
            return self.entries.open_lazy(job)
        with self._lock:
            if self._adopted is not None:
                self._adopted.fetch_model(job)
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
        self.entries.damaged(job, reason)
        with self._lock:
            job.lazy, job.model, job.state, job.done_progress = False, None, QUEUED, 0.0
        self._wake()

    def counts(self) -> dict[str, int]:
        """How the files were made ready (for logs, tests and benchmarks): parsed here, parsed on the cluster,
        ready from a preprocessed summary, and models open now."""
        with self._lock:
            jobs = list(self._jobs.values())
            return {"parsed_here": self.local.started,
                    "parsed_remote": self._remote.submitted if self._remote is not None else 0,
                    "preprocessed": sum(1 for j in jobs if j.lazy),
                    "models_open": sum(1 for j in jobs if j.model is not None)}

    def shared_url(self) -> str | None:
        return self.shared.url if self.shared is not None else None

    def refresh_shared(self) -> None:
        """List the shared cache's complete entries (once per scan: one listing, whatever the number of files)."""
        if self._adopted is None:
            return
        self._adopted.refresh()
        self._wake()

    def close(self) -> None:
        self._closed = True
        if self._remote is not None:
            self._remote.close()
        self.entries.close()
        if self._adopted is not None:
            self._adopted.close()
        with self._lock:
            for job in self._jobs.values():
                self.local.stop(job)
        self._wake()
        self._thread.join(timeout=5)

    # ---- the loop ---------------------------------------------------------------------------------------------
    def _wake(self) -> None:
        with contextlib.suppress(OSError):
            self._wake_w.send(None)

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
                views = self.after.waitables(self._jobs.values())
            ready = wait([self._wake_r, *running, *views], timeout=self.local.next_deadline(loading))
            if self._wake_r in ready:
                while self._wake_r.poll():
                    self._wake_r.recv()
            done = {id(job): job for obj, job in running.items() if obj in ready}  # conn and sentinel: once
            with self._lock:
                freed = sum(1 for job in done.values() if job.answer_frees_slot)
            if freed:  # their slots are free: the next files start before these entries are opened (when many
                self._start_jobs(freed=freed)  # loaders answer at once, opening them all first left cores idle)
            for job in done.values():
                self._finish(job)
            for job in {id(job): job for obj, job in views.items() if obj in ready}.values():
                self.after.take(job)  # each part counted as it is opened (cache.open_part)
                self._trim()
            self._collect_remote()
            with self._lock:
                self.local.expire(self._jobs.values())

    def _start_jobs(self, freed: int = 0) -> None:
        """Open what the cache holds and start loader processes while slots are free (``freed``: loading jobs whose
        process has answered or ended, not yet finished). Each job's entry is looked for once, when the job is first
        seen (so thousands of queued files cost no file system call per turn of the loop), and again only when
        something may have put it there (a cluster's parse)."""
        with self._lock:
            queued = [job for job in self._jobs.values() if job.state == QUEUED]
            busy = sum(1 for job in self._jobs.values() if job.holds_slot) - freed
            waiting = sum(1 for job in self._jobs.values() if job.state in (LOADING, QUEUED) and not job.lazy)
            shared_done = self._adopted.done if self._adopted is not None else set()
        adopt, parse = [], []
        preprocessed = 0
        for job in queued:
            if job.batch is not None:  # waiting its turn in a loader process shared by small files
                continue
            if not job.looked and not job.skip_cache:
                found = self._look_up(job)
                preprocessed += found == "preprocessed"
                if found:
                    continue
            if job.entry.name in shared_done:
                adopt.append(job)
                continue
            parse.append(job)
        free = self.max_workers - busy
        for group in (groups(parse, free, self.max_workers) if self._remote is None
                      else [[job] for job in parse[:max(0, free)]]):
            self._spawn(group, waiting)
        if preprocessed:
            log.info("%d traces ready from the preprocessed cache %s without parsing", preprocessed,
                     self.cache.directory)
        if adopt and self._adopted is not None:
            self._adopted.adopt(adopt, lambda job: self.cache.has_summary(job.entry), self.entries.ready_lazy)
            log.info("%d traces ready from the shared cache %s without parsing", len(adopt), self.shared_url())

    def _look_up(self, job: Job) -> str:
        """Look for a queued job's entry in the local cache, once: "failed" (a lasting failure remembered),
        "preprocessed" (ready by its summary), "opened" (its model opened), or "" (to be parsed)."""
        job.looked = True
        failure = self.cache.failure(job.entry)
        if failure is not None:  # this file version failed before, for a reason that does not change
            with self._lock:
                fail(job, failure)
            return "failed"
        if self.cache.has_summary(job.entry):
            self.entries.ready_lazy(job)
            return "preprocessed"
        if self.cache.has(job.entry) and self.entries.open_cached(job):
            return "opened"
        return ""

    def _spawn(self, group: list[Job], loading: int | None = None) -> None:
        """Start the parse of a file (on the cluster when there is one, else in a loader process), or of small
        files in one loader process (``local.groups``), while ``loading`` files (these included; counted when not
        given) load or wait."""
        if self._remote is not None:
            for job in group:
                self._remote.submit(job)
            return
        if loading is None:
            mine = {id(job) for job in group}
            with self._lock:
                loading = len(group) + sum(1 for other in self._jobs.values()
                                           if id(other) not in mine and other.state in (LOADING, QUEUED)
                                           and not other.lazy)
        self.local.spawn(group, loading)

    def _collect_remote(self) -> None:
        """Parses the cluster finished: ready through the shared cache (queued again, found complete there)."""
        if self._remote is None:
            return
        with self._lock:
            finished = self._remote.finished(self._jobs.values())
        if not finished:
            return
        if self._adopted is not None:
            with contextlib.suppress(Exception):
                self.refresh_shared()
        with self._lock:
            self._remote.collect(finished)

    def _finish(self, job: Job) -> None:
        """A loader process answered or died: open what it wrote (parsed again when that cannot be read back), or
        remember a lasting failure so the next start says it at once."""
        message = self.local.answer(job)
        with self._lock:
            handed = job.take_handover()
        if handed is not None and (message is None or message[0] != "ok"):  # LocalLoaders.stop let it go already
            handed.close()
        if message is None:
            return
        status, payload, *rest = message
        if status != "ok":
            if rest and rest[0]:  # lasting: the file version fails anywhere; the next start says so at once
                self.cache.remember_failure(job.entry, str(payload))
            return
        try:
            model = self.entries.open(job.entry, handed, payload.get("handover") if isinstance(payload, dict) else None)
        except Exception as err:  # noqa: BLE001 - damaged between its writing and now: parsed again, twice at most
            self.entries.damaged(job, str(err))
            with self._lock:
                self.after.end(job)
                if job.cache_failures >= MAX_CACHE_FAILURES:
                    fail(job, f"{job.file.filename}: its parse cannot be read back from the cache folder "
                              f"{self.cache.directory} ({err})")
                else:
                    job.state = QUEUED
            return
        self._trim()  # before "ready": a run that says ready has its cache within the bound
        self.after.expect(job, model, message)  # before "ready": no request computes them meanwhile
        self.entries.loaded(job, model)
        if job.after is not None:
            self.after.take(job)  # any that landed before the model was opened
            self._trim()

    def _trim(self) -> None:
        """Keep the cache folder within its bound (also once parts computed after ready landed in an entry: opening
        a part counts it, ``cache.open_part``)."""
        try:
            self.cache.evict(keep=self._needed)
        except OSError as err:  # a full cache is a nuisance; a dead loader thread would hang every later load
            log.warning("cannot trim the parse cache %s: %s", self.cache.directory, err)

    def _needed(self) -> set[Path]:
        """Entries eviction must keep: those whose model is still to be opened (a preprocessed span, ready by its
        summary), and those whose loader still adds parts computed after ready (evicted, each part would fail to
        land and the server compute its views: an entry larger than the bound, as a 10 GB trace's is against the
        default 4 GB, went at once). An opened model with its parts in no longer needs its entry (it was copied
        when opened): a restart parses it again if it was evicted."""
        with self._lock:
            return {job.entry for job in self._jobs.values()
                    if (job.lazy and job.model is None) or job.after is not None}
