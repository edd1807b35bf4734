"""What a worker runs for one trace file: parse it, compute its rank summary, and publish both into the shared
cache. Runs on a Dask worker or in a local pool process; everything it needs travels in its arguments (picklable),
and it answers with a plain dict, never an exception, so a bad file is a reason in the report, not a lost task.
A worker that dies mid-task leaves no complete entry (``jobs.shared``): Dask runs the task again elsewhere, and a
later ``preprocess`` redoes it.

No credential travels with a task: a worker reads the stores' credentials from its own environment, as the training
job on that machine does (a pod's service account, an instance role, the variables of a SLURM job), and a local
pool's processes inherit the command's.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
import traceback
from dataclasses import dataclass
from typing import Any

from ..analysis.rank_summary import rank_summary
from ..catalog.catalog import Identity, TraceFile
from ..catalog.names import file_name
from ..catalog.remote import scrub
from ..jobs.budget import load_limits
from ..jobs.cache import entry_name
from ..jobs.shared import SharedCache
from ..loader import TraceLoadError, load_trace
from ..model.tables import save
from .summaries import write_summary


@dataclass(frozen=True)
class FileSpec:
    """One trace file version to preprocess, and the worker (rank) name it is listed under."""

    url: str
    size: int
    mtime: float
    etag: str | None
    worker: str

    @classmethod
    def of(cls, f: TraceFile) -> FileSpec:
        """The task for a listed file: its identity and rank, without the credentials it was listed with."""
        return cls(url=f.url, size=f.size, mtime=f.mtime, etag=f.etag, worker=f.worker)

    @property
    def identity(self) -> Identity:
        return (self.url, self.size, self.mtime, self.etag)

    @property
    def name(self) -> str:
        """Its cache entry's name: the local parse cache's, so a server finds it under the same key."""
        return entry_name(self.identity)


def peak_rss_bytes() -> int:
    """This process's peak resident memory so far (a worker process's high-water mark over all its tasks); 0
    where the platform does not say (Windows has no ``resource`` module)."""
    try:
        import resource
    except ImportError:
        return 0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak) if sys.platform == "darwin" else int(peak) * 1024


def preprocess_file(spec: FileSpec, cache_url: str) -> dict[str, Any]:
    """Parse ``spec`` and publish its model and summary under ``cache_url``; a dict with ``status`` ok or error."""
    started = time.monotonic()
    outcome: dict[str, Any] = {"name": spec.name, "file": file_name(spec.url), "bytes": spec.size, "pid": os.getpid()}
    try:
        shared = SharedCache(cache_url)
        model = load_trace(spec.url, None, parts=1, limits=load_limits())
        holder = shared.staging()
        try:
            built = holder / spec.name
            save(model, built)
            write_summary(rank_summary(model, spec.worker), built)
            shared.publish(built, spec.name)
        finally:
            shutil.rmtree(holder, ignore_errors=True)
        outcome.update(status="ok", events=model.n_events)
    except TraceLoadError as err:
        outcome.update(status="error", reason=scrub(str(err)))
    except MemoryError:
        outcome.update(status="error", reason=f"{outcome['file']}: not enough memory to load this trace")
    except Exception as err:  # noqa: BLE001 - a bug or a store error must end as a reason, never a lost task
        detail = traceback.format_exception_only(type(err), err)[-1].strip()
        reason = f"{outcome['file']}: {detail}"
        outcome.update(status="error", reason=scrub(reason))
    outcome.update(seconds=time.monotonic() - started, peak_rss=peak_rss_bytes())
    return outcome
