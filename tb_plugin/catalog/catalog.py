"""The catalog: which runs, workers and spans exist under the logdir(s), rescanned in the background.

A run is a directory that directly holds trace files; its name is its path relative to the logdir (the logdir's
own name when the traces sit at its top). ``--logdir_spec name:path`` prefixes run names with ``name/``.
"""

from __future__ import annotations

import functools
import os
import posixpath
import re
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from . import remote
from .names import (
    LISTENER_PREFIX,
    TraceName,
    capture_parts,
    file_name,
    number_spans,
    parse_any_json_name,
    parse_trace_name,
)
from .sniff import classify_file, is_json_name, is_snapshot_name, snapshot_file
from .storage import Access, FileInfo, Storage, local_fingerprint

_URL = re.compile(r"[a-zA-Z][0-9a-zA-Z.+-]*://")

# (url, size, mtime, etag): one version of one file; the parse cache is keyed on it (``jobs.cache.entry_name``)
Identity = tuple[str, int, float, str | None]

# A file younger than this that changed since the last scan may still be being written: wait for the next scan.
SETTLE_SECONDS = 2.0


class _ListedFile:
    """What a listed file (a trace or an export) is besides its role: its shown name, its version, where it lives.

    The one place these are derived from the URL, so the scheduler, the loader and the routes never rebuild them.
    """

    url: str
    size: int
    mtime: float
    etag: str | None

    @property
    def filename(self) -> str:
        return file_name(self.url)

    @property
    def identity(self) -> Identity:
        """Changes whenever the file's content may have changed: the load cache is keyed on it."""
        return (self.url, self.size, self.mtime, self.etag)

    @property
    def is_remote(self) -> bool:
        return remote.is_remote(self.url)


@dataclass(frozen=True)
class TraceFile(_ListedFile):
    """One trace file and the (run, worker, span) it is shown as: what the catalog lists, the scheduler loads and
    the workspace answers with, passed whole (never unpacked into its fields and packed again)."""

    run: str
    worker: str
    span: str
    url: str  # what the loader opens: a local path or a full fsspec URL (never with a secret in it)
    size: int
    mtime: float
    etag: str | None = None  # the store's content tag, when it gives one
    problem: str | None = None  # why the listing already knows it cannot be loaded (not a regular file)
    stamp: int | None = None  # the time stamp of the file name: what a span's stable key is (see names.span_keys)
    # credentials and endpoints the loader opens ``url`` with (the same the listing used); not part of equality
    access: Access | None = field(default=None, compare=False, repr=False)

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.run, self.worker, self.span)


@dataclass(frozen=True)
class ExportFile(_ListedFile):
    """A ``prof.export_memory_timeline`` file (``kind`` ``"timeline"`` or ``"raw"``) found under a logdir.

    ``folder`` is the run name its folder would have (an export is matched to a trace of that run, or of any run
    when no trace sits in its folder, by time: see ``Workspace.exports_of``). Never loaded as a trace.
    """

    folder: str
    url: str
    kind: str
    size: int
    mtime: float
    etag: str | None = None
    access: Access | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class CaptureFolder:
    """A run folder as a place to capture into (``tb_plugin.capture``): its URL (where the traces go, with
    ``.capture/`` below it), the credentials the listing used, and the listener files a running job keeps fresh
    there, as (file name, mtime). A folder of traces with no listener has ``listeners == ()``."""

    run: str
    url: str
    access: Access | None = field(default=None, compare=False, repr=False)
    listeners: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True)
class SnapshotFile(_ListedFile):
    """A PyTorch allocator snapshot (``torch.cuda.memory._dump_snapshot``) found under a logdir, recognised by its
    content; shown under the run its folder is (``folder``), never loaded as a trace."""

    folder: str
    url: str
    size: int
    mtime: float
    etag: str | None = None
    access: Access | None = field(default=None, compare=False, repr=False)

    @property
    def key(self) -> tuple[str, str]:
        return (self.folder, self.filename)


@dataclass(frozen=True)
class Root:
    """One logdir: an optional name (from ``--logdir_spec``) and its storage."""

    name: str | None
    storage: Storage


def parse_logdir_spec(spec: str) -> list[tuple[str | None, str]]:
    """``name1:path1,name2:path2`` (names optional) into (name, path) pairs; URLs and drive letters stay whole."""
    pairs: list[tuple[str | None, str]] = []
    for part in filter(None, (p.strip() for p in spec.split(","))):
        # TensorBoard's own rule: a name only when the part is not a URL, not absolute, and no drive letter.
        if ":" in part and not _URL.match(part) and not part.startswith("/") and not os.path.splitdrive(part)[0]:
            name, _, path = part.partition(":")
            pairs.append((name, path))
        else:
            pairs.append((None, part))
    return pairs


