"""One parse-cache entry on disk: how it is written, checked, opened and removed, safely beside other processes.

Writing: an entry is built whole in a private folder of the cache (``.tmp-<unique>``), *sealed* with a manifest
(``manifest.json``, written last: every file's size and CRC-32) and renamed into place in one step. Two servers (or
a server and a preprocessing run) that parse the same file at once both build it; the first rename wins, and the
other, finding a whole entry there, drops its own copy and uses the winner's (:func:`publish`). Nothing ever writes
into a published entry.

Opening: the server never memory-maps a published entry. It copies the files it needs into a private, unlinked
file (or memory, for small entries), checks each against the manifest, and maps the copy (:func:`open_entry`).
A file truncated under a memory map raises SIGBUS in whatever thread touches the lost pages, which no Python code can
catch; a private copy cannot be truncated by anyone, so no change to the cache after an entry was opened reaches the
server, and a change before it (a truncated, deleted or altered file) fails the check: the entry is then a miss
(parsed again). The copy costs a read of the entry when it is opened: 55-85 ms for the 61 MB entry of the 164 MB
trace, CRC-32 included (isal's), on a busy 2-core machine, against 3-7 ms to map it in place; a 2 GB trace's entry
(~750 MB) takes under a second, against the 24 s of its parse. The model keeps what mapping gave it: its pages are
the private file's, which the kernel can drop and read back, not memory of the server's own.

Parts added later: what the loader computes after the trace turned ready (``api/warm.py``: the first views of a big
trace, which would delay "ready" by many seconds) is added to the published entry as a sealed folder of its own,
``part-<name>`` (:func:`add_part`): built in a private folder, sealed with its own manifest, renamed into the entry
under the entry's shared lock. The entry's own files and manifest never change; each part is verified on its own
when it is opened (:func:`open_part`), and a damaged one is dropped alone (its views are then computed on first use).

Removing: an entry is removed only under an exclusive ``flock`` of its lock file, which every opening holds shared
while it copies (:func:`entry_lock`), so an eviction in another process never removes an entry being read; the
entry is renamed aside first, so no one opens it half-removed.
"""

from __future__ import annotations

import contextlib
import errno
import json
import mmap
import os
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

try:  # the same CRC-32 as zlib's, 3x faster (a declared dependency where it builds; zlib elsewhere)
    from isal.isal_zlib import crc32
except ImportError:  # pragma: no cover - a platform without isal
    from zlib import crc32

MANIFEST = "manifest.json"
LOCK = ".lock"  # the file whose flock guards an entry against removal while it is read
_FORMAT = 1
_CHUNK = 4 << 20
# Entries whose files together are smaller than this are copied into memory (no file, no mapping): thousands of
# tiny traces (~23 KB entries) cost no memory map each; larger ones, one map each (the kernel allows ~65,000 per
# process, and the old per-file maps took 16), and no more server memory than this each.
SMALL_ENTRY_BYTES = 64 << 10
_ALIGN = 64  # Arrow's buffer alignment: each file starts at a multiple of it in the private copy
_MANIFEST_MAX = 16 << 20
PUBLISH_ATTEMPTS = 20
PART_PREFIX = "part-"  # a sealed folder added to a published entry (:func:`add_part`)
NO_MANIFEST = "it has no manifest (unfinished, or written by an older version)"


class BadEntry(Exception):
    """An entry that cannot be used as it is (missing, incomplete, damaged); the message says which and why."""


@dataclass
class Opened:
    """The verified files of an opened entry, by name (buffers over the private copy), and the optional files that
    were dropped, with why."""

    files: dict[str, pa.Buffer]
    dropped: dict[str, str] = field(default_factory=dict)
    bytes: int = 0  # the entry's size as its manifest gives it


# ---- writing --------------------------------------------------------------------------------------------------------

def staging(directory: Path) -> Path:
    """A fresh private folder in the cache ``directory`` to build an entry in (the same filesystem: publishing
    renames). Its lock file is made first, so the published entry has one."""
    directory.mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix=".tmp-", dir=directory))
    (folder / LOCK).touch()
    return folder


