"""Loader processes that go on after their trace turned ready: the views the ready rule left for after it
(``api.warm.ReadyRule``, ``api.warm.Later``) are computed there, each part added to the published entry as a sealed
folder of its own and told of on the process's pipe (``("part", name, ok)``). Until a part lands its routes answer
409 "computing" (``Stored.expect``); a part that fails, a process that dies or runs past the load time limit, or a
file forgotten or rewritten leaves the parts that did not land to the server, computed on first use
(``Stored.abandon``)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ..model.tables import TraceModel
from .cache import Stored
from .job import After, Job

log = logging.getLogger(__name__)


def later_parts(message: tuple[Any, ...] | None) -> dict[str, float] | None:
    """The parts a worker's "ok" says it goes on computing after ready, with the seconds each is expected in."""
    if not message or message[0] != "ok" or not isinstance(message[1], dict):
        return None
    later = message[1].get("later")
    return {str(k): float(v) for k, v in later.items()} if isinstance(later, dict) else None


class AfterReady:
    """The jobs whose loader process computes views after ready; the scheduler holds ``lock`` over its jobs."""

    def __init__(self, lock: threading.Lock, stored: Stored | None,
                 attach_part: Callable[[TraceModel, Path, str], bool]) -> None:
        self._lock = lock
        self.stored = stored
        self._attach_part = attach_part

    def keep(self, job: Job, message: tuple[Any, ...] | None) -> bool:
        """Keep the job's answered process running when its "ok" leaves parts for after ready (called with the
        lock held): True when it does, and the job no longer owns the process as a load."""
        later = later_parts(message)
        process, conn = job.process, job.conn
        if not later or conn is None or process is None or not process.is_alive():
            return False
        job.after = After(process, conn, time.monotonic(), set(later))
        job.process, job.conn = None, None
        return True

    def expect(self, job: Job, model: TraceModel, message: tuple[Any, ...] | None) -> None:
        """Before the job turns ready: the parts still coming answer 409 "computing" meanwhile, never computed by
        the server a second time."""
        if job.after is not None and self.stored is not None:
            self.stored.expect(model, job.file, {p: s for p, s in (later_parts(message) or {}).items()
                                                 if p in job.after.parts})

    def end(self, job: Job) -> None:
        """Stop ``job``'s process computing views after ready, or take in its end (called with the lock held): the
        parts that did not land are computed by the server on first use."""
        after, job.after = job.after, None
        if after is None:
            return
        if after.process.is_alive():
            after.process.kill()
        after.conn.close()
        if job.model is not None and self.stored is not None and after.parts:
            self.stored.abandon(job.model, after.parts)

    @staticmethod
    def waitables(jobs: Iterable[Job]) -> dict[Any, Job]:
        """What the loop waits on besides the loads: each such process's pipe and sentinel (lock held)."""
        return {obj: job for job in jobs if job.after is not None
                for obj in (job.after.conn, job.after.process.sentinel)}

    def take(self, job: Job) -> None:
        """Take in what ``job``'s process said since (each part that landed, or failed), and its end: the parts that
        did not land are then computed by the server on first use. Called without the lock."""
        after, model = job.after, job.model
        if after is None or model is None or self.stored is None:
            return  # the model is not open yet: the scheduler takes them in once it is
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
                    self.end(job)
            after.process.join(timeout=5)

    def expire(self, jobs: Iterable[Job], load_timeout: float | None) -> None:
        """Stop views computed after ready past the load time limit (lock held): the server computes them."""
        if load_timeout is None:
            return
        now = time.monotonic()
        for job in jobs:
            if job.after is not None and now - job.after.started > load_timeout:
                log.warning("stopped computing the views of %s after %g s: computed on first use",
                            job.file.filename, load_timeout)
                self.end(job)
