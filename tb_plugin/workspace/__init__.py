"""The workspace: the catalog of trace files, kept in step with the loader, behind one object the API can ask.

It owns the background rescan thread. Every public method answers from memory at once: requests never wait for
a listing or a parse. ``Workspace`` (``core``) holds the files listed; its parts each own one seam: the logdirs'
listing and its errors (``scan``), ``/runs`` and its pages (``listing``), memory timeline exports (``exports``),
allocator snapshots (``snapshots``), and the rank summaries with the job-level answer (``summaries``).
"""

from __future__ import annotations

import logging
import threading

from ..analysis.overview import overview
from ..model.tables import TraceModel
from ..timeline.index import timeline_index
from .base import Key, LoadedTrace, LookupFailed, SpanSummaries
from .core import Workspace
from .exports import MAX_EXPORT_BYTES, ExportEntry
from .listing import ATTENTION_SPANS
from .snapshots import MAX_SNAPSHOT_BYTES, SNAPSHOT_CACHE_BYTES, SNAPSHOTS_KEPT, SnapshotEntry, Snapshots
from .summaries import SUMMARY_READERS, job_of, job_result

__all__ = ["ATTENTION_SPANS", "MAX_EXPORT_BYTES", "MAX_SNAPSHOT_BYTES", "PRECOMPUTE_THREAD_EVENTS",
           "SNAPSHOTS_KEPT", "SNAPSHOT_CACHE_BYTES", "SUMMARY_READERS", "ExportEntry", "Key", "LoadedTrace",
           "LookupFailed", "SnapshotEntry", "Snapshots", "SpanSummaries", "Workspace", "job_of", "job_result",
           "precompute"]

log = logging.getLogger(__name__)

PRECOMPUTE_THREAD_EVENTS = 100_000  # a trace this big builds its Trace view index beside its Overview


def precompute(model: TraceModel) -> None:
    """Build what the first page views need as soon as a trace is loaded (in a background thread).

    The Overview (the landing page) and the Trace view's index are built side by side, so neither page waits for
    the other's: the index is mostly numpy sorts, which release the GIL, so the two overlap on two cores. A small
    trace's are built one after the other: starting a thread costs more than its index (a logdir of thousands of
    small runs spent a third of its loading time there).
    """
    if model.n_events < PRECOMPUTE_THREAD_EVENTS:
        _build_index(model)
        overview(model)
        return
    index = threading.Thread(target=_build_index, args=(model,), name="pytorch-profiler-index", daemon=True)
    index.start()
    overview(model)
    index.join()


def _build_index(model: TraceModel) -> None:
    try:
        timeline_index(model)
    except Exception:  # a request for the Trace view computes it again and reports the error there
        log.exception("building the timeline index of %s failed", model.meta.get("source"))
