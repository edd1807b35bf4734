"""Give the inflated trace text back to the kernel, page by page, as the parallel parts finish with it.

Why: the parts of one load are forked from the loader process and share its inflated text copy-on-write, so the
text counts once, but whole, until the last of them exits: on a 164 MB trace it was a third of the load's memory
peak, on a 2 GB one most of it. Each page is needed by one process only (the part whose byte range holds it), and
only until that part has decoded it. So each process drops the pages outside its own range when it starts and
each chunk's pages once decoded (``madvise(MADV_DONTNEED)``: a page no process maps any more is freed).

The text reads as zeros there afterwards, so only a loader that owns the text (it inflated it) and can inflate it
again (for the fallback when a part fails) may do this. Whole pages inside the range only: the buffer's edges
(the object's header before it, a neighbour's bytes after it) are never touched. Elsewhere than Linux, nothing.
"""

from __future__ import annotations

import ctypes
import mmap
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

_MADV_DONTNEED = 4  # Linux
_MADV_POPULATE_WRITE = 23  # Linux 5.14 on


def _madvise() -> Callable[[int, int, int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        fn = ctypes.CDLL(None, use_errno=True).madvise
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    fn.restype = ctypes.c_int
    return fn  # type: ignore[no-any-return]


_MADVISE = _madvise()


def give_back(buffer: bytes | bytearray, start: int, stop: int) -> int:
    """Drop this process's pages of ``buffer[start:stop]`` (whole pages inside it); returns the bytes dropped.

    The caller promises never to read those bytes again in this process.
    """
    if _MADVISE is None or stop <= start:
        return 0
    base = int(np.frombuffer(buffer, dtype=np.uint8).ctypes.data)
    first = -(-(base + max(0, start)) // mmap.PAGESIZE) * mmap.PAGESIZE
    last = (base + min(stop, len(buffer))) // mmap.PAGESIZE * mmap.PAGESIZE
    if last <= first or _MADVISE(first, last - first, _MADV_DONTNEED) != 0:
        return 0
    return last - first


def remove(text: mmap.mmap, start: int, stop: int) -> None:
    """Free the whole pages of a shared map inside ``[start, stop)`` for every process that maps it
    (``MADV_REMOVE``: a shared page one process drops with ``MADV_DONTNEED`` stays for the others)."""
    first = -(-start // mmap.PAGESIZE) * mmap.PAGESIZE
    last = stop // mmap.PAGESIZE * mmap.PAGESIZE
    if last > first:
        text.madvise(mmap.MADV_REMOVE, first, last - first)


def address(buffer: Any) -> int:
    """Where ``buffer`` (bytes, a writable map) starts in this process's memory (no view of it is kept)."""
    view = np.frombuffer(buffer, dtype=np.uint8)
    try:
        return int(view.ctypes.data)
    finally:
        del view


def populate(base: int, start: int, stop: int) -> bool:
    """Fault in, writable, the pages of ``[base + start, base + stop)`` that hold no page yet (without the GIL: a
    thread does it while another writes); False where the kernel cannot (before 5.14, or not Linux)."""
    first = (base + start) // mmap.PAGESIZE * mmap.PAGESIZE
    last = -(-(base + stop) // mmap.PAGESIZE) * mmap.PAGESIZE
    return _MADVISE is not None and (last <= first or _MADVISE(first, last - first, _MADV_POPULATE_WRITE) == 0)
