"""The Python API: the views' numbers as pandas DataFrames, for notebooks, scripts and CI.

    import tb_plugin
    t = tb_plugin.open("log/run1")            # a trace file, a run directory or a logdir (local or fsspec URL)
    t.overview().breakdown                    # the step breakdown, as the Overview page shows it
    t.operators(group_by="name_shape")        # the Operator view
    t.overview().mfu.ratio, t.roofline()      # model FLOPs utilisation, the roofline
    tb_plugin.diff("log/base", "log/new").breakdown
    s = tb_plugin.open_snapshot("oom.pickle")  # an allocator snapshot (torch.cuda.memory._dump_snapshot)
    s.summary()["oom"]                        # what was asked, what was free, fragmentation or live data

It reuses the plugin's catalog, loader processes, parse cache and analyses (see docs/guide/python-api.md).
"""

from __future__ import annotations

from .locate import EXIT_BAD_TRACE, EXIT_NO_TRACE, EXIT_UNREACHABLE, ProfilerError
from .snapshot import Snapshot, SnapshotError, open_snapshot
from .trace import Mfu, Overview, Trace, TraceDiff, WhatIf, metric_names
from .trace import diff_traces as diff
from .trace import open_trace as open

__all__ = ["EXIT_BAD_TRACE", "EXIT_NO_TRACE", "EXIT_UNREACHABLE", "Mfu", "Overview", "ProfilerError", "Snapshot",
           "SnapshotError", "Trace", "TraceDiff", "WhatIf", "diff", "metric_names", "open", "open_snapshot"]
