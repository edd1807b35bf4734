"""The server's garbage-collector pauses: the objects alive once the plugin is built leave the collector's scans.

Every answer builds thousands of short-lived lists and dicts (a Trace view window's events, a table's rows); those
still alive while the request runs are promoted to the oldest generation, and every few requests that triggers a
full collection, which walks every tracked object of the process: TensorBoard's and this plugin's modules,
functions and types, 78,000 objects once both are imported. On the 2 GB trace in a TensorBoard server (2-core VM)
a full collection took 19-29 ms against a 9 ms window answer: windows of a tenth of the trace answered in 8.7 ms
(p50) but 29.4 ms at p95 and 139 ms at worst. With those objects frozen as the plugin is built (:func:`gc.freeze`:
kept in a permanent generation the collector never walks) the p95 was 11.7 ms and the worst 17.1 ms (the collector
off: 12.8 and 13.3 ms), a full collection 0.5-1.1 ms. On the 10 GB trace on a lent 16-core host the windows' p95 at
the worst zoom went from 0.059 s to 0.044 s (``benchmarks/README.md``, session 46).

Frozen once per process, after a collection (so no garbage of the start-up is frozen with them): what is frozen
lives as long as the process anyway (modules, their functions and types, TensorBoard's app). Later objects (the
traces' models, their memoised results) are collected as before: a model evicted from the cache is freed.
"""

from __future__ import annotations

import gc
import threading

_LOCK = threading.Lock()
_FROZEN: list[bool] = []


def freeze_startup_objects() -> bool:
    """Collect, then freeze every object alive now, the first time this process asks; True if it froze now."""
    with _LOCK:
        if _FROZEN:
            return False
        gc.collect()
        gc.freeze()
        _FROZEN.append(True)
        return True
