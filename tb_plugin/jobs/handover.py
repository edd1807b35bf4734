"""The loader hands its parse to the server in a private file, so the server does not copy it out of the cache.

The server never maps a published cache entry: it copies the files into a private, unlinked file and checks each
against the manifest (``jobs.entries``: a file truncated under a memory map is a SIGBUS no Python code can catch).
For a trace this server just had parsed, that copy lay on the way to "ready" (0.47 s of the 2 GB trace's 8.5 s on a
lent 16-core host), after the loader had written the very same bytes. Now the server makes the unlinked file before
the loader process starts (:func:`make`: no one can open it by name) and passes it to that process with its other
arguments (:class:`Handover`: the descriptor travels as multiprocessing passes a pipe's); the loader copies its
entry's files into it while its stored views compute (:class:`Filler`: a forked child, so the copy costs the way to
"ready" nothing but the few small files written last), and says where each file lies; the server maps the file as
it maps its own copy (:func:`adopt`). No third process can reach the file, so nothing is checked again: only that
the layout the loader sent lies within the file. Anything amiss (no layout, a layout that does not fit) and the
server opens the published entry the usual way.
"""

from __future__ import annotations

import contextlib
import json
import mmap
import os
import sys
import tempfile
from collections.abc import Callable, Iterable, Mapping
from multiprocessing import reduction
from pathlib import Path
from typing import Any, BinaryIO

import pyarrow as pa

from ..loader.columns import fork_worker, join_worker
from . import entries
from .entries import LOCK, MANIFEST, BadEntry, copy_range

# A file this small (as stored) is loaded through the cache as before: its entry is copied in milliseconds, and
# small files share loader processes (``jobs.local.groups``), which a handover would complicate for nothing.
MIN_FILE_BYTES = 1 << 20
_ALIGN = 64  # Arrow's buffer alignment: every file starts at a multiple of it

Layout = dict[str, tuple[int, int]]  # file name → (offset, size) in the handed-over file


class Handover:
    """An unlinked file the server made for one load. Pickled into the loader process (as a ``Connection`` is),
    it arrives there as a descriptor of the same file (``fd``); the server keeps the file object (``file``)."""

    def __init__(self, file: BinaryIO | None = None, fd: int = -1) -> None:
        self.file = file
        self.fd = file.fileno() if file is not None else fd

    def __reduce__(self) -> tuple[Callable[[Any], Handover], tuple[Any]]:
        return _rebuild, (reduction.DupFd(self.fd),)

    def close(self) -> None:
        """Let the file go (the server: once mapped, or when the load ends otherwise; the loader: once filled)."""
        if self.file is not None:
            self.file.close()
        elif self.fd >= 0:
            os.close(self.fd)
        self.file, self.fd = None, -1


def _rebuild(dup: Any) -> Handover:
    return Handover(fd=dup.detach())


