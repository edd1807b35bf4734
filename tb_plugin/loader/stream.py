"""Inflate and parse at once: the parallel parts parse the trace's text while the loader is still inflating it.

Why: a gzip stream inflates on one core (ISA-L: 1.6-2.5 s of the 2 GB trace on a lent 16-core host), and the parts
(``columns.build_text_parts``) could only start once all of it was inflated; then the loader parsed its own range
too, and merged the parts one after another only after it (2.8 s of the 2 GB trace's 14 parts, in series), while
the parts that had finished waited. Here the loader inflates into a shared memory map and forks the parts first.
As the text comes, it cuts it into jobs of a few tens of MB (at event separators, as ``read.split_text``) and
posts them on one pipe that every part reads: whichever part is free takes the next, parses it, frees its pages
from the map for every process (``MADV_REMOVE``) and sends its tables back at once. The loader merges the jobs'
tables in order as they come, exactly as ``build_text_parts`` merges its parts, and stops inflating while the text
not yet parsed exceeds :func:`resident_limit`: however large the trace, its text is never all in memory, and no
part waits for a range to be inflated whole, nor for a slower part.

Only gzip files of :data:`STREAM_MIN_BYTES` of text or more take this path, with :data:`STREAM_MIN_PARTS` processes
or more, each a part beside the loader (whose merging is light: 0.3 µs an event). The size is the gzip trailer's
checked against the ratio of the first megabyte (:func:`expected_size`); a trailer under half the minimum is taken
as it is where the file's ratio bound is under 4 GiB (the trailer counts modulo 4 GiB: a text that wrapped would be
refused as a bomb), which spares the probe (20 ms of a 1.2 MB file's load); a file of several gzip members whose
last is that small loads the usual way. Anything unusual (the layout is not
Kineto's, the gzip data is corrupt or larger than expected, a job does not parse, a part dies) raises
:class:`~.columns.ParallelBuildFailed` and the caller loads the file the usual way, which says what is wrong.
"""

from __future__ import annotations

import contextlib
import functools
import mmap
import os
import pickle
import signal
import struct
import sys
import threading
from collections.abc import Callable

from ..model import heap
from . import pages, read
from .columns import ModelBuilder, ParallelBuildFailed, Part, _build_text, fork_worker
from .limits import Limits
from .read import (
    _ARRAY_START,
    _SEPARATOR,
    GZIP_MAGIC,
    _TooLarge,
    inflated_pieces,
    outline_by_text,
    projected_size,
    ratio_limit,
)
from .schema import TraceDocument

# Below this much text the usual path is as fast (the parts' fork and the map's page faults cost about what the
# overlap saves).
STREAM_MIN_BYTES = 48 << 20
# Below this many processes for the file (the machine's cores less one, for one file), the loader's inflate and the
# parts would compete for cores while they parse, which the usual path (the loader parsing a range itself) avoids.
STREAM_MIN_PARTS = 4
_PIECE = 4 << 20  # bytes inflated at a time (a piece stays in cache while it is copied into the map)
_HEAD = 1 << 24  # where "traceEvents" must start (as read.outline_by_text)
# A job: about a quarter of a part's share of the text, 4 to 64 MB (each job's tables cost a pickle and a merge of
# their own; fewer, larger jobs leave parts idle at the end).
_JOBS_PER_PART = 4
_JOB_MIN, _JOB_MAX = 4 << 20, 64 << 20
# The last stretch of the text in smaller jobs (:func:`tapered`): the parts parse faster than one core inflates, so
# each job starts as soon as it is posted and the parse ends one job's parse after the inflate; the 2 GB trace's
# last 34 MB job took 0.5 s there (lent H200 host). A job is at most 1/_TAPER of the text still to come, at least
# _JOB_MIN: going back from the end, each job may be 1/(1 - 1/_TAPER) times the next and still end about when it
# does, as long as a part parses at least 1/_TAPER as fast as the inflate (a twelfth there: 63 MB/s a part, 770
# inflated). The 2 GB trace's last 540 MB come in 49 jobs instead of 16 (each a merge of a few ms in the loader).
_TAPER = 16
# Text inflated but not yet parsed, at most: enough for every part to have two jobs in hand.
_RESIDENT_MIN = 1 << 30
# Pages of the map faulted in ahead of the inflater, on a thread of its own (each first write into shared memory
# faults a page in: inflating the 2 GB trace into the map took 3.3 s against 2.5 s into the loader's own memory).
_AHEAD = 32 << 20
# What makes this path give the file to the usual one (which says what is wrong, if anything is).
_GIVE_UP: tuple[type[BaseException], ...] = (ParallelBuildFailed, ValueError, EOFError, _TooLarge,
                                            *read.INFLATE_ERRORS)
