"""How much parallelism this machine affords: loader processes and parallel parts follow the cores and the memory
available, not fixed numbers, so one big file uses every core and many small files one core each, and neither
starves the server (one core is left to it) or runs the machine out of memory."""

from __future__ import annotations

import os

from ..loader.limits import Limits

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
    """Bytes this process can be given without swapping or being killed: the machine's MemAvailable, and what its
    memory cgroup (a container, a systemd slice) still allows, whichever is less; a large number when neither
    can be told."""
    machine = _machine_memory()
    cgroup = cgroup_memory_left()
    return machine if cgroup is None else min(machine, cgroup)


def _machine_memory() -> int:
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


# (limit, usage, stat, the stat's reclaimable page cache) of cgroup v2, then v1
_CGROUP_FILES = (
    ("memory.max", "memory.current", "memory.stat", "inactive_file"),
    ("memory/memory.limit_in_bytes", "memory/memory.usage_in_bytes", "memory/memory.stat", "total_inactive_file"),
)
_NO_LIMIT = 1 << 60


def cgroup_memory_left(root: str = "/sys/fs/cgroup") -> int | None:
    """What this process's memory cgroup still allows: its limit less what it uses (inactive page cache, which
    the kernel takes back before it kills, counted as free); None without a limit or where it cannot be read."""
    for limit_file, usage_file, stat_file, cache_key in _CGROUP_FILES:
        try:
            with open(os.path.join(root, limit_file), encoding="ascii") as fh:
                text = fh.read().strip()
            if text == "max" or int(text) >= _NO_LIMIT:
                return None
            with open(os.path.join(root, usage_file), encoding="ascii") as fh:
                used = int(fh.read().strip())
            used -= _stat(os.path.join(root, stat_file), cache_key)
        except (OSError, ValueError):
            continue
        return max(0, int(text) - max(0, used))
    return None


def _stat(path: str, key: str) -> int:
    try:
        with open(path, encoding="ascii") as fh:
            for line in fh:
                name, _, value = line.partition(" ")
                if name == key:
                    return int(value)
    except (OSError, ValueError):
        pass
    return 0


# What one event may cost the server with its views at most: ~60 bytes in the model, ~28 in the Trace view's
# index, the host tree and the per-view tables built on first use (measured ~150 B on 2 GB traces).
EVENT_BYTES = 200


def load_limits() -> Limits:
    """The bounds of a load in this process now (``loader.limits``): the JSON text the memory can hold while it
    is built (``BYTES_PER_FILE_BYTE_JSON`` times its size), and the events a model of that memory can serve."""
    memory = available_memory()
    return Limits(max_text_bytes=memory // BYTES_PER_FILE_BYTE_JSON, max_events=memory // EVENT_BYTES,
                  memory_bytes=memory)


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


# The first views, computed by the loader after the parse (api/warm.py), in a forked process per part: together those
# processes may take about this much per event of the trace, at least VIEWS_MIN_BYTES. What each part's process
# takes is api/warm.py's to say (``PART_BYTES_PER_EVENT``, measured: 125-255 bytes an event): a part starts when it
# fits beside those running. So a trace of up to about a million events computes its parts side by side, and the
# 2 GB trace one after the other: there the tree's peak is the one part's (2.93-2.97 GB measured with the Overview
# alone), where two parts at once raised it to 3.1-3.3 GB (the tables beside the GPU insights) and 4.5 GB (the
# Overview beside the tables or the index). Measured again in session 48 (benchmarks/README.md): the Overview beside
# the index 2,417 MB against 1,888 MB after it, and no sooner (each slowed the other on the lent host's cores).
VIEWS_BYTES_PER_EVENT = 300
VIEWS_MIN_BYTES = 1 << 30


def views_memory(events: int) -> int:
    """Bytes the processes computing the first views of a trace of ``events`` may take together (the machine's
    available memory at most)."""
    return min(max(VIEWS_MIN_BYTES, VIEWS_BYTES_PER_EVENT * events), available_memory())
