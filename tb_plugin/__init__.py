"""pytorch-tb-profiler: a TensorBoard plugin that turns torch.profiler traces into answers.

``tb_plugin.open(path)``, ``tb_plugin.diff(a, b)`` and ``tb_plugin.open_snapshot(path)`` are the Python API
(:mod:`tb_plugin.sdk`), imported on first use so that TensorBoard loading the plugin never imports pandas.
``tb_plugin.record_memory_history(logdir)`` (:mod:`tb_plugin.capture`) records the allocator's history in a
training script and dumps a snapshot on out-of-memory; it imports torch only when called.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from .capture import record_memory_history
    from .sdk import SnapshotError, diff, open, open_snapshot

__all__ = ["SnapshotError", "__version__", "diff", "open", "open_snapshot", "record_memory_history"]


def __getattr__(name: str) -> Any:
    if name in ("open", "diff", "open_snapshot", "SnapshotError"):
        from . import sdk

        return getattr(sdk, name)
    if name == "record_memory_history":
        from . import capture

        return capture.record_memory_history
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
