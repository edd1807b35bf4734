"""The scheduler's side of a shared cache on another store (``jobs.shared.SharedCache``): its complete entries are
listed once per scan (one listing, whatever the number of files), a queued file whose entry is there is adopted by
copying its summaries in (one batch), and its model is copied when first used, on a background thread."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from .job import Job
from .shared import SharedCache

log = logging.getLogger(__name__)


class SharedEntries:
    """What the shared cache holds complete, and copying from it; the scheduler holds ``lock`` over its jobs."""

    def __init__(self, shared: SharedCache, cache_dir: Path, lock: threading.Lock) -> None:
        self.shared = shared
        self._cache_dir = cache_dir
        self._lock = lock
        self.done: set[str] = set()  # entry names complete in the shared cache at the last listing
        self._fetcher = ThreadPoolExecutor(2, thread_name_prefix="pytorch-profiler-fetch")

    @property
    def url(self) -> str:
        return self.shared.url

    def refresh(self) -> None:
        """List the shared cache's complete entries."""
        done = self.shared.done()
        with self._lock:
            self.done = done

    def adopt(self, jobs: list[Job], has_summary: Callable[[Job], bool], ready_lazy: Callable[[Job], None]) -> None:
        """Copy the summaries of entries complete in the shared cache (one batch); their models wait until used.
        A store that refuses leaves them to be parsed here (they are no longer counted as done there)."""
        try:
            self.shared.fetch([job.entry.name for job in jobs], self._cache_dir, summary_only=True)
        except Exception as err:  # noqa: BLE001 - the store refused or went away: parse them here instead
            log.warning("cannot copy summaries from the shared cache %s: %s", self.shared.url, err)
            with self._lock:
                self.done = self.done - {job.entry.name for job in jobs}
            return
        for job in jobs:
            if has_summary(job):
                ready_lazy(job)

    def fetch_model(self, job: Job) -> None:
        """Start copying a job's model in (once at a time; called with the lock held); the next use opens it."""
        if not job.fetching:
            job.fetching = True
            self._fetcher.submit(self._fetch, job)

    def _fetch(self, job: Job) -> None:
        try:
            self.shared.fetch([job.entry.name], self._cache_dir, summary_only=False)
        except Exception as err:  # noqa: BLE001 - the next use tries again; the reason is logged
            log.warning("cannot copy %s from the shared cache: %s", job.file.filename, err)
        finally:
            with self._lock:
                job.fetching = False

    def close(self) -> None:
        self._fetcher.shutdown(wait=False, cancel_futures=True)
