"""A parse cache shared between machines: the same entries as the local parse cache (``jobs.cache``), on any fsspec
store (a shared filesystem, S3, Azure Blob, GCS), written by preprocessing workers and read by servers.

An entry is complete when its summary marker exists: a worker uploads every other file first and the marker last,
so a worker killed mid-upload leaves an entry without a marker, which is not listed as done and is redone by the
next run. On a local or mounted path an entry is built in a temp folder inside the cache and renamed into place.
The server copies what it needs into its local parse cache (summaries at once, a model when its rank is opened)
and memory-maps it from there, as it does its own parses.
"""

from __future__ import annotations

import os
import posixpath
import shutil
import tempfile
from pathlib import Path

from ..catalog import remote
from . import entries
from .cache import SUMMARY_MARKER
from .entries import MANIFEST

# The files of an entry that make up a rank summary (``scaleout.summaries`` writes them, marker last).
SUMMARY_FILES = ("summary-steps.parquet", "summary-collectives.parquet", SUMMARY_MARKER)
# The file whose presence makes a local entry's model loadable (``ParseCache.has``).
MODEL_MARKER = "meta.json"
# Copied last, in this order: the manifest (each file's size and CRC-32, checked when the server opens the entry),
# the model's marker, the summary's marker.
_MARKERS = (MANIFEST, MODEL_MARKER, SUMMARY_MARKER)


class SharedCache:
    """Entries under one cache URL (or path); construction makes no request."""

    def __init__(self, url: str, access: remote.Access | None = None) -> None:
        self.location = remote.resolve(url, access)
        self.access = self.location.access
        self.fs = self.location.fs
        self.root = self.location.path.rstrip("/") or self.location.path
        # what workers are given and messages show: the path, or the URL without a SAS token (never a secret)
        self.url = self.root if self.is_local else remote.scrub_url(url)

    @property
    def is_local(self) -> bool:
        return self.location.store == "local"

    def path(self, name: str, file: str | None = None) -> str:
        base = posixpath.join(self.root, name) if not self.is_local else os.path.join(self.root, name)
        if file is None:
            return base
        return posixpath.join(base, file) if not self.is_local else os.path.join(base, file)

    def done(self) -> set[str]:
        """Names of the complete entries (one recursive listing; a missing cache is empty)."""
        if self.is_local:
            if not os.path.isdir(self.root):
                return set()
            return {e.name for e in os.scandir(self.root)
                    if not e.name.startswith(".") and os.path.isfile(os.path.join(e.path, SUMMARY_MARKER))}
        self.fs.invalidate_cache()
        try:
            found = self.fs.find(self.root, withdirs=False)
        except FileNotFoundError:
            return set()
        marker = "/" + SUMMARY_MARKER
        return {posixpath.basename(posixpath.dirname(p)) for p in found if p.endswith(marker)}

    def staging(self) -> Path:
        """A fresh local folder to build an entry in (inside the cache on a local path, so publishing renames)."""
        if self.is_local:
            os.makedirs(self.root, exist_ok=True)
            return Path(tempfile.mkdtemp(prefix=".tmp-", dir=self.root))
        return Path(tempfile.mkdtemp(prefix="pytorch-tb-profiler-entry-"))

    def publish(self, built: Path, name: str) -> None:
        """Seal a built entry (its manifest) and put it in place: on a path, renamed whole (an entry another
        process published first wins: ``entries.publish``); on a store, the tables, then the manifest, the
        model's ``meta.json``, the summary marker last. ``built`` is consumed."""
        entries.seal(built)
        if self.is_local:
            (built / entries.LOCK).touch()
            entries.publish(built, Path(self.path(name)))
            return
        try:
            files = [f for f in built.iterdir() if f.is_file() and not f.name.startswith(".")]
            for marker in (None, *_MARKERS):
                batch = [f for f in files if (f.name if f.name in _MARKERS else None) == marker]
                if batch:
                    self.fs.put([str(f) for f in batch], [self.path(name, f.name) for f in batch])
        finally:
            shutil.rmtree(built, ignore_errors=True)

    def fetch(self, names: list[str], into: Path, summary_only: bool) -> None:
        """Copy entries into local folders ``into/<name>`` (batched: concurrent requests on object stores). The
        files that mark an entry complete come last (the model's ``meta.json``, then the summary marker), so an
        interrupted or ongoing copy is never taken for a complete local entry."""
        if not names:
            return
        if summary_only:
            pairs = [(self.path(n, f), into / n / f) for n in names for f in (*SUMMARY_FILES, MANIFEST)]
        else:
            pairs = [(p, into / n / posixpath.basename(p)) for n in names for p in self._files(n)
                     if not posixpath.basename(p).startswith(".")]
        for marker in (None, *_MARKERS):
            batch = [(r, local) for r, local in pairs if (local.name if local.name in _MARKERS else None) == marker]
            for _, local in batch:
                local.parent.mkdir(parents=True, exist_ok=True)
            if batch:
                self.fs.get([r for r, _ in batch], [str(local) for _, local in batch])

    def _files(self, name: str) -> list[str]:
        listed = self.fs.ls(self.path(name), detail=False)
        return [str(p) for p in listed if posixpath.basename(str(p)) not in ("", ".")]
