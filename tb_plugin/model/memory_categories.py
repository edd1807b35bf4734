"""Memory by category: torch's category names and one parsed ``export_memory_timeline`` file.

``torch.profiler._memory_profiler`` orders its categories PARAMETER, OPTIMIZER_STATE, INPUT, TEMPORARY,
ACTIVATION, GRADIENT, AUTOGRAD_DETAIL and, last, tensors it could not categorise (``None``); both export formats
index categories in that order, so the model keeps it: a category is its index here everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

CATEGORIES = ("parameter", "optimizer_state", "input", "temporary", "activation", "gradient", "autograd_detail",
              "unknown")
UNKNOWN = CATEGORIES.index("unknown")

TIMELINE = "timeline"  # ``[times in µs since the epoch, [[0, bytes per category...], ...]]``
RAW = "raw"  # ``[[time in ns since the epoch (-1: before profiling), action, ±bytes, category], ...]``


@dataclass(frozen=True)
class MemoryExport:
    """One ``export_memory_timeline`` file, decoded.

    ``times_us``/``sizes`` are torch's own coalesced timeline (``sizes[i, c]``: live bytes of category ``c`` from
    ``times_us[i]`` on), computed by torch (``*.json``) or here exactly as torch does (``*.raw.json``). A raw
    export also keeps its create/destroy events (``event_ns``, ``event_bytes`` > 0, ``event_category``): they
    match the trace's ``[memory]`` records one to one by time and size, which labels each allocation.
    """

    name: str
    kind: str
    times_us: np.ndarray  # int64, µs since the epoch, non-decreasing
    sizes: np.ndarray  # int64, shape (len(times_us), len(CATEGORIES))
    event_ns: np.ndarray  # int64 (raw only, else empty)
    event_bytes: np.ndarray  # int64
    event_category: np.ndarray  # int8

    @property
    def span_us(self) -> tuple[int, int] | None:
        """First and last time of the export (µs since the epoch), None when it holds no time."""
        return (int(self.times_us[0]), int(self.times_us[-1])) if len(self.times_us) else None
