"""The parse cache: one directory of Arrow files per (file URL, size, etag or mtime, model version).

Workers write here and the server opens from here, so a parse crosses the process boundary without pickling and
survives restarts. It lives in the user's cache directory, never in the logdir. Each entry's format, and how it is
written, checked and opened beside other processes sharing the folder, is :mod:`.entries`.

The size bound is kept with a running total: the folder is listed once (at the first trim, and again at most every
:data:`RESCAN_SECONDS` to count what other processes added), and each entry this process publishes or opens is added
to the total as it comes, so trimming after a load costs nothing until the bound is reached (it listed the whole
cache after every load, which made 5,000 small runs load in quadratic time).
"""

from __future__ import annotations

import contextlib
import getpass
import hashlib
import json
import logging
import os
import re
import shutil
import stat
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Protocol

import pyarrow as pa

from ..catalog.catalog import Identity, TraceFile
from ..loader import MODEL_VERSION
from ..model.tables import TraceModel
from . import entries
from .entries import BadEntry, Opened

log = logging.getLogger(__name__)

# A remote trace's original bytes, kept in its cache entry (counted in the cache's size bound).
SOURCE_FILE = "source.bin"
# The one file of the entry of a file version that failed to load for a lasting reason: why.
FAILURE_FILE = "failed.json"
# The last file written into a preprocessed entry (``pytorch-tb-profiler preprocess``): the rank's summary beside its
# model. An entry that has it is complete, and the server loads its summary only, the model on first use.
SUMMARY_MARKER = "summary.json"
# How often the running total is checked against a listing (other processes sharing the folder add entries).
RESCAN_SECONDS = 600.0
# Temp folders older than this were left by killed workers.
STALE_SECONDS = 3600.0
_ENTRY = re.compile(r"v\d+-[0-9a-f]{32}")
_OLD_FALLBACK = re.compile(r"pytorch-tb-profiler-[a-z0-9_]{8}")
_warned: set[str] = set()  # unusable cache folders already said (once per process, however many caches open)


class Later(Protocol):
    """What the loader process still computes after the trace turned ready (``Stored.save`` leaves it when it would
    delay "ready" much): ``parts``, each with the seconds after ready it is expected to land in."""

    parts: dict[str, float]

    def run(self, stage: Callable[[], Path], place: Callable[[Path, str], bool],
            report: Callable[[str, bool], None]) -> None:
        """Compute every part into a folder ``stage()`` gives, ``place(folder, part)`` it into the published entry
        (True when it is there), and ``report(part, ok)`` as each ends."""

    def rebase(self, files: dict[str, pa.Buffer]) -> None:
        """Compute the parts not started yet on the model of ``files`` (the same parse, mapped from the file handed
        to the server: ``jobs.handover``), so that their processes and the server share its pages."""


