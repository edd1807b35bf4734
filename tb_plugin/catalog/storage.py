"""The storage seam: every byte the plugin reads goes through an fsspec filesystem chosen from the logdir URL.

Local paths use fsspec's local filesystem, so remote stores (Azure Blob, S3, GCS, HDFS) plug in by URL alone
and the catalog and loader never branch on where a file lives. Nothing here ever writes: the logdir is read-only.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, BinaryIO

import fsspec
from fsspec.core import url_to_fs


@dataclass(frozen=True)
class FileInfo:
    """One file found by a listing: its full path in the filesystem, size and modification stamp."""

    path: str
    size: int
    mtime: float


class Storage:
    """A logdir root on some filesystem: recursive listing and reading."""

    def __init__(self, root: str) -> None:
        self.url = root
        expanded = os.path.expanduser(os.path.expandvars(root)) if "://" not in root else root
        self.fs: fsspec.AbstractFileSystem
        self.fs, path = url_to_fs(expanded)
        self.root = path.rstrip("/") or path

    @property
    def is_local(self) -> bool:
        return "file" in _protocols(self.fs)

    def list_files(self) -> list[FileInfo]:
        """All files under the root, with one recursive listing (one request per page on object stores)."""
        if self.is_local:
            return _walk_local(self.root)
        if not self.fs.exists(self.root):
            return []
        found = self.fs.find(self.root, withdirs=False, detail=True)
        return [FileInfo(path=p, size=int(info.get("size") or 0), mtime=_mtime(info)) for p, info in found.items()]

    def relative(self, path: str) -> str:
        """``path`` relative to the root, with ``/`` separators."""
        root = self.root.rstrip("/")
        return path[len(root) + 1:] if path.startswith(root + "/") else path

    def open(self, path: str) -> BinaryIO:
        handle: Any = self.fs.open(path, "rb")
        return handle  # type: ignore[no-any-return]

    def display(self, path: str) -> str:
        """A path as the user wrote it (URL form for remote stores)."""
        return path if self.is_local else self.fs.unstrip_protocol(path)


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
            out.append(FileInfo(path=path, size=st.st_size, mtime=st.st_mtime))
    return out


def _protocols(fs: fsspec.AbstractFileSystem) -> tuple[str, ...]:
    proto = fs.protocol
    return (proto,) if isinstance(proto, str) else tuple(proto)


def _mtime(info: dict[str, Any]) -> float:
    for key in ("mtime", "LastModified", "last_modified", "updated", "created"):
        value = info.get(key)
        if value is None:
            continue
        if isinstance(value, (int, float)):
            return float(value)
        timestamp = getattr(value, "timestamp", None)
        if callable(timestamp):
            return float(timestamp())
    return 0.0


def open_url(url: str) -> tuple[BinaryIO, int | None]:
    """Open a single file by path or URL; returns the stream and its size when known."""
    fs, path = url_to_fs(os.path.expanduser(url) if "://" not in url else url)
    try:
        size = int(fs.size(path) or 0)
    except (OSError, TypeError, ValueError):
        size = None
    handle: Any = fs.open(path, "rb")
    return handle, size
