"""Inflate and parse at once: the parallel parts parse the trace's text while the loader is still inflating it.

Why: a gzip stream inflates on one core (ISA-L: 2.5 s of the 2 GB trace on a lent 16-core host), and the parts
(``columns.build_text_parts``) could only start once all of it was inflated; then the loader parsed its own range
too, and merged the parts one after another only after it (2.8 s of the 2 GB trace's 14 parts, in series), while
the parts that had finished waited. Here the loader inflates into a shared memory map and the parts are forked
first: each waits until the text of its byte range has been inflated, parses it, and removes its pages from the
map as it goes (``MADV_REMOVE``: freed for every process, so the text is never all in memory at once). The parts'
ranges are equal, so they start, and finish, one after another, as fast as the text inflates: the loader, which
parses nothing itself, merges each as it finishes, in order, exactly as ``build_text_parts`` merges them.

Only gzip files whose text is expected to fit in memory (below ``read.SPILL_BYTES``) take this path: bigger text
goes through the scratch file, which the machine can reclaim. And only with :data:`STREAM_MIN_PARTS` processes
or more, each a forked part beside the loader (whose inflate the parts mostly wait for, and whose merging is light:
0.1 s a part of the 2 GB trace). Anything unusual (the layout is not
Kineto's, the gzip data is corrupt or larger than expected, a range does not parse, a part dies) raises
:class:`~.columns.ParallelBuildFailed` and the caller loads the file the usual way, which says what is wrong.
"""

from __future__ import annotations

import contextlib
import functools
import mmap
import os
import signal
import struct
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

from . import pages, read
from .columns import ModelBuilder, ParallelBuildFailed, _build_text, _Drain, _fork_part, merge_drained
from .limits import Limits
from .read import (
    _ARRAY_START,
    _SEPARATOR,
    GZIP_MAGIC,
    SPILL_BYTES,
    _inflate_limit,
    _TooLarge,
    outline_by_text,
    projected_size,
)
from .schema import TraceDocument

# Below this much text the usual path is as fast (the parts' fork and the map's page faults cost about what the
# overlap saves).
STREAM_MIN_BYTES = 48 << 20
# Below this many processes for the file (the machine's cores less one, for one file), the loader's inflate and the
# parts would compete for cores while they parse, which the usual path (the loader parsing a range itself) avoids.
STREAM_MIN_PARTS = 4
_PIECE = 4 << 20  # bytes inflated at a time (a piece stays in cache while it is copied into the map)
_FEED = 1 << 20  # compressed bytes handed to the inflater at a time (its unconsumed tail is copied every call)
_NOTIFY = 16 << 20  # the parts hear how far the text is inflated every this many bytes
_HEAD = 1 << 24  # where "traceEvents" must start (as read.outline_by_text)
# Pages of the map faulted in ahead of the inflater, on a thread of its own (each first write into shared memory
# faults a page in: inflating the 2 GB trace into the map took 3.3 s against 2.5 s into the loader's own memory).
_AHEAD = 32 << 20
# What makes this path give the file to the usual one (which says what is wrong, if anything is).
_GIVE_UP: tuple[type[BaseException], ...] = (ParallelBuildFailed, ValueError, EOFError, _TooLarge,
                                            *read.INFLATE_ERRORS)
_MESSAGE = struct.Struct("<qq")  # (bytes inflated so far, the end of the events' array or -1 until known)


def applies(packed: bytes, name: str, parts: int, limits: Limits) -> tuple[int, int]:
    """(the bytes ``packed`` will inflate to, the most it may inflate to) if this path should load it, else (0, 0):
    gzip, :data:`STREAM_MIN_PARTS` processes or more on a platform that forks, and text expected between
    :data:`STREAM_MIN_BYTES` and what fits in memory (``read.SPILL_BYTES`` where a scratch file may take more)."""
    if (parts < STREAM_MIN_PARTS or packed[:2] != GZIP_MAGIC or not hasattr(os, "fork")
            or not sys.platform.startswith("linux")):
        return 0, 0
    limit = _inflate_limit(len(packed), name, limits)[0]
    expected = expected_size(packed)
    if expected < STREAM_MIN_BYTES or expected > limit or (limits.scratch_dir is not None and expected > SPILL_BYTES):
        return 0, 0
    return expected, limit


def expected_size(packed: bytes) -> int:
    """The inflated size: the gzip trailer's (which counts modulo 4 GiB, and only the last member), taken when it
    agrees with the ratio of the first megabyte within a factor of two, else that ratio's guess."""
    guess = projected_size(packed)
    trailer = int.from_bytes(packed[-4:], "little") if len(packed) >= 18 else 0
    if guess <= 0:
        return trailer
    nearest = trailer + round((guess - trailer) / (1 << 32)) * (1 << 32)
    return nearest if guess / 2 <= nearest <= guess * 2 else guess


