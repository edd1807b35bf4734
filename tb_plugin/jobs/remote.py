"""The scheduler's parses on a cluster (a ``Runner``: ``scaleout.executors.DaskRunner``): a file is submitted
there, its answer comes back on a client thread, and a parse that succeeded is found complete in the shared cache
(the job is queued again and adopted from there); one that failed fails its span with the cluster's reason."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from typing import Protocol

from ..catalog.catalog import TraceFile
from .job import LOADING, QUEUED, Job, fail


class Runner(Protocol):
    """Parses on other machines (``scaleout.executors.DaskRunner``): the result lands in the shared cache."""

    description: str

    def submit(self, file: TraceFile, done: Callable[[bool, str | None], None]) -> None: ...

    def close(self) -> None: ...


class RemoteParses:
    """Submits jobs to a runner and takes in its answers; the scheduler holds ``lock`` over its jobs and is woken
    (``wake``) when an answer comes."""

    def __init__(self, runner: Runner, lock: threading.Lock, wake: Callable[[], None]) -> None:
        self.runner = runner
        self._lock = lock
        self._wake = wake
        self.submitted = 0  # parses submitted to the runner

    def submit(self, job: Job) -> None:
        """Parse on the cluster; its answer comes back on a client thread and is taken in by :meth:`collect`."""

        def done(ok: bool, reason: str | None) -> None:
            with self._lock:
                job.remote_result = (ok, reason)
            self._wake()

        with self._lock:
            job.state, job.started, job.remote_result = LOADING, time.monotonic(), None
            self.submitted += 1
        try:
            self.runner.submit(job.file, done)
        except Exception as err:  # noqa: BLE001 - the cluster went away: the span says so
            with self._lock:
                fail(job, f"{job.file.filename}: cannot submit to {self.runner.description}: {err}")

    def finished(self, jobs: Iterable[Job]) -> list[Job]:
        """The jobs the cluster answered (called with the lock held)."""
        return [job for job in jobs if job.state == LOADING and job.remote_result is not None]

    def collect(self, finished: list[Job]) -> None:
        """Take in the answers (called with the lock held, after the shared cache was listed again): a parse that
        succeeded is queued again, to be found complete in the shared cache; one that failed fails its span."""
        for job in finished:
            ok, reason = job.remote_result or (False, None)
            job.remote_result = None
            if ok:
                job.state, job.looked = QUEUED, False  # its entry is in the cache now: looked for again
            else:
                fail(job, reason or f"{job.file.filename}: the cluster could not parse it")

    def close(self) -> None:
        self.runner.close()
