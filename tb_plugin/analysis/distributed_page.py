"""One page of the Distributed answer: at 1,024 ranks the answer must not carry every rank's row.

``job_distributed`` computes the whole job once (every rank's row, the stragglers, the groups); this module cuts
what one request sends: the rank rows of one page, sorted on the server, plus what always describes the whole job
whatever the page: the straggler and the per-group stragglers, the totals over all ranks (mean, min and max of
each per-step metric) and the heat-map of communication time by rank and step, binned to at most
``HEATMAP_MAX_ROWS`` rows (mean and max of the ranks in each bin), so its size stays bounded at any rank count.

The rule without paging parameters: a job of at most ``WHOLE_MAX`` ranks is answered whole (its rows in rank
order, as before paging existed), a larger one with its first ``DEFAULT_LIMIT`` rows in rank order; without
``limit`` a page has that many rows too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .table_search import search_mask

WHOLE_MAX = 256  # jobs up to this many ranks are answered whole when no page is asked for
DEFAULT_LIMIT = 100  # rows of a larger job's first page when no page is asked for
MAX_LIMIT = 1024  # rows one request may ask for
HEATMAP_MAX_ROWS = 1024  # the heat-map bins ranks beyond this many rows
# the row fields a page may be sorted by (means per step, and the rank's identity)
SORT_KEYS = ("rank", "worker", "step_us", "computation_us", "communication_us", "overlap_us", "other_us",
             "transfer_us", "sync_us", "host_wait_us", "host_idle_us", "stalled_us", "exposed_transfer_us", "wait_us",
             "own_us")
TOTAL_KEYS = SORT_KEYS[2:]
ORDERS = ("asc", "desc")


def page_of(job: dict[str, Any], offset: int | None = None, limit: int | None = None, sort: str = "rank",
            order: str = "asc", tables: Callable[[int], list[dict[str, Any]]] | None = None, *, q: str = ""
            ) -> dict[str, Any]:
    """``job`` (from ``job_distributed``) with its rank rows cut to one page (see the module docstring): ``ranks``
    and ``communication_by_step`` hold the page's rows; ``page`` says which (``total``: the rows ``q`` matches,
    every rank without it); ``totals`` and ``heatmap`` cover every rank. ``offset`` past the last row gives an
    empty page. ``q``: the rank table's search (:func:`matching`). ``tables``: for a job from
    ``job_distributed_lazy``, its function giving the per-collective table of the row at a position, called for the
    page's rows only."""
    rows: list[dict[str, Any]] = job["ranks"]
    if limit is None:
        limit = len(rows) if len(rows) <= WHOLE_MAX else DEFAULT_LIMIT
    start = max(0, offset or 0)
    size = max(1, min(MAX_LIMIT, limit))
    ordered = matching(rows, sorted_positions(rows, sort, order), q)
    total = len(ordered)
    picked = ordered[start:start + size]
    by_step = job["communication_by_step"]
    return {
        **job,
        "ranks": [rows[i] if tables is None or rows[i]["collectives"] is not None
                  else {**rows[i], "collectives": tables(i)} for i in picked],
        "communication_by_step": [by_step[i] for i in picked],
        "page": {"offset": start, "limit": size, "total": total, "sort": sort, "order": order,
                 "positions": [int(i) for i in picked]},
        "totals": totals(rows),
        "heatmap": heatmap(rows, job["communication_by_step"], len(job["steps"])),
    }


def matching(rows: list[dict[str, Any]], positions: list[int], q: str) -> list[int]:
    """The ``positions`` whose row the rank table's search ``q`` finds (``table_search``: in "worker host rank"), in
    their order; every position for an empty ``q``."""
    if not q.strip():
        return positions
    texts = [f"{rows[i]['worker']} {rows[i].get('host') or ''} {rows[i]['rank']}" for i in positions]
    return [i for i, found in zip(positions, search_mask(texts, q).tolist()) if found]


def sorted_positions(rows: list[dict[str, Any]], sort: str, order: str) -> list[int]:
    """Row positions (rank order) sorted by ``sort``; a missing value (n/a overlap) sorts last either way, and ties
    keep rank order."""
    if sort not in SORT_KEYS or order not in ORDERS:
        raise ValueError(f"cannot sort by {sort!r} {order!r}")
    sign = -1 if order == "desc" else 1
    if sort == "worker":
        return sorted(range(len(rows)), key=lambda i: str(rows[i]["worker"]), reverse=order == "desc")
    present = [i for i, r in enumerate(rows) if r.get(sort) is not None]
    missing = [i for i, r in enumerate(rows) if r.get(sort) is None]
    return sorted(present, key=lambda i: sign * float(rows[i][sort])) + missing


def totals(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Over every rank: the count, and per metric the mean, min and max of the ranks' means per step (ranks where a
    metric is n/a left out of it; null where no rank has it)."""
    out: dict[str, Any] = {"ranks": len(rows), "mean": {}, "min": {}, "max": {}}
    for key in TOTAL_KEYS:
        values = np.array([float(r[key]) for r in rows if r.get(key) is not None], dtype=np.float64)
        for stat, fn in (("mean", np.mean), ("min", np.min), ("max", np.max)):
            out[stat][key] = float(fn(values)) if len(values) else None
    return out


def heatmap(rows: list[dict[str, Any]], by_step: list[list[float]], steps: int) -> dict[str, Any]:
    """Communication time (µs) by rank and step over every rank, in rank order: one row per rank up to
    ``HEATMAP_MAX_ROWS`` ranks, else consecutive ranks binned into that many rows (the mean and the max of each
    bin; ``first``/``last``: the bin's first and last position in rank order, ``rank_first``/``rank_last`` their
    ranks, ``worker`` the worker of a one-rank row, else null)."""
    n = len(rows)
    matrix = np.full((n, steps), np.nan)
    for i, values in enumerate(by_step):
        width = min(steps, len(values))
        matrix[i, :width] = np.asarray(values[:width], dtype=np.float64)
    bins = min(n, HEATMAP_MAX_ROWS)
    edges = np.linspace(0, n, bins + 1).round().astype(np.int64) if n else np.zeros(1, dtype=np.int64)
    first, last = edges[:-1], edges[1:] - 1
    mean, peak = [], []
    for a, b in zip(first.tolist(), last.tolist()):
        block = matrix[a:b + 1]
        known = ~np.isnan(block).all(axis=0)
        mean.append([float(v) if k else None for v, k in zip(np.nanmean(np.where(known, block, 0), axis=0), known)])
        peak.append([float(v) if k else None for v, k in zip(np.nanmax(np.where(known, block, 0), axis=0), known)])
    return {
        "metric": "communication_us", "binned": bins < n,
        "first": first.tolist(), "last": last.tolist(),
        "rank_first": [rows[i]["rank"] for i in first.tolist()], "rank_last": [rows[i]["rank"] for i in last.tolist()],
        "worker": [rows[a]["worker"] if a == b else None for a, b in zip(first.tolist(), last.tolist())],
        "mean": mean, "max": peak,
    }