def cuts(lo: int, expected: int, parts: int) -> list[tuple[int | None, int | None]]:
    """Where each part's range starts and ends, as targets (a range runs from the first separator at or after
    one to the first at or after the next; None: the array's start, its end): ``parts`` equal shares of the
    text expected after ``lo``. Equal, so that each part starts and finishes a range's inflate time after the
    one before it: about the time the loader takes to merge one (0.1-0.2 s of the 2 GB trace's 14)."""
    edges = [lo + (expected - lo) * k // parts for k in range(1, parts)]
    return list(zip([None, *edges], [*edges, None]))


class _Feed:
    """What a part hears from the loader: how far the text is inflated, and the array's end once it is known."""

    def __init__(self, fd: int) -> None:
        self.fd, self.avail, self.hi = fd, 0, -1

    def wait(self) -> None:
        """Block until the loader says more (EOF: it gave up, and so does this part)."""
        data = os.read(self.fd, 64 * _MESSAGE.size)
        if not data:
            raise EOFError("the loader stopped inflating")
        self.avail, self.hi = _MESSAGE.unpack_from(data, len(data) - _MESSAGE.size)

    def boundary(self, text: Any, target: int) -> tuple[int, int]:
        """Where a range cut at ``target`` ends and the next begins: the first separator at or after it (the
        same search ``read.split_text`` makes, so two parts find the same cut), or the array's end."""
        while True:
            stop = self.hi if self.hi >= 0 else self.avail
            found = _SEPARATOR.search(text, target, stop) if target < stop else None
            if found is not None:
                return found.start(), found.end() - 1
            if self.hi >= 0:
                return self.hi, self.hi
            self.wait()


def _part(text: mmap.mmap, fd: int, close: list[int], cut: tuple[int | None, int | None], lo: int) -> ModelBuilder:
    """A forked part: wait for its range (``cut``: the targets it starts and ends at, see :func:`cuts`), then
    parse it, removing the map's pages as it goes."""
    for other in close:
        os.close(other)
    feed = _Feed(fd)
    start = lo if cut[0] is None else feed.boundary(text, cut[0])[1]
    stop = feed.boundary(text, cut[1])[0] if cut[1] is not None else _array_end(feed)
    return _build_text(text, start, max(start, stop), None, drop=functools.partial(remove, text))


def _array_end(feed: _Feed) -> int:
    while feed.hi < 0:
        feed.wait()
    return feed.hi


def remove(text: mmap.mmap, start: int, stop: int) -> None:
    """Free the map's whole pages inside ``[start, stop)`` for every process (shared memory: ``MADV_REMOVE``)."""
    first = -(-start // mmap.PAGESIZE) * mmap.PAGESIZE
    last = stop // mmap.PAGESIZE * mmap.PAGESIZE
    if last > first:
        text.madvise(mmap.MADV_REMOVE, first, last - first)


def inflated_pieces(packed: bytes, limit: int) -> Iterator[bytes]:
    """Every gzip member of ``packed`` inflated, :data:`_PIECE` bytes at most at a time; :class:`read._TooLarge`
    past ``limit`` bytes in all, EOFError if cut short, the inflater's error if corrupt."""
    view, at, total = memoryview(packed), 0, 0
    inflater = read.gzip_inflater()
    pending: bytes | memoryview = b""
    while True:
        if not pending:
            if at >= len(view):
                if not inflater.eof:
                    raise EOFError("truncated")
                return
            pending, at = view[at:at + _FEED], at + _FEED
        if inflater.eof:  # another member starts here
            inflater = read.gzip_inflater()
        out = inflater.decompress(pending, _PIECE)
        pending = inflater.unused_data if inflater.eof else inflater.unconsumed_tail
        total += len(out)
        if total > limit:
            raise _TooLarge
        if out:
            yield out


class _FaultAhead:
    """Faults the map's pages in a little ahead of the inflater, on a thread of its own (``MADV_POPULATE_WRITE``,
    Linux 5.14 on; elsewhere nothing): never more than :data:`_AHEAD` bytes ahead, so that the text is not all in
    memory at once however slowly the parts go."""

    def __init__(self, text: mmap.mmap, capacity: int) -> None:
        self.address, self.capacity = pages.address(text), capacity
        self.done = self.want = 0
        self.stopped = False
        self.ready = threading.Condition()
        self.thread = threading.Thread(target=self._run, name="fault-ahead", daemon=True)
        self.thread.start()

    def ahead_of(self, size: int) -> None:
        with self.ready:
            self.want = min(self.capacity, size + _AHEAD)
            self.ready.notify()

    def close(self) -> None:
        with self.ready:
            self.stopped = True
            self.ready.notify()
        self.thread.join()

    def _run(self) -> None:
        while True:
            with self.ready:
                while not self.stopped and self.want <= self.done:
                    self.ready.wait()
                if self.stopped:
                    return
                start, stop = self.done, self.want
            if not pages.populate(self.address, start, stop):
                return
            self.done = stop


class _Loader:
    """The loader's side: the map, the inflater, the parts (their feeds, their pipes' drains)."""

    def __init__(self, packed: bytes, limit: int, expected: int) -> None:
        self.capacity = min(limit, expected + expected // 4 + (16 << 20))
        self.text = mmap.mmap(-1, self.capacity)  # shared and anonymous: what the parts see as it is written
        self.pieces = inflated_pieces(packed, min(limit, self.capacity))
        self.size, self.expected = 0, expected
        self.feeds: list[int] = []
        self.drains: list[_Drain] = []
        self.faults: _FaultAhead | None = None

    def inflate(self, until: int | None = None) -> bool:
        """Inflate into the map until ``until`` bytes are there (None: all); False when the text has ended."""
        told = self.size
        try:
            for piece in self.pieces:
                if self.faults is not None:
                    self.faults.ahead_of(self.size + len(piece))
                self.text[self.size:self.size + len(piece)] = piece
                self.size += len(piece)
                if self.size - told >= _NOTIFY:
                    self.tell(-1)
                    told = self.size
                if until is not None and self.size >= until:
                    return True
        except _TooLarge:  # beyond the map (or the limit: the usual path says so)
            raise ParallelBuildFailed("the text is larger than expected") from None
        return False

    def head(self) -> int:
        """The offset of the events array's first element (inflating as far as needed to find it)."""
        more = True
        while True:
            found = _ARRAY_START.search(self.text, 0, min(self.size, _HEAD))
            if found is not None and found.end() < self.size:
                return found.end()
            if self.size >= _HEAD or not more:
                raise ParallelBuildFailed("not a Kineto trace's layout")
            more = self.inflate(self.size + _PIECE)

    def fork(self, ranges: list[tuple[int | None, int | None]], lo: int) -> None:
        """Fork a part per range, then read their pipes and fault pages in on threads (forking after threads
        start could copy a lock they hold)."""
        children = []
        for cut in ranges:
            read_fd, write_fd = os.pipe()
            self.feeds.append(write_fd)
            children.append(_fork_part(functools.partial(_part, self.text, read_fd, list(self.feeds), cut, lo)))
            os.close(read_fd)
        self.drains = [_Drain(pid, fd) for pid, fd in children]
        self.faults = _FaultAhead(self.text, self.capacity)

    def tell(self, hi: int) -> None:
        message = _MESSAGE.pack(self.size, hi)
        for fd in self.feeds:
            with contextlib.suppress(OSError):  # the part died: merging says so
                os.write(fd, message)

    def finish(self, hi: int) -> None:
        """Tell the parts where the array ends; the pages faulted in beyond the text go."""
        self.tell(hi)
        for fd in self.feeds:
            os.close(fd)
        self.feeds = []
        if self.faults is not None:
            self.faults.close()
            self.faults = None
        remove(self.text, self.size, self.capacity)

    def close(self) -> None:
        """Stop every part that is still running and wait for them all; unmap the text."""
        for fd in self.feeds:
            os.close(fd)
        self.feeds = []
        if self.faults is not None:
            self.faults.close()
        for drain in self.drains:
            with contextlib.suppress(ProcessLookupError):
                os.kill(drain.pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):  # waited for already
                drain.part()
        self.drains = []
        with contextlib.suppress(BufferError):  # a view still held: the map goes with it
            self.text.close()


def stream_parts(packed: bytes, expected: int, limit: int, parts: int,
                 progress: Callable[[float], None] | None = None) -> tuple[ModelBuilder, TraceDocument]:
    """Inflate ``packed`` (gzip of ``expected`` bytes, at most ``limit``) while ``parts`` forked parts parse
    it; returns their merged builder (not yet finished) and the document's other keys.

    Raises :class:`ParallelBuildFailed` whenever the usual path must load the file instead (see the module).
    """
    loader = _Loader(packed, limit, expected)
    try:
        lo = loader.head()
        loader.fork(cuts(lo, expected, parts), lo)
        loader.inflate()
        found = outline_by_text(loader.text, loader.size)
        if found is None or found[1] != lo:
            raise ParallelBuildFailed("not a Kineto trace's layout")
        doc, _, hi = found
        loader.finish(hi)
        if progress:
            progress(0.5)
        drains, loader.drains = loader.drains, []
        builder = merge_drained(ModelBuilder(), drains)  # waits for every part, whatever happens
    except _GIVE_UP as err:
        raise ParallelBuildFailed(f"inflating while parsing failed ({err})") from None
    finally:
        loader.close()
    if not builder.n_events:
        raise ParallelBuildFailed("no events in the trace's text")
    return builder, doc
