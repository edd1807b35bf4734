"""A rank summary on disk: two small Parquet tables (per step, per collective instance) and a JSON file of the
rest, written last (``jobs.cache.SUMMARY_MARKER``), so its presence means the entry is complete.

Parquet keeps float64 values bit for bit (NaN included), so the job answer from read-back summaries equals the
answer from the models they were computed from.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..analysis.rank_summary import COLLECTIVE_COLUMNS, STEP_COLUMNS, RankSummary
from ..jobs.cache import SUMMARY_MARKER
from ..jobs.shared import SUMMARY_FILES

STEPS_FILE, COLLECTIVES_FILE = SUMMARY_FILES[0], SUMMARY_FILES[1]
_STRING_COLUMNS = ("name", "group")
_BOOL_COLUMNS = ("on_host", "prelaunched")


def write_summary(summary: RankSummary, directory: Path) -> None:
    """Write ``summary`` into an entry folder (which holds its model too); the marker file goes last."""
    directory.mkdir(parents=True, exist_ok=True)
    steps = pa.table({c: pa.array(np.asarray(summary.steps[c], dtype=np.float64)) for c in STEP_COLUMNS})
    cols = summary.collectives
    collectives = pa.table({c: pa.array(cols[c].tolist(), type=pa.string()) if c in _STRING_COLUMNS
                            else pa.array(cols[c]) for c in COLLECTIVE_COLUMNS})
    pq.write_table(steps, directory / STEPS_FILE)
    pq.write_table(collectives, directory / COLLECTIVES_FILE)
    # the merged interval sets go into the JSON file (a float's repr reads back bit for bit), keeping the entry's
    # file list as it was
    intervals = {name: [a.tolist(), b.tolist()] for name, (a, b) in summary.intervals.items()}
    (directory / SUMMARY_MARKER).write_text(json.dumps({**summary.scalars(), "intervals": intervals}))


def read_summary(source: Path | Mapping[str, pa.Buffer], worker: str | None = None) -> RankSummary:
    """The summary stored in an entry folder, or given as its files by name (the server's verified copy of them,
    ``jobs.entries``); ``worker``: the name the server lists the rank under (the same as the preprocessing run's
    unless the trace was renamed)."""
    def opened(name: str) -> Any:
        return pa.BufferReader(source[name]) if isinstance(source, Mapping) else source / name

    marker = (source[SUMMARY_MARKER].to_pybytes() if isinstance(source, Mapping)
              else (source / SUMMARY_MARKER).read_bytes())
    scalars: dict[str, Any] = json.loads(marker)
    # ParquetFile.read, not read_table: no dataset discovery, ~10x faster on these small files (1,024 of them);
    # no thread pool inside one read (a third faster on a file this small; the server reads many files at once)
    steps = pq.ParquetFile(opened(STEPS_FILE)).read(use_threads=False)
    collectives = pq.ParquetFile(opened(COLLECTIVES_FILE)).read(use_threads=False)
    intervals = {name: (np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64))
                 for name, (a, b) in scalars.pop("intervals", {}).items()}
    summary = RankSummary(
        intervals=intervals,
        steps={c: _column(steps, c, np.float64) for c in STEP_COLUMNS},
        collectives={c: _column(collectives, c, object if c in _STRING_COLUMNS else bool if c in _BOOL_COLUMNS
                                else None)
                     for c in COLLECTIVE_COLUMNS if c in collectives.column_names},
        **scalars)
    return summary if worker is None or worker == summary.worker else dataclasses.replace(summary, worker=worker)


def _column(table: pa.Table, name: str, dtype: Any) -> np.ndarray:
    values: np.ndarray = table.column(name).to_numpy()
    return values.astype(dtype) if dtype is not None else values