class Stored(Protocol):
    """Results derived from a model that the loader process computes and stores in the model's entry, and the server
    gives back to the model when it opens the entry (the workspace passes one: the Trace view's index and the first
    views' answers). Picklable: it travels to the loader process. ``save`` opens the model saved in ``directory``
    itself (as the server will: the loader has dropped its own copy by then), for ``file``, in ``processes``
    processes at most (the loader's share of the machine) taking ``memory`` bytes together at most (None: no bound);
    given the seconds the parse took, it may leave part of the work for after "ready" (a :class:`Later`: added to the
    published entry part by part, ``entries.add_part``). ``built``: the parse in this process's memory while it is
    being written into ``directory``; ``saved()`` returns once it is there, and is called before ``save`` returns
    (work that needs only the tables may start on ``built`` meanwhile).
    ``expect`` tells the server's model which parts are coming, ``abandon`` that some (all: None) will not."""

    def save(self, directory: str, file: TraceFile | None, processes: int,
             parse_seconds: float | None = None, memory: int | None = None, built: TraceModel | None = None,
             saved: Callable[[], None] | None = None) -> Later | None: ...

    def attach(self, model: TraceModel, files: dict[str, pa.Buffer]) -> None: ...

    def expect(self, model: TraceModel, file: TraceFile, parts: dict[str, float]) -> None: ...

    def abandon(self, model: TraceModel, parts: Iterable[str] | None = None) -> None: ...


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
        wanted = Path(directory) if directory else default_cache_dir()
        problem = _unusable(wanted)
        # why the wanted folder is not used (None when it is): the workspace shows it where the user looks
        self.problem: str | None = None
        if problem is not None:
            fallback = _fallback_dir()
            self.problem = (f"the cache folder {wanted} cannot be used ({problem}); parsed traces are cached in "
                            f"{fallback} instead")
            if str(wanted) not in _warned:
                _warned.add(str(wanted))
                log.warning("%s", self.problem)
                _remove_old_fallbacks(fallback.parent)
            wanted = fallback
        self.directory = wanted
        self.max_bytes = max_bytes
        self._lock = threading.Lock()
        self._sizes: OrderedDict[str, int] = OrderedDict()  # entry name → bytes, least recently used first
        self._total = 0
        self._listed_at: float | None = None  # time.monotonic() of the last listing

    def entry(self, identity: Identity) -> Path:
        """Where the parse of this file version lives (see :func:`entry_name`)."""
        return self.directory / entry_name(identity)

    def has(self, entry: Path) -> bool:
        """An entry with a model is there (whether it is whole and intact is checked when it is opened, and a
        damaged one is removed, saying why)."""
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
        with self._lock:
            if entry.name in self._sizes:
                self._sizes.move_to_end(entry.name)

    # ---- writing and opening ------------------------------------------------------------------------------------
    def staging(self) -> Path:
        """A private folder to build an entry in (see :func:`entries.staging`)."""
        return entries.staging(self.directory)

    def publish(self, built: Path, entry: Path) -> None:
        """Seal ``built`` and put it in place as ``entry`` (another process's whole entry, published first, wins)."""
        entries.seal(built)
        entries.publish(built, entry)

    def open(self, entry: Path, required: Iterable[str], optional: Callable[[str], bool] = lambda name: False
             ) -> Opened:
        """The verified private copy of these files of ``entry`` (:func:`entries.open_entry`); BadEntry when it
        cannot be used. Counts the entry as used now (it is the most recent for eviction)."""
        opened = entries.open_entry(entry, required, optional, self.directory)
        self.touch(entry)
        self.added(entry, opened.bytes)
        return opened

    def open_part(self, entry: Path, name: str) -> Opened:
        """The verified copy of the part ``name`` added to ``entry`` after it was published
        (:func:`entries.open_part`); a damaged part is removed (its views are computed on first use) and BadEntry
        raised. The entry's size counts the part from now on."""
        try:
            opened = entries.open_part(entry, name, self.directory)
        except BadEntry:
            entries.discard(entry / f"{entries.PART_PREFIX}{name}")
            raise
        self.added(entry)
        return opened

    def discard(self, entry: Path, reason: str) -> None:
        """Remove a damaged entry (a miss from now on: parsed again), saying why in the log (quietly for an entry
        an older version wrote, without a manifest: expected once after an upgrade)."""
        older = entries.NO_MANIFEST in reason
        log.log(logging.INFO if older else logging.WARNING, "discarding the cache entry %s: %s; parsing the trace "
                "again", entry, reason)
        if entries.discard(entry):
            self._forget(entry.name)

    # ---- the size bound -----------------------------------------------------------------------------------------
    def added(self, entry: Path, size: int | None = None) -> None:
        """Count an entry this process published or opened (its size from its manifest, else measured)."""
        size = entries.entry_bytes(entry) if size is None else size
        with self._lock:
            self._total += size - self._sizes.pop(entry.name, 0)
            self._sizes[entry.name] = size

    def total_bytes(self) -> int:
        with self._lock:
            return self._total

    def evict(self, keep: set[Path] | Callable[[], set[Path]] | None = None) -> None:
        """Remove the least recently used entries until the cache fits ``max_bytes``; ``keep`` entries (or what the
        callable gives, asked only when something must go) are never removed, nor entries another process is
        reading. Costs nothing while the running total is within the bound.

        Other processes write and remove entries meanwhile, so any entry may be gone by the time it is measured or
        removed: a vanished entry is skipped, never an error (an error here would stop the loader thread)."""
        now = time.monotonic()
        if self._listed_at is None or now - self._listed_at > RESCAN_SECONDS:
            self._relist(now)
        with self._lock:
            if self._total <= self.max_bytes:
                return
            order = list(self._sizes.items())
        kept = (keep() if callable(keep) else keep) or set()
        names = {path.name for path in kept}
        for name, size in order:
            if self.total_bytes() <= self.max_bytes:
                break
            if name in names:
                continue
            if size > self.max_bytes:  # alone beyond the bound: say why a restart parses it again
                log.warning("the parse of %s (%d MB) is larger than the parse cache's bound (%d MB, "
                            "--profiler_cache_max_mb): not kept for a restart", _source(self.directory / name),
                            size >> 20, self.max_bytes >> 20)
            if entries.discard(self.directory / name):
                self._forget(name)

    def _forget(self, name: str) -> None:
        with self._lock:
            self._total -= self._sizes.pop(name, 0)

    def _relist(self, now: float) -> None:
        """List the folder once: every entry by age (oldest first) and size; temp folders of killed workers go."""
        found: list[tuple[float, str, int]] = []
        try:
            listing = list(os.scandir(self.directory))
        except OSError:
            listing = []
        for item in listing:
            with contextlib.suppress(OSError):
                if not item.is_dir(follow_symlinks=False):
                    continue
                if item.name.startswith((".tmp-", ".trash-")):
                    if time.time() - item.stat().st_mtime > STALE_SECONDS or item.name.startswith(".trash-"):
                        shutil.rmtree(item.path, ignore_errors=True)
                    continue
                if not item.name.startswith("."):
                    found.append((item.stat().st_mtime, item.name, entries.entry_bytes(Path(item.path))))
        found.sort()
        with self._lock:
            self._sizes = OrderedDict((name, size) for _, name, size in found)
            self._total = sum(self._sizes.values())
            self._listed_at = now