_MAP_NORESERVE = 0x4000  # Linux (Python's mmap names it from 3.13)
_JOB = struct.Struct("<qqq")  # (the job's number, its first byte, the byte after its last event)


def applies(packed: bytes, parts: int, limits: Limits) -> tuple[int, int]:
    """(the bytes ``packed`` will inflate to, the most it may inflate to) if this path should load it, else (0, 0):
    gzip, :data:`STREAM_MIN_PARTS` processes or more on a platform that forks, and text expected between
    :data:`STREAM_MIN_BYTES` and what its compression ratio allows (a bomb's bound). Not the memory's bound on the
    text (``Limits.max_text_bytes``: a third of the memory, for a text the usual path holds whole): here the text
    is never whole in memory, and the events' bound (``max_events``) is checked as the jobs are merged."""
    if (parts < STREAM_MIN_PARTS or packed[:2] != GZIP_MAGIC or not hasattr(os, "fork")
            or not sys.platform.startswith("linux")):
        return 0, 0
    limit = ratio_limit(len(packed), limits)
    if limit < 1 << 32 and _trailer(packed) < STREAM_MIN_BYTES // 2:
        return 0, 0  # the text is small: no probe (module doc)
    expected = expected_size(packed)
    if expected < STREAM_MIN_BYTES or expected > limit:
        return 0, 0
    return expected, limit


def expected_size(packed: bytes) -> int:
    """The inflated size: the gzip trailer's (which counts modulo 4 GiB, and only the last member), taken when it
    agrees with the ratio of the first megabyte within a factor of two, else that ratio's guess."""
    guess = projected_size(packed)
    trailer = _trailer(packed)
    if guess <= 0:
        return trailer
    nearest = trailer + round((guess - trailer) / (1 << 32)) * (1 << 32)
    return nearest if guess / 2 <= nearest <= guess * 2 else guess


def _trailer(packed: bytes) -> int:
    """The size the gzip trailer gives: the last member's, modulo 4 GiB (0 for data too short to hold one)."""
    return int.from_bytes(packed[-4:], "little") if len(packed) >= 18 else 0


