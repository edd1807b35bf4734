"""The process's heap: its freed pages given back to the kernel, once or all along.

Why: glibc's allocator keeps the pages of what a process frees for its next allocations (a freed array below its
mmap threshold, which grows up to 32 MB as arrays are freed, stays in the heap; each thread allocates from an arena
of its own). A process that holds a model and builds and drops large numpy temporaries on several threads grows far
beyond what it keeps: computing the 2 GB trace's stored Overview (api/warm.py, 5.3 M events, the part's threads
included) added 1,680 MB to its process on a lent 16-core host, against ~150 bytes an event of results kept
(``benchmarks/part_memory.py``; benchmarks/README.md, "session 39"). Trimming every 50 ms while it ran: 1,122 MB,
for 0.5 s more of its 7 s (the 5 GB trace's: 6,363 → 3,619 MB, landing 4.2 s later: the pages given back are
faulted in again). Elsewhere than glibc on Linux, nothing.
"""

from __future__ import annotations

import contextlib
import ctypes
import sys
import threading
from collections.abc import Iterator

from .lifetime import beside


def trim_heap() -> None:
    """Give the heap's free pages back to the kernel (glibc's ``malloc_trim``): a parse frees its chunks' tables,
    but the allocator keeps most of those pages, and the processes forked afterwards (the first views, api/warm.py)
    would count them again."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).malloc_trim(0)


@contextlib.contextmanager
def trimming(period_s: float | None) -> Iterator[None]:
    """While the body runs, :func:`trim_heap` every ``period_s`` seconds on a thread of its own (``None``: never).
    For a process whose peak matters more than its time: the pages given back are faulted in again, zeroed, when
    the next arrays take them (the 2 GB trace's Overview part 7-14 % slower, the 5 GB trace's 40 %)."""
    if period_s is None or not sys.platform.startswith("linux"):
        yield
        return
    stop = threading.Event()

    def loop() -> None:
        while not stop.wait(period_s):
            trim_heap()

    with beside(loop, "trim-heap", stop.set):
        yield


def one_arena() -> None:
    """One malloc arena for every thread this process starts from now on (glibc): each thread would get an arena of
    its own, whose freed blocks the others cannot reuse and which :func:`trim_heap` gives back only in part (the 2
    GB trace's Overview part peaked 170 MB higher with four threads; a loader whose threads unpickled its parts kept
    70 MB more of an 800 MB trace after its parse, trimmed). Elsewhere than glibc, nothing."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).mallopt(-8, 1)  # M_ARENA_MAX