class Catalog:
    """Lists trace files under the roots; each ``scan()`` returns the files that are ready to be loaded."""

    def __init__(self, roots: list[Root], any_json: bool = False) -> None:
        self.roots = roots
        # also any *.json[.gz] whose content is a trace (``--profiler_any_json``); sniffed once per file version
        self.any_json = any_json
        self._sniffed: dict[str, tuple[tuple[int, float, str | None], str | None, str | None]] = {}
        self.rejected: dict[str, str] = {}  # path -> why a sniffed *.json file is not a trace (last scan)
        self.exports: list[ExportFile] = []  # torch memory timeline exports (last scan)
        self.snapshots: list[SnapshotFile] = []  # allocator snapshots (last scan)
        self._snapshot_heads: dict[str, tuple[tuple[int, float, str | None], bool]] = {}
        self._previous: dict[str, FileInfo] = {}
        # path → the settled version last listed as a trace, and its content tag: listed on while the file is being
        # rewritten (settling), so its run does not vanish and its last good parse is served meanwhile
        self._settled: dict[str, tuple[FileInfo, str | None]] = {}
        self._settling_now: dict[str, tuple[FileInfo, str | None]] = {}  # the same, being built by a scan
        self._last_listing: dict[str, list[FileInfo]] = {}  # root url -> its last successful listing
        self.errors: dict[str, str] = {}  # root url -> reason the last listing failed
        self.pending: int = 0  # files seen but still settling
        self.capture: dict[str, CaptureFolder] = {}  # run name -> folder where a job listens (last scan)

    def scan(self, now: float | None = None) -> list[TraceFile]:
        """The files ready to load; ``now=math.inf`` takes every file as finished (a CLI run after profiling)."""
        now = time.time() if now is None else now
        seen: dict[str, FileInfo] = {}
        files: list[TraceFile] = []
        pending = 0
        self.rejected = {}
        self._settling_now = {}
        exports: list[ExportFile] = []
        capture: dict[str, CaptureFolder] = {}
        snapshots: list[SnapshotFile] = []
        for root in self.roots:
            stable = []
            for info in self._listing(root):
                if _take_capture_file(root, info, capture):
                    continue
                named = self._name(info.path)
                base = posixpath.basename(info.path)
                snapshot = named is None and is_snapshot_name(base)
                if named is None and not is_json_name(base) and not snapshot:
                    continue
                seen[info.path] = info
                if self._settling(info, now):
                    # a young export counts too: a logdir scanned once (no --reload_interval) rescans until it
                    # settles, or an export written just before TensorBoard started would never be listed
                    pending += 1
                    if named is not None and info.path in self._settled:  # rewritten: listed as it was
                        stable.append((named.name, self._settled[info.path][0]))
                    continue
                if snapshot:
                    if self._is_snapshot(root, info):
                        snapshots.append(_snapshot_file(root, info))
                    continue
                taken = self._take(root, info, named)
                if isinstance(taken, ExportFile):
                    exports.append(taken)
                elif taken is not None:
                    stable.append((taken, info))
            files.extend(_files_of_root(root, stable, functools.partial(self._tag, root)))
        self._settled = self._settling_now
        self.exports = exports
        self.capture = capture
        self.snapshots = snapshots
        self._previous = seen
        self._sniffed = {p: v for p, v in self._sniffed.items() if p in seen}
        self._snapshot_heads = {p: v for p, v in self._snapshot_heads.items() if p in seen}
        self.pending = pending
        return files

    def _listing(self, root: Root) -> list[FileInfo]:
        """The root's files. A store that cannot be listed now says why in ``errors`` and keeps showing what it
        last listed (it may be briefly unreachable: loaded runs stay usable)."""
        url = root.storage.url
        try:
            listing = root.storage.list_files()
        except Exception as err:  # noqa: BLE001 - any storage failure becomes a message for this root
            self.errors[url] = root.storage.explain(err)
            return self._last_listing.get(url, [])
        self.errors.pop(url, None)
        self._last_listing[url] = listing
        return listing

    def _tag(self, root: Root, info: FileInfo) -> str | None:
        """The content tag of a file listed as a trace (see :func:`_content_tag`): the one it had when it settled,
        for a file being rewritten (so it keeps its identity, and its parse), else read now. Remembered for the
        next scan."""
        held = self._settled.get(info.path)
        tag = held[1] if held is not None and held[0] is info else _content_tag(root, info)
        self._settling_now[info.path] = (info, tag)
        return tag

    def _settling(self, info: FileInfo, now: float) -> bool:
        """Changed since the last scan and younger than ``SETTLE_SECONDS``: it may still be being written."""
        before = self._previous.get(info.path)
        unchanged = before is not None and _version(before) == _version(info)
        return not (unchanged or (now - info.mtime) >= SETTLE_SECONDS or info.mtime == 0.0)

    def _take(self, root: Root, info: FileInfo, named: _Named | None) -> TraceName | ExportFile | None:
        """What a settled file is to the catalog: a trace (its name), a memory timeline export, or neither (a
        file named as a trace that is not one says why in ``rejected``)."""
        if named is not None and not named.sniff:
            return named.name
        export, reason = self._classify(root, info)
        if export is not None:
            return _export_file(root, info, export)
        if named is not None and reason is not None:
            self.rejected[info.path] = reason
            return None
        return named.name if named is not None else None

    def _name(self, path: str) -> _Named | None:
        """How a listed file is named as a trace, and whether its content must be sniffed first."""
        base = posixpath.basename(path)
        parsed = parse_trace_name(base)
        if parsed is not None:
            return _Named(parsed, sniff=False)
        if self.any_json:
            other = parse_any_json_name(base)
            if other is not None:
                return _Named(other, sniff=True)
        return None

    def _classify(self, root: Root, info: FileInfo) -> tuple[str | None, str | None]:
        """(memory export kind, why it is not a trace) of a ``*.json`` file (see ``sniff.classify_file``);
        remembered per file version, so each version is read once."""
        if info.problem is not None:
            return None, info.problem
        known = self._sniffed.get(info.path)
        if known is not None and known[0] == _version(info):
            return known[1], known[2]
        kind, reason = classify_file(root.storage.display(info.path), root.storage.file_access)
        self._sniffed[info.path] = (_version(info), kind, reason)
        return kind, reason


    def _is_snapshot(self, root: Root, info: FileInfo) -> bool:
        """Whether a ``*.pickle[.gz]`` file is an allocator snapshot by its first bytes, read once per version."""
        if info.problem is not None:
            return False
        known = self._snapshot_heads.get(info.path)
        if known is not None and known[0] == _version(info):
            return known[1]
        found = snapshot_file(root.storage.display(info.path), root.storage.file_access)
        self._snapshot_heads[info.path] = (_version(info), found)
        return found