def seal(folder: Path, known: dict[str, tuple[int, int]] | None = None) -> int:
    """Write ``folder``'s manifest: the size and CRC-32 of every file in it (hidden files aside). Returns the total
    size. The manifest goes last: an entry with one is whole. ``known``: (size, CRC-32) already read of some files
    (``jobs.handover``), used where the size still matches."""
    files: dict[str, list[int]] = {}
    for item in sorted(os.scandir(folder), key=lambda e: e.name):
        if item.name.startswith(".") or item.name == MANIFEST or not item.is_file(follow_symlinks=False):
            continue
        sum_ = (known or {}).get(item.name)
        if sum_ is None or sum_[0] != item.stat(follow_symlinks=False).st_size:
            sum_ = size_and_crc(Path(item.path))
        files[item.name] = list(sum_)
    tmp = folder / f".{MANIFEST}.tmp"
    tmp.write_text(json.dumps({"format": _FORMAT, "files": files}))
    os.replace(tmp, folder / MANIFEST)
    return sum(size for size, _ in files.values())


def publish(built: Path, entry: Path) -> bool:
    """Rename the sealed folder ``built`` into place as ``entry``; ``built`` is consumed. True when this one is
    now the entry; False when another process published it first (its entry is whole and checks out: it is used,
    this copy is dropped). A damaged entry in the way is removed first (once no one is reading it)."""
    try:
        for attempt in range(PUBLISH_ATTEMPTS):
            try:
                os.rename(built, entry)
                return True
            except OSError as err:
                if err.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                    raise
            if verify(entry) is None:
                return False
            if not discard(entry):
                time.sleep(0.05 * (attempt + 1))  # another process is copying it: a few milliseconds
        raise BadEntry(f"a damaged cache entry {entry} is in the way and is being read by another process")
    finally:
        shutil.rmtree(built, ignore_errors=True)


def add_part(built: Path, entry: Path, name: str) -> bool:
    """Seal the private folder ``built`` and rename it into the published ``entry`` as ``part-<name>``;
    ``built`` is consumed. True when the part is there now (this one, or the same part another process added first
    and that checks out); False when the entry is gone (evicted) or the part cannot be added."""
    target = entry / f"{PART_PREFIX}{name}"
    try:
        seal(built)
        with entry_lock(entry, shared=True):  # an eviction waits: the part lands in the entry, never in its trash
            try:
                os.rename(built, target)
                return True
            except OSError as err:
                if err.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                    return False
            return verify(target) is None
    except (BadEntry, OSError):
        return False
    finally:
        shutil.rmtree(built, ignore_errors=True)


def part_names(entry: Path) -> list[str]:
    """The names of the sealed parts added to ``entry`` (:func:`add_part`), in a fixed order."""
    try:
        found = [item.name[len(PART_PREFIX):] for item in os.scandir(entry)
                 if item.name.startswith(PART_PREFIX) and item.is_dir(follow_symlinks=False)]
    except OSError:
        return []
    return sorted(found)


def open_part(entry: Path, name: str, scratch: Path | None = None) -> Opened:
    """Every file of the part ``name`` of ``entry``, copied and checked against the part's own manifest, as
    :func:`open_entry` does for the entry; BadEntry when any file of it is missing or differs."""
    with entry_lock(entry, shared=True):
        opened = open_entry(entry / f"{PART_PREFIX}{name}", (), lambda _: True, scratch)
    if opened.dropped:
        raise BadEntry(f"its part {name}: {'; '.join(opened.dropped.values())}")
    return opened


# ---- checking and opening -------------------------------------------------------------------------------------------

def manifest(entry: Path) -> dict[str, tuple[int, int]]:
    """The entry's manifest: file name → (size, CRC-32). BadEntry when it is missing or unreadable."""
    try:
        with open(entry / MANIFEST, "rb") as fh:
            raw = fh.read(_MANIFEST_MAX + 1)
    except FileNotFoundError:
        raise BadEntry(NO_MANIFEST) from None
    except OSError as err:
        raise BadEntry(f"its manifest cannot be read ({err.strerror or err})") from None
    try:
        data = json.loads(raw)
        return {str(name): (int(size), int(crc)) for name, (size, crc) in data["files"].items()}
    except (ValueError, TypeError, KeyError, AttributeError):
        raise BadEntry("its manifest is damaged") from None


def verify(entry: Path, names: Iterable[str] | None = None) -> str | None:
    """Why the entry (or these files of it) is not whole and intact (each file its manifest lists: size and
    CRC-32); None when it is. Reads the files: for an entry found in the way of a publication, or a file served as
    it is (a download), not for every opening."""
    try:
        listed = manifest(entry)
    except BadEntry as err:
        return str(err)
    for name in listed if names is None else names:
        if name not in listed:
            return f"{name} is not in its manifest"
        size, crc = listed[name]
        try:
            if size_and_crc(entry / name) != (size, crc):
                return f"{name} differs from what was written"
        except OSError:
            return f"{name} is missing"
    return None


