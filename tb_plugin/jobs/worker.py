"""The code that runs inside a loader process: parse one file, write its model to the cache, report back.

Kept tiny and import-light on purpose: the fork server preloads this module (numpy, msgspec, pyarrow) once, so
starting a worker costs a fork, not an interpreter start.
"""

from __future__ import annotations

import contextlib
import traceback
from dataclasses import replace
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import numpy.ma  # noqa: F401 - np.unique imports it on first use (50 ms in every loader process otherwise)

from ..catalog.catalog import TraceFile
from ..catalog.remote import scrub
from ..loader import TraceLoadError, default_parts, load_trace
from ..model.tables import save
from . import budget
from .cache import SOURCE_FILE, Stored


def run_job(file: TraceFile, entry: str, progress: Any, conn: Connection, parts: int | None = None,
            stored: Stored | None = None) -> None:
    """Entry point of a worker process. Sends ``("ok", stats)`` or ``("error", reason, lasting)`` on ``conn``
    (``lasting``: the file version fails the same way anywhere, see ``loader.errors``).

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
    try:
        if access is not None:
            access.apply()
        source: list[bytes] = []
        model = load_trace(file.url, report, parts=min(parts, default_parts()) if parts else default_parts(),
                           access=access, keep_source=source.append if file.is_remote else None,
                           limits=replace(budget.load_limits(), scratch_dir=str(Path(entry).parent)))
        save(model, entry)
        stats = {"events": model.n_events, "bytes": model.nbytes()}
        del model  # the derived results are computed on the parse mapped back: this copy would only double memory
        if stored is not None:
            cores = min(parts or default_parts(), default_parts())
            _save_derived(stored, entry, file, budget.views_processes(stats["events"], cores))
        if source:  # a remote original is cached beside its parse: downloads and Perfetto need no new fetch
            (Path(entry) / SOURCE_FILE).write_bytes(source[0])
        progress.value = 1.0
        message = ("ok", stats)
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
    except OSError:
        pass  # the server stopped waiting (the file changed or went away, or it is shutting down): nobody to tell
    finally:
        conn.close()


def _save_derived(stored: Stored, entry: str, file: TraceFile, processes: int) -> None:
    """Derived results are an optimisation: if computing or writing them fails, the trace still loads and the
    server computes them on first use (and reports any error there, where the user looks)."""
    with contextlib.suppress(Exception):
        stored.save(entry, file, processes)