def job_bytes(expected: int, parts: int) -> int:
    """How much text one job holds: :data:`_JOBS_PER_PART` jobs a part, within 4 to 64 MB."""
    return min(_JOB_MAX, max(_JOB_MIN, expected // (parts * _JOBS_PER_PART)))


def tapered(job: int, remaining: int) -> int:
    """The size of a job starting ``remaining`` bytes before the expected end of the text (module constants); past
    that end the estimate was short (by at most a quarter: the map holds no more) and the rest is unknown, so the
    jobs are whole again rather than hundreds of 4 MB ones, each a merge."""
    return job if remaining <= 0 else min(job, max(_JOB_MIN, remaining // _TAPER))


def resident_limit(job: int, parts: int) -> int:
    """Text inflated and not yet parsed, at most: two jobs a part, at least 1 GiB."""
    return max(_RESIDENT_MIN, 2 * parts * job)


def _work(text: mmap.mmap, jobs: int, close: list[int], out: int) -> None:
    """A forked part: take jobs from the ``jobs`` pipe until it closes, parse each (removing its pages from the
    map) and send (number, strings, tables, long texts) at once."""
    for fd in close:
        os.close(fd)
    drop = functools.partial(pages.remove, text)
    with os.fdopen(out, "wb") as answers:
        while message := os.read(jobs, _JOB.size):  # every message is written whole: a read takes one whole
            index, start, stop = _JOB.unpack(message)
            builder = _build_text(text, start, stop, None, drop=drop)
            pickle.dump((index, builder.strings.values, builder.parts, builder.strings.full), answers,
                        protocol=pickle.HIGHEST_PROTOCOL)
            answers.flush()


class _Answers:
    """The parts' answers, read and unpickled on a thread per part as they come, kept by job number."""

    def __init__(self, children: list[tuple[int, int]]) -> None:
        self.ready = threading.Condition()
        self.parts: dict[int, Part] = {}
        self.running, self.failed = len(children), False
        self.pids = [pid for pid, _ in children]
        self.threads = [threading.Thread(target=self._read, args=child, daemon=True) for child in children]
        for thread in self.threads:
            thread.start()

    def _read(self, pid: int, fd: int) -> None:
        ok = True
        with os.fdopen(fd, "rb") as src:
            while True:
                try:
                    index, *part = pickle.load(src)
                except EOFError:
                    break
                except Exception:  # noqa: BLE001 - cut short or unreadable: the part failed
                    ok = False
                    break
                with self.ready:
                    self.parts[index] = (part[0], part[1], part[2])
                    self.ready.notify_all()
        ok = os.waitpid(pid, 0)[1] == 0 and ok
        with self.ready:
            self.running -= 1
            self.failed = self.failed or not ok
            self.ready.notify_all()

    def take(self, index: int, wait: bool) -> Part | None:
        """Job ``index``'s tables (None if not there yet and not ``wait``); ParallelBuildFailed once a part has
        failed, or none is left to send them."""
        with self.ready:
            while index not in self.parts:
                if self.failed or not self.running:
                    raise ParallelBuildFailed("a part died (out of memory?) or its text did not parse")
                if not wait:
                    return None
                self.ready.wait()
            return self.parts.pop(index)

    def close(self) -> None:
        """Stop the parts still running and wait for them all."""
        for pid in self.pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for thread in self.threads:
            thread.join()


class _FaultAhead:
    """Faults the map's pages in a little ahead of the inflater, on a thread of its own (``MADV_POPULATE_WRITE``,
    Linux 5.14 on; elsewhere nothing): never more than :data:`_AHEAD` bytes ahead, so that the text is not all in
    memory at once however slowly the parts go."""

    def __init__(self, text: mmap.mmap, capacity: int) -> None:
        self.address, self.capacity = pages.address(text), capacity
        self.done = self.want = self.floor = 0
        self.stopped = False
        self.ready = threading.Condition()
        self.thread = threading.Thread(target=self._run, name="fault-ahead", daemon=True)
        self.thread.start()

    def ahead_of(self, size: int) -> None:
        """The inflater writes from ``size`` on: fault in up to :data:`_AHEAD` beyond it, never behind it (a page
        behind may be parsed and removed already: faulting it in again would hold it until the map goes)."""
        with self.ready:
            self.want = min(self.capacity, size + _AHEAD)
            self.floor = size
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
                start, stop = max(self.done, self.floor), self.want
            if not pages.populate(self.address, start, stop):
                return
            self.done = stop


class _Loader:
    """The loader's side: the map and its inflater, the jobs posted, the parts and their answers, the merge."""

    def __init__(self, packed: bytes, limit: int, expected: int, parts: int,
                 progress: Callable[[float], None] | None, check: Callable[[int], None] | None = None) -> None:
        self.capacity = min(limit, expected + expected // 4 + (16 << 20))
        # shared and anonymous (what the parts see as it is written); reserved page by page as written
        self.text = mmap.mmap(-1, self.capacity, flags=mmap.MAP_SHARED | _MAP_NORESERVE)
        self.pieces = inflated_pieces(packed, min(limit, self.capacity), _PIECE)
        self.size, self.expected, self.parts = 0, expected, parts
        self.job = job_bytes(expected, parts)
        self.resident = resident_limit(self.job, parts)
        self.progress, self.check = progress, check
        self.jobs = -1  # the write end of the jobs' pipe
        self.starts: list[int] = []  # where each job posted starts
        self.next_start = 0
        self.answers: _Answers | None = None
        self.faults: _FaultAhead | None = None
        self.builder = ModelBuilder()
        self.merged = 0  # the jobs merged, in order

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

    def start(self, lo: int) -> None:
        """Fork the parts, then read their answers and fault pages in on threads (forking after threads start could
        copy a lock they hold)."""
        self.next_start = lo
        read_fd, self.jobs = os.pipe()
        children: list[tuple[int, int]] = []
        for _ in range(self.parts):
            close = [self.jobs, *(fd for _, fd in children)]
            children.append(fork_worker(functools.partial(_work, self.text, read_fd, close)))
        os.close(read_fd)
        heap.one_arena()  # the threads' allocations in the loader's own heap, which the parse's end trims
        self.answers = _Answers(children)
        self.faults = _FaultAhead(self.text, self.capacity)

    def inflate(self, until: int | None = None) -> bool:
        """Inflate into the map until ``until`` bytes are there (None: all), posting jobs and merging answers on
        the way; False when the text has ended."""
        try:
            for piece in self.pieces:
                if self.faults is not None:
                    self.faults.ahead_of(self.size + len(piece))
                self.text[self.size:self.size + len(piece)] = piece
                self.size += len(piece)
                if self.answers is not None:
                    self.post()
                    self.merge(wait=False)
                    while self._at_bound():
                        self.merge(wait=True, one=True)  # the text not parsed yet is at its bound: wait for a job
                if until is not None and self.size >= until:
                    return True
        except _TooLarge:  # beyond the map (or the limit: the usual path says so)
            raise ParallelBuildFailed("the text is larger than expected") from None
        return False

    def _at_bound(self) -> bool:
        """Whether the text from the first job not merged on is more than :attr:`resident` (a job not yet posted,
        one event longer than that, is no reason to wait: nothing would come)."""
        return self.merged < len(self.starts) and self.size - self.starts[self.merged] > self.resident

    def post(self, hi: int | None = None) -> None:
        """Post every job whose text is inflated (with ``hi``, the array's end: the rest, as the last)."""
        while True:
            size = tapered(self.job, self.expected - self.next_start)
            if hi is not None:
                found = _SEPARATOR.search(self.text, self.next_start + size, hi)
                stop, after = (found.start(), found.end() - 1) if found is not None else (hi, hi)
            else:
                found = _SEPARATOR.search(self.text, self.next_start + size, self.size)
                if found is None:
                    return
                stop, after = found.start(), found.end() - 1
            os.write(self.jobs, _JOB.pack(len(self.starts), self.next_start, stop))
            self.starts.append(self.next_start)
            self.next_start = after
            if hi is not None and stop >= hi:
                return

    def merge(self, wait: bool, one: bool = False) -> None:
        """Merge the posted jobs' answers that have come, in order (``wait``: until all have; ``one``: one)."""
        assert self.answers is not None
        while self.merged < len(self.starts):
            part = self.answers.take(self.merged, wait)
            if part is None:
                return
            self.builder.absorb(*part)
            self.merged += 1
            if not self.builder.reserved and self.merged < len(self.starts):
                # the jobs merged say how many events the text holds (their text ends where the next job starts);
                # the first, unless its answer came before a second job was posted (a busy machine)
                merged_text = self.starts[self.merged] - self.starts[0]
                self.builder.reserve(self.builder.n_events * max(1, self.expected - self.starts[0])
                                     // max(1, merged_text))
            if self.check:  # e.g. too many events for the memory: fails the load now, not once all is parsed
                self.check(self.builder.n_events)
            if self.progress:  # the text merged so far, of the text expected: never backwards
                self.progress(0.45 + 0.55 * min(1.0, self.starts[self.merged - 1] / max(1, self.expected)))
            if one:
                return

    def finish(self, hi: int) -> ModelBuilder:
        """The last job (up to the array's end), no more jobs, every answer merged; the pages faulted in beyond the
        text go."""
        if self.faults is not None:
            self.faults.close()
            self.faults = None
        pages.remove(self.text, self.size, self.capacity)
        if self.next_start < hi:
            self.post(hi)
        os.close(self.jobs)
        self.jobs = -1
        self.merge(wait=True)
        return self.builder

    def close(self) -> None:
        """Stop every part still running and wait for them all; unmap the text."""
        if self.jobs >= 0:
            os.close(self.jobs)
        if self.faults is not None:
            self.faults.close()
        if self.answers is not None:
            self.answers.close()
        with contextlib.suppress(BufferError):  # a view still held: the map goes with it
            self.text.close()


def stream_parts(packed: bytes, expected: int, limit: int, parts: int,
                 progress: Callable[[float], None] | None = None,
                 check: Callable[[int], None] | None = None) -> tuple[ModelBuilder, TraceDocument]:
    """Inflate ``packed`` (gzip of ``expected`` bytes, at most ``limit``) while ``parts`` forked parts parse it,
    job by job; returns their merged builder (not yet finished) and the document's other keys. ``check(events)``
    after each job merged may raise (a ``TraceLoadError``: it goes to the caller as it is).

    Raises :class:`ParallelBuildFailed` whenever the usual path must load the file instead (see the module).
    """
    loader = _Loader(packed, limit, expected, parts, progress, check)
    try:
        lo = loader.head()
        loader.start(lo)
        loader.inflate()
        found = outline_by_text(loader.text, loader.size)
        if found is None or found[1] != lo:
            raise ParallelBuildFailed("not a Kineto trace's layout")
        doc, _, hi = found
        builder = loader.finish(hi)
    except _GIVE_UP as err:
        raise ParallelBuildFailed(f"inflating while parsing failed ({err})") from None
    finally:
        loader.close()
    if not builder.n_events:
        raise ParallelBuildFailed("no events in the trace's text")
    return builder, doc