def make(scratch: Path) -> Handover | None:
    """A fresh unlinked file in ``scratch`` (the cache folder: its filesystem holds entries anyway); None when it
    cannot be made, or off Linux, where the loader processes are not forked from a fork server (the load then
    goes through the cache alone)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        scratch.mkdir(parents=True, exist_ok=True)
        return Handover(tempfile.TemporaryFile(dir=scratch))
    except OSError:
        return None


def handed_files(folder: Path) -> list[str]:
    """The files of the entry being built in ``folder`` that the server opens with the model: all but hidden
    ones and the manifest, in name order."""
    skipped = {MANIFEST, LOCK}
    return sorted(item.name for item in os.scandir(folder)
                  if not item.name.startswith(".") and item.name not in skipped and item.is_file(follow_symlinks=False))


class Filler:
    """Copies an entry's files into a handed-over file, the first ones in a forked child while the caller goes on
    (the loader computes its stored views meanwhile), the rest in this process; :meth:`finish` gives the layout,
    None if any copy failed."""

    def __init__(self, handover: Handover, folder: Path) -> None:
        self.handover, self.folder = handover, folder
        self.layout: Layout = {}
        self.end = 0
        self._child: tuple[int, int] | None = None
        self.sums: dict[str, tuple[int, int]] = {}  # name → (size, CRC-32) of the files the child copied

    def _place(self, names: Iterable[str]) -> list[tuple[str, int, int]]:
        placed = []
        for name in names:
            size = os.stat(self.folder / name).st_size
            placed.append((name, self.end, size))
            self.layout[name] = (self.end, size)
            self.end += -(-size // _ALIGN) * _ALIGN
        return placed

    def start(self, names: Iterable[str]) -> None:
        """Copy ``names`` in a forked child (they must not change meanwhile), which also gives their sizes and
        CRC-32s for the entry's manifest (:attr:`sums`, once :meth:`wait` returned): the seal need not read them
        again on the way to "ready" (0.17 s of the 2 GB trace's)."""
        placed = self._place(names)
        self._child = fork_worker(lambda fd: _copy_and_sum(self.folder, self.handover.fd, placed, fd))

    def finish(self, names: Iterable[str]) -> Layout | None:
        """Copy ``names`` (those not copied yet) here, wait for the child, and give the layout; None when anything
        failed (the server then opens the published entry)."""
        ok = True
        try:
            _copy_all(self.folder, self.handover.fd, self._place(n for n in names if n not in self.layout))
        except OSError:
            ok = False
        return dict(self.layout) if self.wait() and ok else None

    def wait(self) -> bool:
        """Wait for the child (if one still runs); whether it copied everything it had to."""
        if self._child is None:
            return True
        child, self._child = self._child, None
        ok, sums = join_worker(child)
        if not ok:
            return False
        with contextlib.suppress(ValueError, TypeError):
            self.sums = {str(name): (int(size), int(crc)) for name, (size, crc) in json.loads(sums).items()}
        return True


def _copy_and_sum(folder: Path, fd: int, placed: list[tuple[str, int, int]], answer: int) -> None:
    """The child's work: the copies, then each file's (size, CRC-32) as JSON on ``answer``."""
    _copy_all(folder, fd, placed)
    sums = {name: entries.size_and_crc(folder / name) for name, _, _ in placed}
    with os.fdopen(answer, "wb") as out:
        out.write(json.dumps(sums).encode())


def _copy_all(folder: Path, fd: int, placed: list[tuple[str, int, int]]) -> None:
    for name, offset, size in placed:
        src = os.open(folder / name, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        try:
            if copy_range(src, fd, size, offset) != size:
                raise OSError(f"{name} was cut short while it was copied")
        finally:
            os.close(src)


def adopt(handover: Handover, layout: Any, required: Iterable[str], wanted: Callable[[str], bool]
          ) -> dict[str, pa.Buffer]:
    """The files the loader put in ``handover`` (``layout``, as it sent it: checked to lie within the file), those
    ``required`` and the others ``wanted`` accepts, as buffers over one read-only map of it. BadEntry when the
    layout is not one or a required file is not in it. The handover itself is closed: the map keeps the file."""
    try:
        return mapped(handover.fd, layout, required, wanted)
    finally:
        handover.close()


def mapped(fd: int, layout: Any, required: Iterable[str], wanted: Callable[[str], bool]) -> dict[str, pa.Buffer]:
    """:func:`adopt`'s files, the handed-over file left open (the loader maps it too, for the views it computes
    after "ready": the pages the server maps, counted once)."""
    required = set(required)
    try:
        places = _checked(layout, os.fstat(fd).st_size)
        missing = sorted(name for name in required if name not in places)
        if missing:
            raise BadEntry(f"{', '.join(missing)} not handed over")
        size = max((offset + length for offset, length in places.values()), default=0)
        whole = pa.py_buffer(mmap.mmap(fd, size, access=mmap.ACCESS_READ)) if size else pa.py_buffer(b"")
    except OSError as err:
        raise BadEntry(f"the handed-over parse cannot be mapped ({err.strerror or err})") from None
    return {name: whole.slice(offset, length) for name, (offset, length) in places.items()
            if name in required or wanted(name)}


def _checked(layout: Any, file_size: int) -> dict[str, tuple[int, int]]:
    """``layout`` as name → (offset, size), each range within ``file_size`` bytes; BadEntry otherwise."""
    if not isinstance(layout, Mapping):
        raise BadEntry("the handed-over layout is not a mapping")
    out: dict[str, tuple[int, int]] = {}
    for name, place in layout.items():
        ok = (isinstance(name, str) and isinstance(place, (tuple, list)) and len(place) == 2
              and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in place))
        if not ok or place[0] + place[1] > file_size:
            raise BadEntry(f"the handed-over layout of {name!r} does not fit the file")
        out[name] = (int(place[0]), int(place[1]))
    return out
