"""The code that runs inside a loader process: parse one file, write its model to the cache, report back.

Kept tiny and import-light on purpose: the fork server preloads this module (numpy, msgspec, pyarrow) once, so
starting a worker costs a fork, not an interpreter start.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import time
import traceback
from collections.abc import Callable
from dataclasses import replace
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import numpy.ma  # noqa: F401 - np.unique imports it on first use (50 ms in every loader process otherwise)
import pyarrow as pa

from ..catalog.catalog import TraceFile
from ..catalog.remote import scrub
from ..loader import TraceLoadError, default_parts, load_trace
from ..loader.columns import fork_worker, join_worker
from ..model import heap
from ..model.tables import LONG_TEXTS, MODEL_FILES, save
from . import budget, entries
from .cache import SOURCE_FILE, Later, Stored
from .entries import BadEntry
from .handover import Filler, Handover, Layout, handed_files, mapped

log = logging.getLogger(__name__)


def run_job(file: TraceFile, entry: str, progress: Any, conn: Connection, parts: int | None = None,
            stored: Stored | None = None, handover: Handover | None = None) -> None:
    """Entry point of a worker process. Sends ``("ok", stats)`` or ``("error", reason, lasting)`` on ``conn``
    (``lasting``: the file version fails the same way anywhere, see ``loader.errors``). ``stats["later"]``: the
    views it goes on computing after that answer (part → seconds expected), each then told as
    ``("part", name, ok)`` once added to the published entry.

    ``file.access`` (``catalog.storage.Access``) is the environment's credentials as the server captured them: the
    fork server may have started before they were set, and some libraries read them from the environment.
    ``parts`` is how many processes may build this file (the scheduler's share of the machine, ``jobs.budget``).
    ``stored`` computes what the server would otherwise compute first when the trace turns ready, while this
    process still holds the model, and writes it beside the parse (:class:`cache.Stored`).
    """
    access = file.access

    def report(fraction: float) -> None:
        progress.value = 0.95 * fraction

    message: tuple[Any, ...]
    later: Later | None = None
    try:
        started = time.monotonic()
        if access is not None:
            access.apply()
        source: list[bytes] = []
        model = load_trace(file.url, report, parts=min(parts, default_parts()) if parts else default_parts(),
                           access=access, keep_source=source.append if file.is_remote else None,
                           limits=replace(budget.load_limits(), scratch_dir=str(Path(entry).parent)))
        stats = {"events": model.n_events, "bytes": model.nbytes()}
        holder = [model]
        del model  # _write_entry drops it once saved: the derived results are computed on the parse mapped back
        cores = min(parts or default_parts(), default_parts())
        layout: list[Layout | None] = []
        later = _write_entry(holder, Path(entry), stored, source[0] if source else None, file,
                             (cores, budget.views_memory(stats["events"])), started, handover, layout.append)
        progress.value = 1.0
        message = ("ok", {**stats, "later": dict(later.parts) if later is not None else {},
                          **({"handover": layout[0]} if layout and layout[0] is not None else {})})
    except TraceLoadError as err:  # the third item: the same file version would fail anywhere (cache it)
        message = ("error", scrub(str(err), access), err.lasting)
    except MemoryError:
        message = ("error", f"{file.filename}: not enough memory to load this trace", False)
    except Exception as err:  # noqa: BLE001 - a bug must still end as a message, never a dead worker
        detail = traceback.format_exception_only(type(err), err)[-1].strip()
        reason = f"{file.filename}: internal error while loading ({detail}); please report it"
        message = ("error", scrub(reason, access), False)
    try:
        conn.send(message)
        if later is not None:  # the trace is ready: the views that would have delayed it are computed now
            _run_later(later, Path(entry), conn)
    except OSError:
        pass  # the server stopped waiting (the file changed or went away, or it is shutting down): nobody to tell
    finally:
        conn.close()
        if handover is not None:
            handover.close()


def _run_later(later: Later, entry: Path, conn: Connection) -> None:
    """Compute what ``Stored.save`` left for after "ready", adding each part to the published entry as a sealed
    folder of its own (``entries.add_part``) and telling the server (``("part", name, ok)``) as each lands; the
    server answers 409 "computing" for them meanwhile, and computes any that fails itself."""
    def report(part: str, ok: bool) -> None:
        with contextlib.suppress(OSError):
            conn.send(("part", part, ok))

    with contextlib.suppress(Exception):  # as for views before ready: a failure is computed on first use
        later.run(lambda: entries.staging(entry.parent), lambda built, part: entries.add_part(built, entry, part),
                  report)


def _write_entry(holder: list[Any], entry: Path, stored: Stored | None, source: bytes | None, file: TraceFile,
                 share: tuple[int, int], started: float, handover: Handover | None = None,
                 handed: Callable[[Layout | None], None] = lambda layout: None) -> Later | None:
    """Build the entry in a private folder of the cache, seal it and rename it into place (``jobs.entries``): no
    one ever sees it half written, and a server that published the same entry first wins. The model (the one item
    of ``holder``) is written by a forked child while the stored views before ready start on it (:class:`_Saving`),
    then dropped: the views after ready are computed on the parse mapped back, as the server opens it. What
    ``stored`` leaves for after "ready" (the parse took ``time.monotonic() - started`` seconds) is returned, to be
    run once the entry is published; ``share``: the processes and the bytes its views may take
    (``budget.views_memory``). With a ``handover``, the entry's files are copied into it too, the model's while the
    stored views compute (``jobs.handover``), and ``handed`` gets where each lies (None: the copy failed, the server
    opens the entry)."""
    built = entries.staging(entry.parent)
    later = None
    saving = _Saving(holder.pop(), built, handover)
    try:
        if stored is not None:
            heap.trim_heap()  # the parse's freed pages: the processes forked for the views would count them
            saving.start()
            later = _save_derived(stored, str(built), file, share, time.monotonic() - started, saving)
        saving()  # written, whatever the stored views did
        if saving.filler is not None:
            layout = saving.filler.finish(handed_files(built))
            handed(layout)
            if layout is not None and later is not None:
                _rebase(later, handover, layout)
        if source is not None:  # a remote original is cached beside its parse: downloads and Perfetto need no new fetch
            (built / SOURCE_FILE).write_bytes(source)
        entries.seal(built, saving.filler.sums if saving.filler is not None else None)
        entries.publish(built, entry)
    finally:
        saving.end()  # a failure on the way: no child is left behind
        shutil.rmtree(built, ignore_errors=True)
    return later


class _Saving:
    """The parse written into the entry being built, by a forked child while the stored views before ready start on
    the parse in memory (``Stored.save``'s ``built``: the 2 GB trace's save, 0.32 s on a lent 16-core host, beside
    its Trace index instead of before it), or here where forking fails; once written, the handover's copy of it
    starts (:attr:`filler`). Calling it waits until the parse is written; only the first call does anything."""

    def __init__(self, model: Any, folder: Path, handover: Handover | None) -> None:
        self.model, self.folder, self.handover = model, folder, handover
        self.filler: Filler | None = None
        self._child: tuple[int, int] | None = None

    def start(self) -> None:
        """Write the parse in a forked child (here, when called, where forking fails)."""
        if not hasattr(os, "fork"):
            return
        model, folder = self.model, self.folder
        with contextlib.suppress(OSError):
            self._child = fork_worker(lambda fd: save(model, folder))

    def __call__(self) -> None:
        if self.model is None:
            return
        if not self._child_wrote():
            save(self.model, self.folder)  # every file written again, whole
        self.model = None
        if self.handover is not None:
            self.filler = Filler(self.handover, self.folder)
            self.filler.start(handed_files(self.folder))

    def _child_wrote(self) -> bool:
        if self._child is None:
            return False
        child, self._child = self._child, None
        return join_worker(child)[0]

    def end(self) -> None:
        """Wait for any child still running (the writer, the handover's copier)."""
        self._child_wrote()
        if self.filler is not None:
            self.filler.wait()


def _rebase(later: Later, handover: Handover | None, layout: Layout) -> None:
    """The views left for after "ready" computed on the parse handed to the server (``Later.rebase``); on the
    entry's own files as before when it cannot be mapped here."""
    try:
        if handover is not None:
            later.rebase(mapped(handover.fd, layout, MODEL_FILES, lambda name: name == LONG_TEXTS))
    except (BadEntry, OSError, ValueError, pa.ArrowException):
        pass


def _save_derived(stored: Stored, entry: str, file: TraceFile, share: tuple[int, int], parse_seconds: float,
                  saving: _Saving) -> Later | None:
    """Derived results are an optimisation: if computing or writing them fails, the trace still loads and the
    server computes them on first use (and reports any error there, where the user looks)."""
    try:
        return stored.save(entry, file, share[0], parse_seconds, memory=share[1], built=saving.model, saved=saving)
    except Exception as err:  # an optimisation: whatever fails, the trace loads
        log.warning("the stored views of %s were not computed (%s: %s): each is computed on first use", file.url,
                    type(err).__name__, err, exc_info=log.isEnabledFor(logging.DEBUG))
        return None


def run_jobs(jobs: list[tuple[TraceFile, str, Any, Connection, Handover | None]], parts: int | None = None,
             stored: Stored | None = None) -> None:
    """Entry point of a loader process: :func:`run_job` for each file in turn, each answering on its own pipe (one
    file, or small files sharing the process: ``jobs.local.groups``)."""
    for file, entry, progress, conn, handover in jobs:
        run_job(file, entry, progress, conn, parts, stored, handover)
