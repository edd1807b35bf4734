"""Host work that does not involve the device: the DataLoader's waits and operators that launch nothing.

A GPU-idle gap in which the host runs such work would be there with or without a host synchronisation before it
(the host is busy with its own work, not launching), so ``sync_cost`` stops charging a post-sync gap to the sync
where the host turns to it; the *Input-bound*, *CPU tensor creation* and *CPU-bound* findings keep that time.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ...model import intervals as iv
from ...model.arrays import isin_ints
from ...model.derived import memoized
from ...model.kinds import Kind
from ...model.names import is_dataloader, name_mask
from ...model.optree import host_tree
from ...model.tables import TraceModel
from .gpu_time import spans


@memoized
def loader_intervals(model: TraceModel) -> iv.Intervals:
    """The DataLoader's spans (``enumerate(DataLoader)#…`` annotations and operators): waiting for a batch."""
    ev = model["events"]
    return spans(model, isin_ints(ev["kind"], (Kind.CPU_OP, Kind.USER_ANNOTATION))
                 & name_mask(model, ev["name"], is_dataloader))


@dataclass(frozen=True)
class HostOnly:
    tid: np.ndarray  # thread of each span; sorted by (tid, start)
    start: np.ndarray
    end: np.ndarray


@memoized
def host_only(model: TraceModel) -> HostOnly:
    """Outermost host operators whose whole subtree talks to no device (no launch, copy, synchronisation or any
    other runtime/driver call), and DataLoader spans, per thread."""
    tree = host_tree(model)
    ev = model["events"]
    device = np.zeros(tree.size, dtype=bool)
    cur = np.flatnonzero(isin_ints(tree.kind, (Kind.RUNTIME, Kind.DRIVER)))
    while len(cur):  # mark every ancestor of a runtime/driver call, one tree level at a time
        device[cur] = True
        cur = tree.parent[cur]
        cur = np.unique(cur[cur >= 0])
        cur = cur[~device[cur]]
    parent_op = np.where(tree.parent >= 0, tree.op_of[np.maximum(tree.parent, 0)], -1)
    ops = (tree.kind == Kind.CPU_OP) & ~tree.merged & (parent_op < 0) & ~device
    loader = isin_ints(tree.kind, (Kind.CPU_OP, Kind.USER_ANNOTATION)) & name_mask(model, ev["name"][tree.rows],
                                                                                  is_dataloader)
    nodes = np.flatnonzero(ops | loader)
    tid = ev["tid"][tree.rows[nodes]]
    order = np.lexsort((tree.start[nodes], tid))
    nodes = nodes[order]
    return HostOnly(tid=tid[order], start=tree.start[nodes], end=tree.end[nodes])


def next_host_only(model: TraceModel, rows: np.ndarray, after: np.ndarray) -> np.ndarray:
    """For each event row (a host call), the moment its thread is first in host-only work at or after ``after``
    (``after`` itself if it is in such work then; +inf if never)."""
    h = host_only(model)
    out = np.full(len(rows), np.inf)
    tids = model["events"]["tid"][rows]
    for t in np.unique(tids).tolist():
        lo, hi = np.searchsorted(h.tid, t, side="left"), np.searchsorted(h.tid, t, side="right")
        if lo == hi:
            continue
        starts, ends = h.start[lo:hi], np.maximum.accumulate(h.end[lo:hi])
        mine = tids == t
        i = np.searchsorted(ends, after[mine], side="right")  # the first span still open after ``after``
        found = i < len(starts)
        hit = np.full(int(mine.sum()), np.inf)
        hit[found] = np.maximum(starts[i[found]], after[mine][found])
        out[mine] = hit
    return out
