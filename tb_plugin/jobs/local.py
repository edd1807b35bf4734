"""The scheduler's local loader processes: a process per file, not a shared pool, so a worker that crashes or
is killed for memory fails only its own file (a broken ``ProcessPoolExecutor`` would fail every queued file). On
Linux the processes come from a fork server that has already imported the loader, so each start costs
milliseconds. A load that runs past ``load_timeout`` is stopped and its span fails with the reason.

Small files share a process when more are queued than processes are free (:func:`groups`): a process's fork and
first touches cost ~20 ms, a third of a small rank's whole load (48 ranks of ``gloo_8proc_cpu``: 61 ms a file in
a process each, 39 ms in one process, CPU). They are loaded one after another (:class:`job.Batch`), each answering
on its own pipe and timed from when its turn comes. A shared process that dies takes none of the others with it:
the files after the one it was loading go back to the queue, and that one is tried again alone; only a death
alone fails it."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterable
from typing import Any

from . import budget, handover
from .after import AfterReady
from .cache import Stored
from .forkserver import main_module_hidden, prestart, process_context
from .job import LOADING, QUEUED, Batch, Job, fail

# files up to this size (as stored: compressed or not) may share a process: 48 ranks of gloo_8proc_cpu (71-107 KB,
# ~40 ms of loader CPU each) gained a third; 64 ranks of ddp_resnet (340 KB, ~250 ms each) gained nothing that a
# process's fork was worth and lost the balance of 64 files over 15 processes (ready 1.24-1.66 s against 1.26-1.32)
SMALL_BYTES = 256 << 10
BATCH_MAX = 8  # files one process loads at most


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
        self.started = 0  # files given to loader processes
        self.processes = 0  # loader processes started (small files may share one)

    def spawn(self, group: list[Job], loading: int) -> None:
        """Start the parse of ``group``'s files (one, or small files in turn: :func:`groups`) in a process while
        ``loading`` files (these included) load or wait: its share of the memory budget (``budget.parts_for``)
        follows from that."""
        from .worker import run_jobs

        first = group[0]
        pipes = [self.ctx.Pipe(duplex=False) for _ in group]
        progress = [self.ctx.Value("d", 0.0, lock=False) for _ in group]
        parts = budget.parts_for(first.file.size, first.file.url.endswith(".gz"),
                                 min(max(1, loading), self.max_workers))
        handovers = [handover.make(job.entry.parent) if len(group) == 1 and job.file.size >= handover.MIN_FILE_BYTES
                     else None for job in group]  # a small file's entry is copied in milliseconds
        items = [(job.file, str(job.entry), p, send, h)
                 for job, p, (_, send), h in zip(group, progress, pipes, handovers)]
        process = self.ctx.Process(target=run_jobs, args=(items, parts, self.stored), name="pytorch-profiler-parse",
                                   daemon=True)
        batch = Batch(process, first, group[1:]) if len(group) > 1 else None
        with self._lock:
            for job, p, (recv, _), h in zip(group, progress, pipes, handovers):
                job.progress, job.conn, job.batch, job.handover = p, recv, batch, h
            first.state = LOADING
        try:
            with main_module_hidden():
                process.start()
        except Exception as err:  # noqa: BLE001
            with self._lock:
                for job in group:
                    job.batch = None
                    _let_go(job)
                    fail(job, f"cannot start a loader process: {err}")
            return
        finally:
            for _, send in pipes:
                send.close()
        with self._lock:
            first.process, first.started = process, time.monotonic()
            self.started += len(group)
            self.processes += 1

    def stop(self, job: Job, keep_handover: bool = False) -> None:
        """Kill the job's process if it runs and close its pipe, and one computing its views after ready (called
        with the lock held). A file waiting its turn in a shared process leaves it; the one loading there takes
        the process down, and the files after it go back to the queue. The file handed over for its parse is let
        go, unless ``keep_handover`` (it answered: the scheduler opens it)."""
        if not keep_handover:
            _let_go(job)
        batch, job.batch = job.batch, None
        if batch is not None and batch.current is not job:  # waiting, or answered and handed on
            batch.waiting[:] = [other for other in batch.waiting if other is not job]  # by identity, not fields
            if job.conn is not None:
                job.conn.close()
            job.process, job.conn = None, None
            return
        if batch is not None:
            for waiting in batch.waiting:
                requeue(waiting)
            batch.waiting.clear()
        if job.process is not None and job.process.is_alive():
            job.process.kill()
        if job.conn is not None:
            job.conn.close()
        job.process, job.conn = None, None
        if job.after is not None and self.after is not None:
            self.after.end(job)

    @staticmethod
    def hand_on(job: Job) -> None:
        """``job`` answered: the next file waiting in its shared process takes the process over, timed from now
        (called with the lock held)."""
        batch = job.batch
        if batch is None or batch.current is not job or not batch.waiting:
            return
        nxt = batch.waiting.pop(0)
        batch.current = nxt
        nxt.state, nxt.process, nxt.started = LOADING, job.process, time.monotonic()

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
            shared, last = job.batch is not None, job.batch is None or not job.batch.waiting
            if message is not None:
                self.hand_on(job)
            if self.after is None or not last or not self.after.keep(job, message):  # else: views after ready
                self.stop(job, keep_handover=message is not None and message[0] == "ok")
            job.batch = None  # answered or dead: no longer waits in a process (a job queued again must start)
            if message is None and shared and not job.alone:  # the shared process died loading it: try it alone
                requeue(job)
                job.alone = True
                return None
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


def _let_go(job: Job) -> None:
    taken = job.take_handover()
    if taken is not None:
        taken.close()


def requeue(job: Job) -> None:
    """Back to the queue, as before its process started (its pipe closed): the process it shared ended."""
    _let_go(job)
    if job.conn is not None:
        job.conn.close()
    job.state, job.process, job.conn, job.progress, job.batch = QUEUED, None, None, None, None


def shareable(job: Job) -> bool:
    """A small local file never tried alone: it may share a loader process."""
    return not job.alone and job.file.size <= SMALL_BYTES and not job.file.is_remote


def groups(jobs: list[Job], free: int, slots: int | None = None) -> list[list[Job]]:
    """The queued files to start in at most ``free`` of the ``slots`` processes (default: all free), in order: each
    alone while the processes suffice; else small files share one, up to ``BATCH_MAX`` each, as few to a process as
    would fill all the slots (sized by the free ones alone, the last files went to one process, 8 in turn, while the
    slots freed a moment later idled: 0.3-0.5 s at the end of 256 ranks on 16 cores)."""
    if free <= 0:
        return []
    if len(jobs) <= free:
        return [[job] for job in jobs]
    size = min(BATCH_MAX, -(-len(jobs) // max(free, slots or free)))
    out: list[list[Job]] = []
    for job in jobs:
        last = out[-1] if out else None
        if last is not None and len(last) < size and shareable(job) and shareable(last[0]):
            last.append(job)
        elif len(out) < free:
            out.append([job])
    return out