def _unusable(folder: Path) -> str | None:
    """Why entries cannot be written in ``folder`` (None when they can)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".probe-"):
            pass
    except OSError as err:
        return err.strerror or str(err)
    return None


def _fallback_dir() -> Path:
    """One folder per user in the temp folder, the same at every start (so it is reused, and bounded as any cache):
    made private to the user; one that is not a plain folder of theirs is not trusted (a fresh one is made)."""
    try:
        user = getpass.getuser()
    except Exception:  # noqa: BLE001 - no user name (a container without passwd entry): the uid
        user = str(os.getuid()) if hasattr(os, "getuid") else "user"
    folder = Path(tempfile.gettempdir()) / f"pytorch-tb-profiler-cache-{re.sub(r'[^A-Za-z0-9_.-]', '_', user)}"
    try:
        folder.mkdir(mode=0o700, exist_ok=True)
        info = os.lstat(folder)
        mine = not hasattr(os, "getuid") or info.st_uid == os.getuid()
        if stat.S_ISDIR(info.st_mode) and mine and _unusable(folder) is None:
            return folder
    except OSError:
        pass
    return Path(tempfile.mkdtemp(prefix="pytorch-tb-profiler-"))


def _remove_old_fallbacks(temp: Path) -> None:
    """Remove the temp caches earlier versions made at every start (``pytorch-tb-profiler-XXXXXXXX``, one per
    start, never removed): only folders of this user, untouched for an hour, holding nothing but cache entries."""
    with contextlib.suppress(OSError):
        for item in os.scandir(temp):
            if not _OLD_FALLBACK.fullmatch(item.name) or not item.is_dir(follow_symlinks=False):
                continue
            with contextlib.suppress(OSError):
                info = item.stat(follow_symlinks=False)
                if hasattr(os, "getuid") and info.st_uid != os.getuid():
                    continue
                if time.time() - info.st_mtime < STALE_SECONDS:
                    continue
                names = os.listdir(item.path)
                if all(_ENTRY.fullmatch(n) or n.startswith((".tmp-", ".probe-", ".trash-")) for n in names):
                    shutil.rmtree(item.path, ignore_errors=True)


def _source(entry: Path) -> str:
    """The trace file an entry holds the parse of (its model's ``source``), else the entry's folder."""
    try:
        source = json.loads((entry / "meta.json").read_text()).get("source")
    except (OSError, ValueError, AttributeError):
        source = None
    return str(source) if source else str(entry)


__all__ = ["SOURCE_FILE", "SUMMARY_MARKER", "BadEntry", "Later", "Opened", "ParseCache", "Stored", "default_cache_dir",
           "entry_name"]

