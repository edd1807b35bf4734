"""Decoding: trace file bytes to the columnar :class:`~tb_plugin.model.TraceModel`.

``load_trace`` is the whole pipeline for one file: read (with progress), gunzip, typed decode, columns.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from ..catalog.names import file_name
from ..model.tables import TraceModel
from . import stream
from .columns import PARALLEL_MIN_BYTES, ParallelBuildFailed, build_model, build_text_parts, default_parts
from .errors import TraceLoadError
from .limits import Limits
from .read import decode_outline, decompress, outline_by_text
from .source import read_failure, read_source

__all__ = ["MODEL_VERSION", "Limits", "TraceLoadError", "default_parts", "load_bytes", "load_trace", "read_failure"]

# Bumped whenever the model's tables change, so cached parses of older versions are not reused.
MODEL_VERSION = 6


def load_bytes(raw: bytes | list[bytes], name: str, progress: Callable[[float], None] | None = None,
               parts: int = 1, limits: Limits | None = None) -> TraceModel:
    """Decode already-read file bytes (gzip or plain JSON); ``parts`` processes may build a large file; a file
    beyond ``limits`` (:mod:`.limits`) fails with the reason.

    ``raw`` may be a one-item list that this function empties: then the caller holds no reference and the file's
    bytes are freed as soon as they are inflated (they would otherwise sit in every forked part's memory).
    """
    report = progress or (lambda _f: None)
    packed = raw.pop() if isinstance(raw, list) else raw
    del raw
    limits = limits or Limits()
    text_split = True
    expected, limit = stream.applies(packed, parts, limits)
    if expected:  # the parts parse while the text is inflated
        try:
            builder, doc = stream.stream_parts(packed, expected, limit, parts, report,
                                               lambda events: require_event_count(events, name, limits))
        except ParallelBuildFailed:  # the usual path, which says what is wrong with the file if anything is
            text_split = False
        else:  # its events were counted against the limit as they were merged
            del packed
            return builder.finish(doc, name)
    data = decompress(packed, name, limits, parts)
    parallel = parts > 1 and len(data) >= PARALLEL_MIN_BYTES
    # Text this function inflated itself is its own: the parts give its pages back as they build them, and the
    # compressed bytes (a tenth of it) are kept to inflate it again should they fail. Plain JSON is the caller's.
    give_back = parallel and data is not packed
    if not give_back:
        packed = b""
    report(0.45)
    found = outline_by_text(data) if parallel and text_split else None
    if found is not None:  # each part decodes its own bytes: no serial decode of the whole array first
        doc, lo, hi = found
        try:
            builder = build_text_parts(data, lo, hi, lambda f: report(0.45 + 0.55 * f), parts, give_back)
        except ParallelBuildFailed:  # a range did not parse (or a part died): the usual parts, same bytes
            data = decompress(packed, name, limits, parts) if give_back else data
        else:
            del data, packed  # every byte is built: the text goes before the tables are concatenated (a copy)
            require_event_count(builder.n_events, name, limits)
            return builder.finish(doc, name)
    del packed
    try:
        doc = decode_outline(data, name)  # raw event slices still point into data
        del data
        report(0.5)
        entries = len(doc.traceEvents or [])
        require_event_count(entries, name, limits)
        model = build_model(doc, name, lambda f: report(0.5 + 0.5 * f), parts=parts)
    except RecursionError:  # msgspec recurses per nesting level, also to skip a value: bad input, not a bug
        raise TraceLoadError(f"{name}: the JSON is nested too deeply (about {sys.getrecursionlimit()} levels of "
                             "arrays or objects or more; a Kineto trace nests a few)") from None
    require_usable(model, entries, name)
    return model


def require_event_count(events: int, name: str, limits: Limits) -> None:
    """Fail a file of more events than the memory left can hold as a model and its views (not lasting)."""
    if limits.max_events is not None and events > limits.max_events:
        raise TraceLoadError(f"{name}: too many events for the memory available: {events:,}, and at most "
                             f"{limits.max_events:,} fit in the memory available now", lasting=False)


def require_usable(model: TraceModel, entries: int, name: str) -> None:
    """Fail a file whose ``traceEvents`` has entries but nothing any view can place in time.

    Loading it would show ``ready`` with empty pages (or answer errors later): an array of arrays, of strings, or
    events whose every ``ts`` is unusable. An empty ``traceEvents`` is a valid, empty trace and stays loadable.
    """
    if entries == 0:
        return
    found = model.n_events + len(model["flows"]["ts"]) + len(model["metadata_events"]["name"])
    if found == 0:
        raise TraceLoadError(f"{name}: not a Kineto trace: none of its {entries:,} trace entries is an event object "
                             "(an array of arrays or of plain values?)")
    if not np.isfinite(model["events"]["ts"]).any():
        raise TraceLoadError(f"{name}: no usable event: none of its {entries:,} trace entries has a numeric "
                             "timestamp ('ts')")


def load_trace(url: str, progress: Callable[[float], None] | None = None, parts: int = 1,
               access: Any = None, keep_source: Callable[[bytes], None] | None = None,
               limits: Limits | None = None) -> TraceModel:
    """Load one trace file from a local path or an fsspec URL.

    ``access`` (``catalog.storage.Access``) holds the credentials a remote URL is opened with (the environment's
    when ``None``). Progress goes 0..0.3 while reading (what dominates on remote stores), then decode and table
    building. Raises :class:`TraceLoadError` with a one-line reason for anything wrong with the file.
    """
    report = progress or (lambda _f: None)
    name = file_name(url)
    limits = limits or Limits()
    raw = read_source(url, access, lambda f: report(0.3 * f), limits)
    if keep_source is not None:
        keep_source(raw)  # the file's bytes as read (e.g. to cache a remote original next to its parse)
    holder = [raw]
    del raw  # load_bytes empties the holder: the bytes go once inflated, before any part is forked
    try:
        return load_bytes(holder, name, progress=report, parts=parts, limits=limits)
    except ParallelBuildFailed:  # a part died (memory?): once more in one process, which needs less
        return load_bytes([read_source(url, access, lambda f: report(0.3 * f), limits)], name, progress=report,
                          parts=1, limits=limits)