def open_entry(entry: Path, required: Iterable[str], optional: Callable[[str], bool] = lambda name: False,
               scratch: Path | None = None) -> Opened:
    """The ``required`` files of ``entry`` and those its manifest lists that ``optional`` accepts, copied into a
    private file (in ``scratch``, the cache folder) or memory and checked against the manifest. BadEntry when a
    required file is missing or differs; an optional file that does is dropped (``Opened.dropped`` says why)."""
    required = list(required)
    with entry_lock(entry, shared=True):
        listed = manifest(entry)
        absent = [name for name in required if name not in listed]
        if absent:
            raise BadEntry(f"{', '.join(absent)} not in its manifest")
        wanted = required + sorted(n for n in listed if n not in required and optional(n))
        copy, offsets, problems, crcs = _copy(entry, [(n, listed[n][0]) for n in wanted], scratch)
    views = {name: copy.slice(offsets[name], listed[name][0]) for name in wanted if name not in problems}
    files: dict[str, pa.Buffer] = {}
    dropped: dict[str, str] = {}
    for name in wanted:
        reason = problems.get(name)
        if reason is None and crcs[name] != listed[name][1]:
            reason = f"{name} differs from what was written (CRC-32)"
        elif reason is None:
            files[name] = views[name]
        if reason is not None and name in required:
            raise BadEntry(reason)
        if reason is not None:
            dropped[name] = reason
    return Opened(files, dropped, sum(size for size, _ in listed.values()))


