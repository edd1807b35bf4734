"""pytorch-tb-profiler: a TensorBoard plugin that turns torch.profiler traces into answers.

``tb_plugin.open(path)`` and ``tb_plugin.diff(a, b)`` are the Python API (:mod:`tb_plugin.sdk`), imported on
first use so that TensorBoard loading the plugin never imports pandas.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from .sdk import diff, open

__all__ = ["__version__", "diff", "open"]


def __getattr__(name: str) -> Any:
    if name in ("open", "diff"):
        from . import sdk

        return getattr(sdk, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
