"""One file's parse job as the scheduler tracks it (its state, its loader process or cluster answer, its model),
and what ``/runs`` is told of it (:class:`JobStatus`). Shared by the scheduler and its parts: the local loader
processes (``jobs.local``), the parses on a cluster (``jobs.remote``), the shared cache (``jobs.adopt``) and the
entries of the local parse cache (``jobs.opening``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..catalog.catalog import TraceFile
from ..model.tables import TraceModel

if TYPE_CHECKING:
    from .handover import Handover

QUEUED, LOADING, READY, FAILED = "queued", "loading", "ready", "failed"


@dataclass
class Job:
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
    after: After | None = None  # its loader process, still computing views after the trace turned ready
    batch: Batch | None = field(default=None, repr=False)  # the loader process it shares with small files
    alone: bool = False  # the process it shared died while loading it: it is tried again in one of its own
    handover: Handover | None = None  # the unlinked file its loader fills with the parse (``jobs.handover``)

    def take_handover(self) -> Handover | None:
        """The handed-over file, no longer the job's (whoever takes it closes it: mapped, or let go)."""
        taken, self.handover = self.handover, None
        return taken

    @property
    def holds_slot(self) -> bool:
        """Loading in a process that has not ended (or has none yet): it counts against the loader slots. One that
        has ended holds none, though the answers it left (a shared process's: one file a turn) are still to read."""
        return self.state == LOADING and not self.lazy and (self.process is None or self.process.is_alive())

    @property
    def answer_frees_slot(self) -> bool:
        """Its answer, just come, frees its process's slot: the process is alive (an ended one holds none anyway)
        and not going on with the next small file of its batch."""
        return ((self.batch is None or not self.batch.waiting) and self.process is not None
                and self.process.is_alive())


@dataclass(eq=False)
class Batch:
    """Small files that one loader process loads one after another (``jobs.local``): a process costs ~20 ms of
    fork and first touches, as much as such a file's whole parse. ``current`` is LOADING (it holds the process);
    the files in ``waiting`` stay QUEUED, their pipes open, and each takes the process over as the one before it
    answers."""

    process: Any
    current: Job = field(repr=False)
    waiting: list[Job] = field(repr=False)


@dataclass
class After:
    """A loader process that answered (the trace is ready) and goes on computing the views it left for after
    ready (``api.warm.Later``): it tells of each part on ``conn`` as it lands in the entry (``jobs.after``)."""

    process: Any
    conn: Connection
    started: float
    parts: set[str]


@dataclass(frozen=True)
class JobStatus:
    state: str
    progress: float
    error: str | None
    # READY with the last good parse of an earlier version while this one loads (``progress`` is the new one's)
    updating: bool = False


def status_of(job: Job) -> JobStatus:
    """What ``/runs`` says of a job: a rewritten file's last good parse stays READY (``updating``) while it loads."""
    progress = job.done_progress
    if job.state == LOADING and job.progress is not None:
        progress = float(job.progress.value)
    if job.previous is not None and job.state in (QUEUED, LOADING):
        return JobStatus(READY, round(progress, 3), None, updating=True)
    return JobStatus(job.state, round(progress, 3), job.error)


def fail(job: Job, reason: str) -> None:
    """The job's file cannot be loaded: its span fails with ``reason`` (an earlier version's parse is no longer
    served: the file as it is now is what the span shows)."""
    job.state, job.error, job.previous = FAILED, reason, None


def ready(job: Job, model: TraceModel) -> None:
    """The job's model is open: its span is ready, and the earlier version's parse is no longer served."""
    job.model, job.state, job.done_progress = model, READY, 1.0
    job.previous = None