@dataclass(frozen=True)
class _Named:
    name: TraceName
    sniff: bool


def _version(info: FileInfo) -> tuple[int, float, str | None]:
    """What changes while a file is written: size and mtime, and the etag where the store has one.

    Object stores give the upload's last-modified time (the server's clock): a young or future stamp waits for
    the next scan, where an unchanged (size, mtime, etag) means the upload is complete.
    """
    return (info.size, info.mtime, info.etag)


def _content_tag(root: Root, info: FileInfo) -> str | None:
    """The store's etag; for a local regular file, a cheap content fingerprint in its place, so that a file changed
    without a new size or mtime gets a new parse (and an unchanged one keeps its cached parse when touched)."""
    if info.etag is not None or not root.storage.is_local or info.problem is not None:
        return info.etag
    return local_fingerprint(info.path, info.size)


def _run_name(root: Root, directory: str) -> str:
    rel = root.storage.relative(directory) if directory != root.storage.root.rstrip("/") else ""
    if root.name is not None:
        return f"{root.name}/{rel}" if rel else root.name
    if rel:
        return rel
    base = posixpath.basename(root.storage.root.rstrip("/"))
    return base or root.storage.url


def _take_capture_file(root: Root, info: FileInfo, found: dict[str, CaptureFolder]) -> bool:
    """Whether a listed file lies in a run folder's ``.capture/`` (then it is never a trace); a listener file
    also makes its run folder a capture target."""
    parts = capture_parts(info.path)
    if parts is None:
        return False
    folder, name = parts
    if name.startswith(LISTENER_PREFIX) and name.endswith(".json") and "/" not in name:
        run = _run_name(root, folder)
        known = found.get(run)
        listeners = (known.listeners if known else ()) + ((name, info.mtime),)
        found[run] = CaptureFolder(run, root.storage.display(folder), root.storage.file_access, listeners)
    return True


def _export_file(root: Root, info: FileInfo, kind: str) -> ExportFile:
    return ExportFile(folder=_run_name(root, posixpath.dirname(info.path)),
                      url=root.storage.display(info.path), kind=kind, size=info.size, mtime=info.mtime,
                      etag=info.etag, access=root.storage.file_access)


def _snapshot_file(root: Root, info: FileInfo) -> SnapshotFile:
    return SnapshotFile(folder=_run_name(root, posixpath.dirname(info.path)), url=root.storage.display(info.path),
                        size=info.size, mtime=info.mtime, etag=_content_tag(root, info),
                        access=root.storage.file_access)


def _files_of_root(root: Root, infos: list[tuple[TraceName, FileInfo]],
                   tag: Callable[[FileInfo], str | None]) -> list[TraceFile]:
    by_worker: dict[tuple[str, str], list[tuple[int | None, FileInfo]]] = defaultdict(list)
    for parsed, info in infos:
        directory = posixpath.dirname(info.path)
        by_worker[(directory, parsed.worker)].append((parsed.stamp, info))
    files: list[TraceFile] = []
    for (directory, worker), entries in by_worker.items():
        # .json and .json.gz of the same stamp: keep one (the first by path) so a span is never ambiguous.
        unique: dict[int | None, FileInfo] = {}
        for stamp, info in sorted(entries, key=lambda e: e[1].path):
            unique.setdefault(stamp, info)
        stamps = list(unique)
        for stamp, span in zip(stamps, number_spans(stamps)):
            info = unique[stamp]
            files.append(TraceFile(run=_run_name(root, directory), worker=worker, span=span,
                                   url=root.storage.display(info.path), size=info.size, mtime=info.mtime,
                                   etag=tag(info), problem=info.problem, stamp=stamp,
                                   access=root.storage.file_access))
    return files
