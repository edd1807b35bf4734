"""The scheduler's local loader processes: one process per file, not a shared pool, so a worker that crashes or
is killed for memory fails only its own file (a broken ``ProcessPoolExecutor`` would fail every queued file). On
Linux the processes come from a fork server that has already imported the loader, so each start costs
milliseconds. A load that runs past ``load_timeout`` is stopped and its span fails with the reason."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterable
from typing import Any

from . import budget
from .after import AfterReady
from .cache import Stored
from .forkserver import main_module_hidden, prestart, process_context
from .job import LOADING, Job, fail


def death_reason(name: str, code: int | None) -> str:
    """Why a loader process ended without an answer, from its exit code (a signal: which; SIGKILL: memory)."""
    if code is not None and code < 0:
        try:
            signame = signal.Signals(-code).name
        except ValueError:
            signame = f"signal {-code}"
        hint = " (most likely out of memory)" if -code == signal.SIGKILL else ""
        return f"{name}: the loader process was killed by {signame}{hint}"
    return f"{name}: the loader process exited unexpectedly (exit code {code})"


class LocalLoaders:
    """Starts, stops and reads the answers of the loader processes; the scheduler holds ``lock`` over its jobs."""

    def __init__(self, lock: threading.Lock, max_workers: int, load_timeout: float | None,
                 stored: Stored | None, after: AfterReady | None = None) -> None:
        self._lock = lock
        self.after = after  # the processes that go on computing views after ready
        self.max_workers = max_workers
        self.load_timeout = load_timeout  # seconds; None: no limit
        self.stored = stored
        self.ctx = process_context([type(stored).__module__] if stored is not None else [])
        prestart(self.ctx)
        self.started = 0  # loader processes started

    def spawn(self, job: Job, loading: int) -> None:
        """Start the parse of ``job``'s file in a process while ``loading`` files (this one included) load or wait:
        its share of the memory budget (``budget.parts_for``) follows from that."""
        from .worker import run_job

        recv, send = self.ctx.Pipe(duplex=False)
        progress = self.ctx.Value("d", 0.0, lock=False)
        parts = budget.parts_for(job.file.size, job.file.url.endswith(".gz"), min(max(1, loading), self.max_workers))
        process = self.ctx.Process(target=run_job, args=(job.file, str(job.entry), progress, send, parts, self.stored),
                                   name="pytorch-profiler-parse", daemon=True)
        with self._lock:
            job.state, job.progress, job.conn = LOADING, progress, recv
        try:
            with main_module_hidden():
                process.start()
        except Exception as err:  # noqa: BLE001
            with self._lock:
                fail(job, f"cannot start a loader process: {err}")
            return
        finally:
            send.close()
        with self._lock:
            job.process, job.started = process, time.monotonic()
            self.started += 1

    def stop(self, job: Job) -> None:
        """Kill the job's process if it runs and close its pipe, and one computing its views after ready (called
        with the lock held)."""
        if job.process is not None and job.process.is_alive():
            job.process.kill()
        if job.conn is not None:
            job.conn.close()
        job.process, job.conn = None, None
        if job.after is not None and self.after is not None:
            self.after.end(job)

    def answer(self, job: Job) -> tuple[Any, ...] | None:
        """A finished process's answer (``("ok", ...)`` or ``("error", reason, lasting)``), or None when it died
        without one; the process is stopped and its job failed with the reason then. Called without the lock."""
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
                return None
            if self.after is None or not self.after.keep(job, message):  # else it goes on: views after ready
                self.stop(job)
            if message is None:
                fail(job, death_reason(job.file.filename, process.exitcode if process is not None else None))
                return None
            if message[0] != "ok":
                fail(job, str(message[1]))
        return message

    def next_deadline(self, running: Iterable[Job]) -> float:
        """Seconds the loop may sleep: at most 1, less when a load's time limit runs out sooner."""
        if self.load_timeout is None:
            return 1.0
        now = time.monotonic()
        return max(0.0, min([1.0, *(job.started + self.load_timeout - now for job in running)]))

    def expire(self, jobs: Iterable[Job]) -> None:
        """Stop loads that ran past the time limit: their span fails with the reason and the slot is free. Called
        with the lock held."""
        if self.load_timeout is None:
            return
        jobs = list(jobs)
        if self.after is not None:
            self.after.expire(jobs, self.load_timeout)
        now = time.monotonic()
        for job in jobs:
            if job.state == LOADING and job.process is not None and now - job.started > self.load_timeout:
                self.stop(job)
                fail(job, f"{job.file.filename}: loading took longer than {self.load_timeout:g} s and was stopped (is "
                          "the file on a stalled mount or store? the limit is --profiler_load_timeout)")
