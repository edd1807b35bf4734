"""Allocator snapshots in the Python API: ``s = tb_plugin.open_snapshot("oom.pickle")``.

The same reader (data only: a pickle that would run code raises :class:`SnapshotError` naming the file) and the
same analyses as the Memory view's snapshot mode; tables are pandas DataFrames, one row per allocation or block,
units in the column names, stacks as lists of frame dicts (innermost first, each with its ``kind``: user,
library, generated or cpp).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..analysis import snapshot_view as view
from ..analysis.snapshot_categories import categories
from ..analysis.snapshot_frames import frame_kinds, frame_label, stack_frames
from ..analysis.snapshot_history import device_history
from ..catalog import remote
from ..loader.snapshot import SnapshotError, load_snapshot
from ..model.memory_categories import CATEGORIES
from ..model.snapshot import AllocatorSnapshot

__all__ = ["Snapshot", "SnapshotError", "open_snapshot"]


def open_snapshot(path: str) -> Snapshot:
    """Read a ``torch.cuda.memory._dump_snapshot`` file (``*.pickle``, gzipped or not; a local path or an fsspec
    URL, with the same credentials as a logdir)."""
    try:
        access = remote.resolve(path).access if remote.is_remote(path) else None
    except remote.RemoteError as err:
        raise SnapshotError(f"{remote.scrub_url(path)}: {err}") from None
    return Snapshot(load_snapshot(path, access))


def _missing_where(values: np.ndarray, missing: np.ndarray) -> Any:
    """Whole numbers with ``<NA>`` where ``missing`` (pandas' nullable Int64)."""
    return pd.arrays.IntegerArray(np.where(missing, 0, values).astype(np.int64), missing.astype(bool))


class Snapshot:
    """One allocator snapshot. ``device`` arguments default to the device of its last out-of-memory, else the one
    with the most history."""

    def __init__(self, snap: AllocatorSnapshot) -> None:
        self.data = snap

    def __repr__(self) -> str:
        return f"<Snapshot {self.data.name}: {self.data.n_events:,} history entries, devices {self.devices}>"

    @property
    def devices(self) -> list[int]:
        return self.data.devices

    def _device(self, device: int | None) -> int:
        if device is None:
            return view.default_device(self.data)
        if device not in self.devices:
            raise ValueError(f"{self.data.name} has nothing on device {device}; its devices: {self.devices}")
        return device

    def summary(self, device: int | None = None) -> dict[str, Any]:
        """``live_bytes`` (requested bytes of the blocks live at the end), ``reserved_bytes``, ``peak_live_bytes``
        (over the history), ``oom`` (None, or ``requested_bytes``, ``device_free_bytes``, ``time_us``,
        ``live_bytes``, ``reason`` …), and the peak, findings and categories the Memory view shows."""
        d = self._device(device)
        full = view.snapshot_summary(self.data, d)
        oom = full["oom"]
        keys = ("requested_bytes", "device_free_bytes", "time_us", "live_bytes", "reason", "position",
                "free_in_reserved_bytes", "largest_free_bytes", "limit_bytes")
        return {
            "file": full["file"], "device": d, "live_bytes": full["live_bytes"],
            "reserved_bytes": full["reserved_bytes"], "peak_live_bytes": full["peak_live_bytes"],
            "oom": {k: oom[k] for k in keys} if oom else None, "peak": full["peak"],
            "findings": full["findings"], "categories_at_peak": full["categories_at_peak"],
            "positions": full["positions"], "allocations": full["allocations"], "notes": full["notes"],
        }

    def timeline(self, device: int | None = None) -> pd.DataFrame:
        """Live and reserved bytes after every history entry (``position``)."""
        h = device_history(self.data, self._device(device))
        frame: pd.DataFrame = pd.DataFrame({"position": np.arange(h.n), "time_us": h.time_us,
                                            "live_bytes": h.live_after, "reserved_bytes": h.reserved_after})
        return frame

    def allocations(self, device: int | None = None) -> pd.DataFrame:
        """Every allocation: bytes, alloc and free positions and times (``end`` missing: live at the end), category,
        the frame that made it, its stack and its free's stack."""
        d = self._device(device)
        h = device_history(self.data, d)
        origin = frame_kinds(self.data).origin_of(h.stack)
        labels = {int(f): frame_label(self.data, int(f)) for f in np.unique(origin).tolist()}
        stacks = {int(s): stack_frames(self.data, int(s)) for s in np.unique(np.concatenate([h.stack, h.free_stack]))}
        end = _missing_where(h.end, h.end >= h.n)
        start_us = np.where(h.start >= 0, h.time_us[np.clip(h.start, 0, max(h.n - 1, 0))] if h.n else np.nan, np.nan)
        end_us = np.where(h.end < h.n, h.time_us[np.clip(h.end, 0, max(h.n - 1, 0))] if h.n else np.nan, np.nan)
        table: pd.DataFrame = pd.DataFrame({
            "id": np.arange(len(h.size)), "address": h.addr, "size_bytes": h.size,
            "block_bytes": _missing_where(h.block_size, h.block_size < 0),
            "start": h.start, "end": end, "start_us": start_us, "end_us": end_us, "lifetime_us": end_us - start_us,
            "category": [CATEGORIES[int(c)] for c in categories(self.data, d).tolist()],
            "frame": [labels[int(f)] for f in origin.tolist()], "stream": h.stream,
            "stack": [stacks[int(s)] for s in h.stack.tolist()],
            "free_stack": [stacks[int(s)] for s in h.free_stack.tolist()], "stack_is_free": h.stack_is_free,
        })
        return table

    def live_at(self, position: int, device: int | None = None) -> pd.DataFrame:
        """The allocations live after history entry ``position`` (-1: before the first)."""
        d = self._device(device)
        table = self.allocations(d)
        live: pd.DataFrame = table[device_history(self.data, d).live_mask(position)].reset_index(drop=True)
        return live

    def segments(self, position: int | None = None, device: int | None = None) -> pd.DataFrame:
        """The segments' blocks after ``position`` (default: the end, the snapshot's own blocks), one row per live
        block or free range: segment address and bytes, offset, bytes, state, and for a live block its allocation."""
        d = self._device(device)
        at = device_history(self.data, d).n - 1 if position is None else position
        rows = []
        for seg in view.segments_view(self.data, d, at, limit=1 << 30, max_blocks=1 << 62)["segments"]:
            for b in seg["blocks"]:
                rows.append({"segment_address": seg["address"], "segment_bytes": seg["bytes"],
                             "stream": seg["stream"], "expandable": seg["expandable"], "offset": b["offset"],
                             "bytes": b["bytes"], "state": b["state"], "id": b.get("id"),
                             "size_bytes": b.get("size_bytes"), "category": b.get("category"),
                             "frame": b.get("frame")})
        columns = ["segment_address", "segment_bytes", "stream", "expandable", "offset", "bytes", "state", "id",
                   "size_bytes", "category", "frame"]
        table: pd.DataFrame = pd.DataFrame(rows, columns=columns)
        return table
