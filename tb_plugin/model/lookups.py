"""Row lookups every layer above the model needs: from an event row to its row in a side table, or to its node in
the host operator tree. Computed once per model (memoised), as arrays the size of the events table: int32, 4 bytes
an event, where int64 took 42 MB of the 2 GB trace's memory each and 0.27 GB of the 10 GB trace's (2**31 events
would be some 600 GB of JSON; the Trace view's index holds its rows as int32 too)."""

from __future__ import annotations

import numpy as np

from .derived import memoized
from .optree import host_tree
from .tables import TraceModel


@memoized(closed=True)
def side_row(model: TraceModel, table: str) -> np.ndarray:
    """For each event row, its row in the side table ``table`` (-1 if none)."""
    return row_lookup(model, table)


def row_lookup(model: TraceModel, table: str) -> np.ndarray:
    """:func:`side_row` built anew, not kept: for a caller that needs it once (4 bytes an event: 21 MB of the 2 GB
    trace, for a side table of a few rows)."""
    lookup = np.full(model.n_events, -1, dtype=np.int32)
    lookup[model[table]["row"]] = np.arange(len(model[table]["row"]), dtype=np.int32)
    return lookup


@memoized
def tree_node_of_row(model: TraceModel) -> np.ndarray:
    """For each event row, its node in the host operator tree (-1 if it is not a node)."""
    tree = host_tree(model)
    lookup = np.full(model.n_events, -1, dtype=np.int32)
    lookup[tree.rows] = np.arange(tree.size, dtype=np.int32)
    return lookup
