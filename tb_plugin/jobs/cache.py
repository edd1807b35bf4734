"""The parse cache: one directory of Arrow files per (file URL, size, etag or mtime, model version).

Workers write here and the server memory-maps from here, so a parse crosses the process boundary without a copy
and survives restarts. It lives in the user's cache directory, never in the logdir.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Protocol

from ..catalog.catalog import Identity, TraceFile
from ..loader import MODEL_VERSION
from ..model.tables import TraceModel

log = logging.getLogger(__name__)

# A remote trace's original bytes, kept in its cache entry (counted in the cache's size bound).
SOURCE_FILE = "source.bin"
# The one file of the entry of a file version that failed to load for a lasting reason: why.
FAILURE_FILE = "failed.json"
# The last file written into a preprocessed entry (``pytorch-tb-profiler preprocess``): the rank's summary beside its
# model. An entry that has it is complete, and the server loads its summary only, the model on first use.
SUMMARY_MARKER = "summary.json"


class Stored(Protocol):
    """Results derived from a model that the loader process computes and stores in the model's entry, and the server
    gives back to the model when it opens the entry (the workspace passes one: the Trace view's index and the first
    views' answers). Picklable: it travels to the loader process. ``save`` opens the model saved in ``directory``
    itself (as the server will: the loader has dropped its own copy by then), for ``file``, in ``processes``
    processes at most (the loader's share of the machine)."""

    def save(self, directory: str, file: TraceFile | None, processes: int) -> None: ...

    def attach(self, model: TraceModel, directory: str) -> None: ...


def entry_name(identity: Identity) -> str:
    """The name of a file version's cache entry (``TraceFile.identity``: url, size, mtime, etag): keyed by the etag
    where the store gives one (it changes with every upload, the last-modified time of a blob may not be precise),
    else by size and mtime. The same name in the local cache and in a shared one (``jobs.shared``), so a
    preprocessing cluster and a server agree on it."""
    url, size, mtime, etag = identity
    version = f"etag:{etag}" if etag else repr(mtime)
    digest = hashlib.sha256(f"{MODEL_VERSION}\0{url}\0{size}\0{version}".encode()).hexdigest()[:32]
    return f"v{MODEL_VERSION}-{digest}"


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "pytorch-tb-profiler"


class ParseCache:
    """Cache directory with a size bound; the least recently used parses are evicted first."""

    def __init__(self, directory: str | os.PathLike[str] | None = None, max_bytes: int = 4 << 30) -> None:
        path = Path(directory) if directory else default_cache_dir()
        try:
            path.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=path, prefix=".probe-"):
                pass
        except OSError:
            path = Path(tempfile.mkdtemp(prefix="pytorch-tb-profiler-"))
        self.directory = path
        self.max_bytes = max_bytes

    def entry(self, identity: Identity) -> Path:
        """Where the parse of this file version lives (see :func:`entry_name`)."""
        return self.directory / entry_name(identity)

    def has(self, entry: Path) -> bool:
        return (entry / "meta.json").is_file()

    def remember_failure(self, entry: Path, reason: str) -> None:
        """Keep why this file version cannot be loaded, in its entry (``failed.json``; the entry holds nothing
        else), so that a restart fails it at once instead of loading it again: a gzip bomb or a gigabyte of
        zeros costs one load, ever. Only lasting reasons (``loader.errors.TraceLoadError.lasting``); written
        atomically, and a cache that cannot be written is only a lost shortcut."""
        try:
            tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=self.directory))
            (tmp / FAILURE_FILE).write_text(json.dumps({"error": reason}))
            try:
                os.replace(tmp, entry)
            except OSError:  # an entry is there already (another server wrote it): keep that one
                shutil.rmtree(tmp, ignore_errors=True)
        except OSError as err:
            log.warning("cannot remember the failure of %s in the parse cache: %s", entry.name, err)

    def failure(self, entry: Path) -> str | None:
        """Why this file version failed to load before (:meth:`remember_failure`), or None."""
        path = entry / FAILURE_FILE
        try:
            error = json.loads(path.read_text()).get("error")
        except (OSError, ValueError, AttributeError):
            return None
        self.touch(entry)
        return str(error) if isinstance(error, str) else None

    def has_summary(self, entry: Path) -> bool:
        """The entry was preprocessed: its rank summary is there (the model too, unless only the summary was
        fetched from a shared cache so far)."""
        return (entry / SUMMARY_MARKER).is_file()

    def touch(self, entry: Path) -> None:
        with contextlib.suppress(OSError):
            os.utime(entry)

    def evict(self, keep: set[Path] | None = None) -> None:
        """Remove the oldest entries until the cache fits ``max_bytes``; ``keep`` entries are never removed.

        Other loader processes write and rename entries meanwhile, so any file listed here may be gone by the time
        it is measured: a vanished file is skipped, never an error (an error here would stop the loader thread)."""
        keep = keep or set()
        entries = []
        for child in self.directory.iterdir():
            if not child.is_dir() or child.name.startswith("."):
                continue
            mtime = _mtime(child)
            if mtime is not None:
                entries.append((mtime, _dir_bytes(child), child))
        total = sum(size for _, size, _ in entries)
        for _, size, child in sorted(entries):
            if total <= self.max_bytes:
                break
            if child in keep:
                continue
            shutil.rmtree(child, ignore_errors=True)
            total -= size
        # Leftover temp dirs from killed workers.
        for child in self.directory.glob(".tmp-*"):
            mtime = _mtime(child)
            if mtime is not None and time.time() - mtime > 3600:
                shutil.rmtree(child, ignore_errors=True)


def _mtime(path: Path) -> float | None:
    """``path``'s modification time, or None when it vanished since it was listed."""
    try:
        return path.stat().st_mtime
    except FileNotFoundError:
        return None


def _dir_bytes(folder: Path) -> int:
    """The bytes of the files directly in ``folder``, counting none that vanished since it was listed."""
    total = 0
    with contextlib.suppress(FileNotFoundError):
        for f in folder.iterdir():
            with contextlib.suppress(FileNotFoundError):
                if f.is_file():
                    total += f.stat().st_size
    return total
