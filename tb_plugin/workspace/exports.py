"""The logdir's memory timeline exports (``prof.export_memory_timeline`` files): decoded in the scan thread (small
files; a bad one keeps its one-line error), and given to the trace of the same run folder (or of any run, from a
folder without traces) whose time range holds their times."""

from __future__ import annotations

import threading
from dataclasses import dataclass

from ..analysis.memory_category_view import export_overlap
from ..catalog.catalog import ExportFile, Identity
from ..loader.memory_export import ExportError, load_export
from ..model.memory_categories import MemoryExport
from .base import LoadedTrace

MAX_EXPORT_BYTES = 512 << 20  # a memory timeline export beyond this is not read (a scan must stay short)


@dataclass(frozen=True)
class ExportEntry:
    """A listed memory timeline export and what became of it: decoded, or why not (shown, never raised)."""

    file: ExportFile
    export: MemoryExport | None
    error: str | None


def decode_export(f: ExportFile) -> ExportEntry:
    if f.size > MAX_EXPORT_BYTES:
        return ExportEntry(f, None, f"{f.filename}: {f.size / 2**20:,.0f} MiB is more than the "
                                    f"{MAX_EXPORT_BYTES >> 20} MiB a memory timeline export is read up to")
    try:
        return ExportEntry(f, load_export(f.url, f.kind, f.access), None)
    except ExportError as err:
        return ExportEntry(f, None, str(err))
    except MemoryError:
        return ExportEntry(f, None, f"{f.filename}: not enough memory to read it")


class Exports:
    """The exports listed at the last scan, each decoded once (by file identity)."""

    def __init__(self) -> None:
        self._entries: dict[Identity, ExportEntry] = {}
        self._lock = threading.Lock()

    def update(self, listed: list[ExportFile]) -> None:
        """Decode new exports (in the scan thread); gone ones are forgotten."""
        known = self._entries
        fresh: dict[Identity, ExportEntry] = {}
        for f in listed:
            entry = known.get(f.identity)
            if entry is None:
                entry = decode_export(f)
            fresh[f.identity] = entry
        with self._lock:
            self._entries = fresh

    def of(self, loaded: LoadedTrace, runs: set[str]) -> tuple[list[ExportEntry], list[ExportEntry]]:
        """(exports that belong to this trace, exports beside it that could not be read).

        An export belongs to a trace when it sits in the trace's run folder or in a folder holding no trace (of
        ``runs``: an ``exports/`` folder beside the runs), and its times fall in the trace's time range (µs since
        the epoch against the trace's ``baseTimeNanoseconds`` + ``ts``): a folder of several spans gets each
        export right.
        """
        with self._lock:
            entries = list(self._entries.values())
        near = [e for e in entries if e.file.folder == loaded.file.run or e.file.folder not in runs]
        mine = [e for e in near if e.export is not None and export_overlap(loaded.model, e.export) > 0]
        broken = [e for e in near if e.error is not None and e.file.folder == loaded.file.run]
        return mine, broken