def _copy(entry: Path, files: list[tuple[str, int]], scratch: Path | None
          ) -> tuple[pa.Buffer, dict[str, int], dict[str, str], dict[str, int]]:
    """Copy ``files`` (name, size the manifest gives) of ``entry`` one after the other into a private buffer; a
    file that is missing or of another size is left out, with the reason. Also the CRC-32 of each file copied.

    A large copy's CRCs are read from its file through a small buffer, not through its map: a page the process
    reads through a map stays in its memory (its PSS) until unmapped, so checking through the map charged the
    server the whole entry (4.4 GB of a 10 GB trace's) where its views read a part of it."""
    offsets: dict[str, int] = {}
    total = 0
    for name, size in files:
        offsets[name] = total
        total += -(-size // _ALIGN) * _ALIGN
    problems: dict[str, str] = {}
    if total <= SMALL_ENTRY_BYTES:
        memory = bytearray(total)
        for name, size in files:
            problems.update(_read_into(entry / name, size, memory, offsets[name], name))
        view = memoryview(memory)
        crcs = {name: crc32(view[offsets[name]:offsets[name] + size]) for name, size in files if name not in problems}
        return pa.py_buffer(memory), offsets, problems, crcs
    with _private_file(scratch) as fd:
        os.ftruncate(fd, total)
        for name, size in files:
            problems.update(_copy_file(entry / name, size, fd, offsets[name], name))
        crcs = {name: _crc_at(fd, offsets[name], size)[1] for name, size in files if name not in problems}
        mapped = mmap.mmap(fd, total, access=mmap.ACCESS_READ)
    return pa.py_buffer(mapped), offsets, problems, crcs


def _crc_at(fd: int, offset: int, size: int | None) -> tuple[int, int]:
    """(bytes read, CRC-32) of ``size`` bytes of ``fd`` from ``offset`` (None: to its end), read in chunks."""
    crc = done = 0
    buffer = bytearray(_CHUNK if size is None else min(_CHUNK, max(size, 1)))
    view = memoryview(buffer)
    while size is None or done < size:
        n = os.preadv(fd, [view[:len(buffer) if size is None else min(len(buffer), size - done)]], offset + done)
        if n <= 0:
            break
        crc = crc32(view[:n], crc)
        done += n
    return done, crc


@contextlib.contextmanager
def _private_file(scratch: Path | None) -> Iterator[int]:
    """An unlinked file (no one can open it by name, so no one can truncate it under our map) in ``scratch``
    (the cache's filesystem: the copy may share blocks with the entry) or, failing that, the temp folder."""
    try:
        handle = tempfile.TemporaryFile(dir=scratch)  # noqa: SIM115 - closed below, once mapped
    except OSError:
        handle = tempfile.TemporaryFile()  # noqa: SIM115
    try:
        yield handle.fileno()
    finally:
        handle.close()


def _read_into(path: Path, size: int, memory: bytearray, offset: int, name: str) -> dict[str, str]:
    try:
        with open(path, "rb") as fh:
            if os.fstat(fh.fileno()).st_size != size:
                return {name: f"{name} has {os.fstat(fh.fileno()).st_size:,} bytes, not the {size:,} written"}
            got = fh.readinto(memoryview(memory)[offset:offset + size])
    except FileNotFoundError:
        return {name: f"{name} is missing"}
    except OSError as err:
        return {name: f"{name} cannot be read ({err.strerror or err})"}
    return {} if got == size else {name: f"{name} was cut short while it was read"}


def _copy_file(path: Path, size: int, fd: int, offset: int, name: str) -> dict[str, str]:
    try:
        src = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return {name: f"{name} is missing"}
    except OSError as err:
        return {name: f"{name} cannot be opened ({err.strerror or err})"}
    try:
        actual = os.fstat(src).st_size
        if actual != size:
            return {name: f"{name} has {actual:,} bytes, not the {size:,} written"}
        done = copy_range(src, fd, size, offset)
    except OSError as err:
        return {name: f"{name} cannot be read ({err.strerror or err})"}
    finally:
        os.close(src)
    return {} if done == size else {name: f"{name} was cut short while it was read"}


def copy_range(src: int, dst: int, size: int, offset: int) -> int:
    """Copy ``size`` bytes of ``src`` to ``dst`` at ``offset``: in the kernel where it can (``copy_file_range``,
    which may share the blocks), else through a buffer. Returns the bytes copied (fewer: the source shrank)."""
    done = 0
    kernel = hasattr(os, "copy_file_range")
    while done < size:
        step = min(_CHUNK * 16, size - done)
        n = 0
        if kernel:
            try:
                n = os.copy_file_range(src, dst, step, done, offset + done)
            except OSError as err:
                if err.errno not in (errno.EXDEV, errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.EPERM):
                    raise
                kernel = False
        if not kernel:
            data = os.pread(src, min(step, _CHUNK), done)
            n = os.pwrite(dst, data, offset + done) if data else 0
        if n <= 0:
            break
        done += n
    return done


def size_and_crc(path: Path) -> tuple[int, int]:
    """(size, CRC-32) of a file, read once (in chunks when large; most files of a small entry are a few KB)."""
    with open(path, "rb") as fh:
        if os.fstat(fh.fileno()).st_size <= _CHUNK:
            data = fh.read()
            return len(data), crc32(data)
        return _crc_at(fh.fileno(), 0, None)


# ---- locking and removing -------------------------------------------------------------------------------------------

@contextlib.contextmanager
def entry_lock(entry: Path, shared: bool, wait: bool = True) -> Iterator[bool]:
    """Hold the entry's lock (shared: reading; exclusive: removing). Yields False when an exclusive lock is not to
    be had at once (``wait=False``); True otherwise, also where locks cannot be taken (a read-only cache, a
    filesystem without ``flock``: then nothing is removed there but by its owner). BadEntry when the entry is
    gone."""
    try:
        import fcntl
    except ImportError:  # Windows: no flock; eviction there may remove an entry being read (its copy fails: a miss)
        yield True
        return
    try:
        fd = os.open(entry / LOCK, os.O_RDONLY | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
    except FileNotFoundError:
        raise BadEntry("it is gone (removed by another process)") from None
    except OSError:
        yield shared  # cannot make the lock file (a read-only cache): readers go on, removers do not remove
        return
    try:
        mode = (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | (0 if wait else fcntl.LOCK_NB)
        try:
            fcntl.flock(fd, mode)
        except OSError as err:
            if err.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                yield False
                return
            yield shared  # no flock on this filesystem
            return
        yield True
    finally:
        os.close(fd)


def discard(entry: Path) -> bool:
    """Remove ``entry`` unless another process is reading it (True when it is gone). Renamed aside first, under
    the exclusive lock, so no one opens it half-removed."""
    aside = entry.with_name(f".trash-{uuid.uuid4().hex}")
    try:
        with entry_lock(entry, shared=False, wait=False) as mine:
            if not mine:
                return False
            os.rename(entry, aside)
    except (BadEntry, FileNotFoundError):
        return True
    except OSError:
        return False
    shutil.rmtree(aside, ignore_errors=True)
    return True


def entry_bytes(entry: Path) -> int:
    """The bytes of the files directly in ``entry`` and in its parts, counting none that vanished since it was
    listed."""
    total = 0
    with contextlib.suppress(FileNotFoundError, NotADirectoryError):
        for item in os.scandir(entry):
            with contextlib.suppress(FileNotFoundError):
                if item.is_file(follow_symlinks=False):
                    total += item.stat(follow_symlinks=False).st_size
                elif item.name.startswith(PART_PREFIX) and item.is_dir(follow_symlinks=False):
                    total += entry_bytes(Path(item.path))
    return total
