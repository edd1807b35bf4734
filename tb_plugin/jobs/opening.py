"""The scheduler's side of the local parse cache: a job's entry opened into its model (from a verified private
copy, with what the loader stored beside it), a damaged entry removed so the file is parsed again (a miss), a
preprocessed entry made ready by its rank summary alone (its model opened on first use), and the callbacks run on
each newly opened model on one background thread."""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Hashable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ..catalog.catalog import TraceFile
from ..model.tables import MODEL_FILES, TraceModel, model_of
from . import entries, handover
from .cache import SOURCE_FILE, ParseCache, Stored
from .entries import BadEntry
from .handover import Handover
from .job import LOADING, QUEUED, READY, Job, ready
from .shared import SUMMARY_FILES

log = logging.getLogger(__name__)

# Files of an entry the model does not need when opened (the others, beyond the model's own, are what ``Stored``
# wrote: opened with the model, dropped alone when damaged).
NOT_MODEL = frozenset({SOURCE_FILE, *SUMMARY_FILES})


class Warmer:
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


class EntryOpener:
    """Opens the jobs' cache entries; the scheduler holds ``lock`` over its jobs and is woken (``wake``) when a
    damaged entry queues its job again."""

    def __init__(self, cache: ParseCache, stored: Stored | None, lock: threading.Lock, wake: Callable[[], None],
                 on_ready: Callable[[TraceModel], None] | None = None,
                 on_loaded: Callable[[TraceFile], None] | None = None,
                 on_preprocessed: Callable[[Hashable, Path], object] | None = None) -> None:
        self.cache = cache
        self.stored = stored
        self._lock = lock
        self._wake = wake
        self._open_lock = threading.Lock()
        # after each model is open (on one background thread): ``on_ready`` with the model, then ``on_loaded`` with
        # its file (the workspace builds a job's summary once its last rank is ready)
        self._warm = Warmer(on_ready, on_loaded) if on_ready is not None or on_loaded is not None else None
        # reads each preprocessed entry's summary as it turns ready, so the first job-level answer reads none
        self._on_preprocessed = on_preprocessed
        self._summary_reader = ThreadPoolExecutor(1, thread_name_prefix="pytorch-profiler-summaries")

    def open(self, entry: Path, handed: Handover | None = None, layout: Any = None) -> TraceModel:
        """The model of a cache entry, from a verified private copy of its files (``jobs.entries``; BadEntry when it
        cannot be used), with what the loader process stored beside it (a damaged extra is dropped: it is computed
        again on first use). ``handed``, with the ``layout`` its loader sent: the same files in the file the server
        handed that process (``jobs.handover``), mapped without a copy; the entry is copied as usual when they
        cannot be used."""
        files = self._handed(entry, handed, layout) if handed is not None else None
        if files is None:
            opened = self.cache.open(entry, MODEL_FILES, lambda name: name not in NOT_MODEL)
            for name, reason in opened.dropped.items():
                log.warning("ignoring %s in the cache entry %s: %s", name, entry, reason)
            files = opened.files
        model = model_of(files)
        if self.stored is not None:
            try:
                self.stored.attach(model, files)
            except Exception as err:  # noqa: BLE001 - see the docstring
                log.warning("ignoring the stored results in %s: %s", entry, err)
            for name in entries.part_names(entry):  # added after the entry was published (views after ready)
                self.attach_part(model, entry, name)
        return model

    def _handed(self, entry: Path, handed: Handover, layout: Any) -> dict[str, Any] | None:
        """The files handed over for ``entry`` (counted as the cache's use of it), or None (let go) when there are
        none or they cannot be used."""
        if layout is None:
            handed.close()
            return None
        try:
            files = handover.adopt(handed, layout, MODEL_FILES, lambda name: name not in NOT_MODEL)
        except BadEntry as err:
            log.warning("opening the cache entry %s instead of the parse handed over: %s", entry, err)
            return None
        self.cache.touch(entry)
        self.cache.added(entry)
        return files

    def attach_part(self, model: TraceModel, entry: Path, name: str) -> bool:
        """Give ``model`` the part ``name`` added to its entry after ready, verified on its own; False (it is
        computed on first use) when it cannot be read."""
        assert self.stored is not None
        try:
            self.stored.attach(model, self.cache.open_part(entry, name).files)
        except Exception as err:  # noqa: BLE001 - a damaged part is a miss of that part alone
            log.warning("ignoring the part %s of the cache entry %s: %s", name, entry, err)
            return False
        return True

    def loaded(self, job: Job, model: TraceModel) -> None:
        """The job's model is open: ready, and the callbacks run on it."""
        with self._lock:
            ready(job, model)
        if self._warm is not None:
            self._warm.submit(model, job.file)

    def open_cached(self, job: Job) -> bool:
        """Open the entry found in the cache; False when it is damaged (a miss: the file is parsed again)."""
        try:
            model = self.open(job.entry)
        except Exception as err:  # noqa: BLE001 - a damaged cache entry is re-parsed, not fatal
            self.damaged(job, str(err))
            return False
        self.loaded(job, model)
        return True

    def open_lazy(self, job: Job) -> TraceModel | None:
        """Open a preprocessed job's model now (once, however many requests ask at once); None when its entry is
        damaged (the file is then parsed here)."""
        with self._open_lock:
            if job.model is None:
                try:
                    model = self.open(job.entry)
                except Exception as err:  # noqa: BLE001 - a damaged entry is a miss: the trace is parsed here
                    self.damaged(job, str(err))
                    with self._lock:
                        job.lazy, job.state, job.done_progress = False, QUEUED, 0.0
                    self._wake()
                    return None
                with self._lock:
                    job.model = model
                if self._warm is not None:
                    self._warm.submit(model, job.file)
        return job.model

    def damaged(self, job: Job, reason: str) -> None:
        """The job's entry cannot be used: remove it (a miss), or parse without it when another process reads it."""
        self.cache.discard(job.entry, f"{job.file.filename}: {reason}")
        with self._lock:
            job.cache_failures += 1
            job.skip_cache = job.entry.exists()

    def ready_lazy(self, job: Job) -> None:
        """A preprocessed entry turns ready once its summary is read (by the summary thread, in arrival order): a
        span that says 'ready' answers the job-level view from memory, never by reading 1,024 files in a request."""
        self.cache.touch(job.entry)
        with self._lock:
            job.lazy = True
            job.state = LOADING if self._on_preprocessed is not None else READY
        if self._on_preprocessed is not None:
            self._summary_reader.submit(self._read_summary, job)
        else:
            job.done_progress = 1.0

    def _read_summary(self, job: Job) -> None:
        assert self._on_preprocessed is not None
        try:
            self._on_preprocessed(job.file.key, job.entry)
        except Exception as err:  # noqa: BLE001 - a damaged entry is a miss: the file is parsed here
            self.damaged(job, f"its rank summary cannot be read ({err})")
            with self._lock:
                job.lazy, job.state = False, QUEUED
            self._wake()
            return
        with self._lock:
            job.state, job.done_progress = READY, 1.0

    def close(self) -> None:
        self._summary_reader.shutdown(wait=False, cancel_futures=True)
