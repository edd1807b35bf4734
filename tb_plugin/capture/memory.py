"""Recording the CUDA allocator's history in a training script, and a snapshot on out-of-memory, into the logdir.

    import tb_plugin
    memory = tb_plugin.record_memory_history("log/my_run")  # before the model is built
    ...                                                     # train; an OutOfMemoryError leaves a snapshot
    memory.dump()                                           # or take one now (after a few steps)

The Memory view lists the ``*.pickle`` files it writes under the run (``log/my_run``) and opens an out-of-memory
snapshot on its out-of-memory moment. Without this package the same is three lines of torch::

    torch.cuda.memory._record_memory_history(max_entries=100_000)
    torch._C._cuda_attach_out_of_memory_observer(
        lambda device, alloc, device_alloc, device_free: torch.cuda.memory._dump_snapshot("log/my_run/oom.pickle"))

torch is imported only when recording starts: this module never depends on it. ``torch._C``'s observer is
called by the allocator, with the GIL, after it recorded its ``oom`` entry and before it raises, so the snapshot
holds the failed request; an observer cannot be detached, so :meth:`MemoryHistory.stop` only disarms it.
"""

from __future__ import annotations

import gzip
import os
import pickle
import socket
import threading
import time
import warnings
from types import TracebackType
from typing import Any

DEFAULT_MAX_ENTRIES = 100_000  # history entries kept (a ring buffer); torch's own default keeps everything


class MemoryHistory:
    """A recording started by :func:`record_memory_history`; ``active`` is False where CUDA is not available."""

    def __init__(self, logdir: str, *, max_entries: int = DEFAULT_MAX_ENTRIES, stacks: str = "all",
                 dump_on_oom: bool = True, max_oom_dumps: int = 3, compress: bool = False,
                 prefix: str = "memory_snapshot") -> None:
        self.logdir = logdir
        self.compress = compress
        self.prefix = prefix
        self.max_oom_dumps = max_oom_dumps
        self.oom_dumps: list[str] = []
        self.active = False
        self._legacy = False
        self._lock = threading.Lock()
        import torch  # lazily: only a script that records imports torch

        self._torch: Any = torch  # torch's private memory API is typed differently across versions
        if not torch.cuda.is_available():
            warnings.warn("CUDA is not available: the allocator's memory history is not recorded", stacklevel=3)
            return
        self._legacy = _start(self._torch, max_entries, stacks)
        self.active = True
        if dump_on_oom:
            self._torch._C._cuda_attach_out_of_memory_observer(self._on_oom)

    def _path(self, kind: str) -> str:
        host = socket.gethostname().split(".")[0] or "host"
        ext = ".pickle.gz" if self.compress else ".pickle"
        name = f"{self.prefix}{'_' + kind if kind else ''}_{host}_{os.getpid()}.{time.time_ns()}{ext}"
        return f"{self.logdir.rstrip('/')}/{name}"

    def dump(self, path: str | None = None) -> str | None:
        """Write a snapshot now (the history so far, the segments as they are); its path, None when inactive."""
        if not self.active:
            return None
        return self._write(self._torch.cuda.memory._snapshot(), path or self._path(""))

    def _on_oom(self, device: int, alloc: int, device_allocated: int, device_free: int) -> None:
        """torch's out-of-memory observer: ``alloc`` is the segment it failed to get, ``device_allocated`` what the
        process may use (``set_per_process_memory_fraction``'s limit, else the device's memory), ``device_free``
        what cudaMemGetInfo said; the snapshot carries them under ``pytorch_tb_profiler`` (other readers ignore a
        key they do not know), so the Memory view can tell a process limit from a full device."""
        with self._lock:
            if not self.active or len(self.oom_dumps) >= self.max_oom_dumps:
                return
            try:
                snapshot = self._torch.cuda.memory._snapshot()
                total = _total_memory(self._torch, device)
                snapshot["pytorch_tb_profiler"] = {"oom": {
                    "device": device, "segment_bytes": alloc, "limit_bytes": device_allocated,
                    "device_free_bytes": device_free, "device_total_bytes": total}}
                self.oom_dumps.append(self._write(snapshot, self._path("oom")))
            except Exception as err:  # noqa: BLE001 - the program's OutOfMemoryError must still be raised
                warnings.warn(f"could not write the out-of-memory snapshot: {err}", stacklevel=2)

    def _write(self, snapshot: dict[str, Any], path: str) -> str:
        """Pickle as torch's ``_dump_snapshot`` does (gzip when asked), under a temporary name first, so the catalog
        never lists half a file."""
        data = pickle.dumps(snapshot, protocol=pickle.DEFAULT_PROTOCOL)
        if path.endswith(".gz"):
            data = gzip.compress(data, compresslevel=6)
        if "://" in path:
            import fsspec

            with fsspec.open(path, "wb") as out:
                out.write(data)
            return path
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        partial = f"{path}.{os.getpid()}.partial"
        with open(partial, "wb") as out:
            out.write(data)
        os.replace(partial, path)
        return path

    def stop(self) -> None:
        """Stop recording (the out-of-memory observer stays attached in torch, but writes nothing any more)."""
        with self._lock:
            if self.active and self._legacy:
                self._torch.cuda.memory._record_memory_history(False)
            elif self.active:
                self._torch.cuda.memory._record_memory_history(enabled=None)
            self.active = False

    def __enter__(self) -> MemoryHistory:
        return self

    def __exit__(self, kind: type[BaseException] | None, err: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()


def _total_memory(torch: Any, device: int) -> int | None:
    try:
        return int(torch.cuda.get_device_properties(device).total_memory)
    except Exception:  # noqa: BLE001 - a number for the record only
        return None


def _start(torch: Any, max_entries: int, stacks: str) -> bool:
    """``_record_memory_history`` in torch >= 2.1's form, or 2.0's (``enabled`` a bool, its own argument names):
    True for 2.0's."""
    try:
        torch.cuda.memory._record_memory_history(enabled="all", context="all", stacks=stacks,
                                                 max_entries=max_entries)
        return False
    except TypeError:
        torch.cuda.memory._record_memory_history(True, trace_alloc_max_entries=max_entries,
                                                 trace_alloc_record_context=True, record_context_cpp=stacks == "all")
        return True


def record_memory_history(logdir: str, *, max_entries: int = DEFAULT_MAX_ENTRIES, stacks: str = "all",
                          dump_on_oom: bool = True, max_oom_dumps: int = 3, compress: bool = False,
                          prefix: str = "memory_snapshot") -> MemoryHistory:
    """Start recording the CUDA allocator's history (the last ``max_entries`` allocations, frees and segment
    changes, each with its stack: ``stacks="python"`` for Python frames only, cheaper; ``"all"`` adds C++ frames,
    which name the autograd node of each backward allocation), and write a snapshot into ``logdir`` when the
    allocator runs out of memory (``memory_snapshot_oom_<host>_<pid>.<ns>.pickle``, at most ``max_oom_dumps``;
    ``compress`` gzips them). Call it before the model is built, so parameters have their stacks too."""
    return MemoryHistory(logdir, max_entries=max_entries, stacks=stacks, dump_on_oom=dump_on_oom,
                         max_oom_dumps=max_oom_dumps, compress=compress, prefix=prefix)
