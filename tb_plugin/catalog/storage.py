"""The storage seam: every byte the plugin reads goes through an fsspec filesystem chosen from the logdir URL.

Local paths use fsspec's local filesystem, so remote stores (Azure Blob, S3, GCS, HDFS) plug in by URL alone
and the catalog and loader never branch on where a file lives. Which filesystem and which credentials a URL gets
is decided in :mod:`.remote`, the same way for the listing here and for the reading in a loader process (which
gets the :class:`~.remote.Access` captured when the logdir was opened). Nothing here ever writes.
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass
from typing import Any, BinaryIO

import fsspec

from . import remote
from .remote import Access, Location, RemoteError

__all__ = ["Access", "FileInfo", "NotRegularFile", "RemoteError", "Storage", "open_url"]


@dataclass(frozen=True)
class FileInfo:
    """One file found by a listing: its full path in the filesystem, size, modification stamp and etag if any.

    ``problem`` says why the listing already knows the file cannot be loaded (a FIFO or a device under a trace
    file's name): such a file is shown as failed at once and never opened.
    """

    path: str
    size: int
    mtime: float
    etag: str | None = None
    problem: str | None = None


class NotRegularFile(OSError):
    """A local path that is a FIFO, socket, device or directory: reading it may block forever or never end."""


_SPECIAL_KINDS = ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
                  (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                  (stat.S_ISDIR, "a directory"))


def not_regular(mode: int) -> str | None:
    """Why a file of this ``st_mode`` is not read (``None`` for a regular file)."""
    if stat.S_ISREG(mode):
        return None
    kind = next((text for test, text in _SPECIAL_KINDS if test(mode)), "a special file")
    return f"not a regular file but {kind}"


class Storage:
    """A logdir root on some filesystem: recursive listing and reading.

    Construction checks the URL and the optional package for its store (raising :class:`RemoteError` with a
    message for the user); it makes no request.
    """

    def __init__(self, root: str) -> None:
        self.url = remote.scrub_url(root)  # as shown: a SAS token in the URL stays out of sight
        self.location: Location = remote.resolve(root)
        self.access: Access = self.location.access
        self.fs: fsspec.AbstractFileSystem = self.location.fs
        self.root = self.location.path.rstrip("/") or self.location.path

    @property
    def is_local(self) -> bool:
        return self.location.store == "local"

    @property
    def file_access(self) -> Access | None:
        """What a listed file is opened with: the credentials the listing used, none for a local file."""
        return None if self.is_local else self.access

    def list_files(self) -> list[FileInfo]:
        """All files under the root, with one recursive listing (one request per page on object stores)."""
        if self.is_local:
            return _walk_local(self.root)
        loc = self.location
        self.fs.invalidate_cache()  # some backends cache listings: each scan must see what changed since
        try:
            found = self.fs.find(self.root, withdirs=False, detail=True)
            if not isinstance(found, dict):  # adlfs answers a logdir that is one blob with a bare list
                found = {p: self.fs.info(p) for p in found}
            missing = not found and loc.store == "azure" and not remote.azure_container_exists(loc)
        except Exception as err:  # noqa: BLE001 - every backend error becomes a message for the user
            if isinstance(err, FileNotFoundError) and not loc.is_object_store:
                return []  # a missing folder is an empty logdir, as a missing local one is
            raise RemoteError(self.explain(err)) from None
        if missing:  # adlfs lists a missing container as empty
            raise RemoteError(remote.azure_missing_message(loc))
        return [FileInfo(path=p, size=int(info.get("size") or 0), mtime=listed_mtime(info), etag=_etag(info))
                for p, info in found.items() if info.get("type", "file") != "directory"]

    def relative(self, path: str) -> str:
        """``path`` relative to the root, with ``/`` separators."""
        root = self.root.rstrip("/")
        return path[len(root) + 1:] if path.startswith(root + "/") else path

    def display(self, path: str) -> str:
        """A path as the user wrote it (URL form for remote stores): what the loader opens again."""
        return self.location.to_url(path)

    def explain(self, err: BaseException) -> str:
        """Why listing failed, for the UI (secrets scrubbed)."""
        if isinstance(err, RemoteError):
            return remote.scrub(str(err), self.access)
        return remote.explain(err, self.location)


def _walk_local(root: str) -> list[FileInfo]:
    """Local listing that follows symlinked run directories (fsspec's does not), without looping on cycles."""
    out: list[FileInfo] = []
    seen: set[str] = set()
    for directory, subdirs, files in os.walk(root, followlinks=True):
        real = os.path.realpath(directory)
        if real in seen:
            subdirs[:] = []
            continue
        seen.add(real)
        subdirs.sort()
        for name in files:
            path = os.path.join(directory, name)
            try:
                st = os.stat(path)
            except OSError:  # a dangling link still shows up, so the loader can report it as unreadable
                out.append(FileInfo(path=path, size=0, mtime=0.0))
                continue
            out.append(FileInfo(path=path, size=st.st_size, mtime=st.st_mtime, problem=not_regular(st.st_mode)))
    return out


FINGERPRINT_BLOCKS = 16
FINGERPRINT_BLOCK = 4096


def local_fingerprint(path: str, size: int) -> str | None:
    """A cheap content tag for a local file: a hash of 16 blocks of 4 KiB spread evenly over it (the first and the
    last among them), so a file rewritten with the same size and mtime (``cp -p``, a coarse clock) is parsed
    again; a gzip file's last block holds the CRC of all its content. Reads 64 KiB whatever the size; None when
    the file cannot be read (the loader then reports why)."""
    digest = hashlib.blake2b(str(size).encode(), digest_size=16)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        if not_regular(os.fstat(fd).st_mode) is not None:
            return None
        last = max(0, size - FINGERPRINT_BLOCK)
        offsets = sorted({last * k // (FINGERPRINT_BLOCKS - 1) for k in range(FINGERPRINT_BLOCKS)})
        for offset in offsets:
            digest.update(os.pread(fd, FINGERPRINT_BLOCK, offset))
    except OSError:
        return None
    finally:
        os.close(fd)
    return "content:" + digest.hexdigest()


def open_local(path: str) -> tuple[BinaryIO, os.stat_result]:
    """Open a local file for reading, refusing anything but a regular file, without ever blocking.

    Opening a FIFO waits for a writer forever, and a device may never end; a listing that saw a regular file
    does not make the path one when it is opened (it may have been replaced since), so the check is on the
    opened descriptor. Returns the stream and the descriptor's ``stat`` (what was really opened).
    """
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        problem = not_regular(st.st_mode)
        if problem is not None:
            raise NotRegularFile(0, problem, path)
        return os.fdopen(fd, "rb"), st
    except BaseException:
        os.close(fd)
        raise


def listed_mtime(info: dict[str, Any]) -> float:
    """The modification time a listing gives, whichever key the store uses (0 when none)."""
    for key in ("mtime", "LastModified", "last_modified", "updated", "created"):
        value = info.get(key)
        if value is None:
            continue
        if isinstance(value, (int, float)):
            return float(value)
        if isinstance(value, str):
            try:
                from datetime import datetime

                return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
            except ValueError:
                continue
        timestamp = getattr(value, "timestamp", None)
        if callable(timestamp):
            return float(timestamp())
    return 0.0


def _etag(info: dict[str, Any]) -> str | None:
    """The store's content tag (Azure/S3 ETag, GCS generation) when it gives one."""
    for key in ("etag", "ETag", "generation"):
        value = info.get(key)
        if value:
            return str(value).strip('"')
    return None


def open_url(url: str, access: Access | None = None) -> tuple[BinaryIO, int | None]:
    """Open a single file by path or URL, with the credentials of ``access`` (captured when the logdir was opened;
    the current environment when ``None``); returns the stream and its size when known."""
    loc = remote.resolve(url, access)
    handle: Any
    size: int | None
    if loc.is_object_store:
        # whole-file sequential reads: each read() is one ranged request, no read-ahead cache to copy through
        handle = loc.fs.open(loc.path, "rb", cache_type="none")
        known = getattr(handle, "size", None)
        size = int(known) if known is not None else None
        return handle, size
    if loc.store == "local":
        handle, st = open_local(loc.path)
        return handle, st.st_size
    try:
        size = int(loc.fs.size(loc.path) or 0)
    except (OSError, TypeError, ValueError):
        size = None
    handle = loc.fs.open(loc.path, "rb")
    return handle, size
