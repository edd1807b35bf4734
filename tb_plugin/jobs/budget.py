"""How much parallelism this machine affords: loader processes and parallel parts follow the cores and the memory
available, not fixed numbers, so one big file uses every core and many small files one core each, and neither
starves the server (one core is left to it) or runs the machine out of memory."""

from __future__ import annotations

import os

# What one loader process costs at most, beyond the file's own decoded size: interpreter, numpy, pyarrow, one
# chunk of decoded events, the tables being built.
PROCESS_BYTES = 384 << 20
# What one more parallel part costs beyond its share of the tables (counted in the file's need below): a forked
# process shares the loader's interpreter and text, and keeps its decoded chunk (half a megabyte of text at a
# time) and the interpreter pages it touches; 10-20 MB measured on a 164 MB trace, counted four times over.
PART_BYTES = 64 << 20
# What a parallel part costs per byte of the file it builds (a gzip trace inflates ~10×; the columns and the
# decoded chunk take about 2.5× the JSON bytes of their range).
BYTES_PER_FILE_BYTE_GZ = 25
BYTES_PER_FILE_BYTE_JSON = 3


def cores() -> int:
    """Cores this process may run on (the affinity mask, which containers and taskset narrow), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def available_memory() -> int:
    """Bytes the machine can give without swapping (MemAvailable), or a large number when it cannot tell."""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return 1 << 40


def loader_slots() -> int:
    """Loader processes at once: every core but one (the server's), at least 1, as many as memory holds."""
    by_cores = max(1, cores() - 1) if cores() > 2 else cores()
    return max(1, min(by_cores, available_memory() // PROCESS_BYTES))


def parts_for(size_bytes: int, gzip: bool, loading: int) -> int:
    """Processes one file of ``size_bytes`` may be built by while ``loading`` files load at once: the cores left
    per loading file, bounded by the memory its parts would take."""
    per_file = max(1, loader_slots() // max(1, loading))
    factor = BYTES_PER_FILE_BYTE_GZ if gzip else BYTES_PER_FILE_BYTE_JSON
    need = size_bytes * factor  # the file's tables, however it is split: they all end up in one model
    by_memory = (available_memory() // max(1, loading) - need) // PART_BYTES  # each part adds a forked process
    return max(1, min(per_file, by_memory))
