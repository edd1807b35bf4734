"""A run folder and its ``.capture/``, local or on any fsspec store: the only place capture reads or writes.

Local folders use ``os`` (a job's poll is one ``scandir`` a second: no fsspec in the training process). URLs go
through :func:`tb_plugin.catalog.remote.resolve`, so a job and the server authenticate to a bucket the same way as
the catalog does (the job's environment gives the credentials). Writes are whole-file: a local file is written
under a temporary name and renamed into place, an object is one PUT, so a reader never sees half a file.
"""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from collections.abc import Callable
from typing import Any

from ..catalog import remote
from .protocol import CAPTURE_DIR

_TMP_PREFIX = ".tmp-"


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_FILE_MODE = 0o666 & ~_umask()  # what open() would create: the process's umask applied


class FolderError(OSError):
    """A read or write of the capture folder failed; ``str()`` names the place and the reason for a person."""


def _reason(err: BaseException) -> str:
    if isinstance(err, OSError) and err.strerror:
        return err.strerror
    return remote.scrub(str(err) or type(err).__name__)


class CaptureFolder:
    """One run folder: ``url`` is where traces go (a path or a URL), ``.capture/`` below it holds the requests."""

    def __init__(self, url: str, access: Any = None) -> None:
        self.url = url.rstrip("/") or url
        self.is_local = not remote.is_remote(url)
        if self.is_local:
            self._fs: Any = None
            path = url[len("file://"):] if url.lower().startswith("file://") else url
            self.path = os.path.abspath(os.path.expanduser(path))
        else:
            location = remote.resolve(url, access)
            self._fs, self.path = location.fs, location.path.rstrip("/")
        self.capture_path = self._join(self.path, CAPTURE_DIR)

    @property
    def shown(self) -> str:
        """The folder as a person would write it (a SAS token in a URL left out)."""
        return remote.scrub_url(self.url) if not self.is_local else self.path

    def _join(self, *parts: str) -> str:
        return os.path.join(*parts) if self.is_local else "/".join(parts)

    def _wrap(self, what: str, call: Callable[[], Any]) -> Any:
        try:
            return call()
        except FolderError:
            raise
        except (OSError, remote.RemoteError, ValueError, RuntimeError) as err:
            raise FolderError(f"cannot {what} {self.shown}/{CAPTURE_DIR}: {_reason(err)}") from err

    # ---- reading --------------------------------------------------------------------------------------------------
    def entries(self) -> list[tuple[str, float]]:
        """(name, mtime) of the files in ``.capture/`` (none when it does not exist yet)."""
        return self._wrap("list", self._entries)  # type: ignore[no-any-return]

    def _entries(self) -> list[tuple[str, float]]:
        if self.is_local:
            try:
                with os.scandir(self.capture_path) as it:
                    return [(e.name, e.stat().st_mtime) for e in it
                            if not e.name.startswith(_TMP_PREFIX) and e.is_file(follow_symlinks=False)]
            except (FileNotFoundError, NotADirectoryError):
                return []
        self._fs.invalidate_cache(self.capture_path)
        try:
            found = self._fs.ls(self.capture_path, detail=True)
        except FileNotFoundError:
            return []
        from ..catalog.storage import listed_mtime

        return [(str(info["name"]).rsplit("/", 1)[-1], listed_mtime(info)) for info in found
                if info.get("type", "file") != "directory"]

    def names(self) -> list[str]:
        return [name for name, _ in self.entries()]

    def read(self, name: str) -> bytes | None:
        """The file's bytes, or None when it does not exist."""
        path = self._join(self.capture_path, _plain(name))

        def read() -> bytes | None:
            try:
                if self.is_local:
                    with open(path, "rb") as fh:
                        return fh.read(1 << 20)
                return bytes(self._fs.cat_file(path))
            except (FileNotFoundError, IsADirectoryError):
                return None

        return self._wrap(f"read {name} in", read)  # type: ignore[no-any-return]

    # ---- writing (only ever inside .capture/, and the job's traces into the run folder) ---------------------------
    def write(self, name: str, data: bytes) -> None:
        """Write ``.capture/<name>`` whole (creating ``.capture/`` and the run folder when missing)."""
        self._wrap(f"write {name} into", lambda: self._write(_plain(name), data))

    def _write(self, name: str, data: bytes) -> None:
        target = self._join(self.capture_path, name)
        if not self.is_local:
            self._fs.pipe_file(target, data)
            return
        self._make_local_folder()
        fd, tmp = tempfile.mkstemp(prefix=_TMP_PREFIX, dir=self.capture_path)
        try:
            os.fchmod(fd, _FILE_MODE)  # mkstemp's 0600 would hide a job's answers from a server of another user
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.replace(tmp, target)
        except BaseException:
            _remove_quietly(tmp)
            raise

    def _make_local_folder(self) -> None:
        if os.path.lexists(self.capture_path) and not os.path.isdir(self.capture_path):
            raise NotADirectoryError(errno.ENOTDIR, f"{CAPTURE_DIR} is a file, not a folder")
        os.makedirs(self.capture_path, exist_ok=True)

    def remove(self, name: str) -> None:
        path = self._join(self.capture_path, _plain(name))

        def remove() -> None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path) if self.is_local else self._fs.rm_file(path)

        self._wrap(f"remove {name} from", remove)

    def staging_path(self, name: str) -> str:
        """A local path to export a trace to before :meth:`publish`: in ``.capture/`` for a local folder (the same
        filesystem, so publishing is a rename; never listed as a trace), in the temp directory for a remote one."""
        if self.is_local:
            self._make_local_folder()
            return os.path.join(self.capture_path, f"{_TMP_PREFIX}{os.getpid()}-{_plain(name)}")
        return os.path.join(tempfile.gettempdir(), f"tb-capture-{os.getpid()}-{_plain(name)}")

    def publish(self, staged: str, name: str) -> str:
        """Move a finished trace from ``staged`` into the run folder as ``name`` (a rename, or one upload): the
        catalog never sees a partial file. Returns the name."""
        target = self._join(self.path, _plain(name))

        def publish() -> None:
            try:
                if self.is_local:
                    os.replace(staged, target)
                else:
                    self._fs.put_file(staged, target)
            finally:
                _remove_quietly(staged)

        self._wrap(f"write {name} into", publish)
        return name


def _plain(name: str) -> str:
    """A file name with no way out of its folder."""
    if not name or "/" in name or "\\" in name or name in (".", "..") or "\x00" in name:
        raise ValueError(f"not a plain file name: {name!r}")
    return name


def _remove_quietly(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)
