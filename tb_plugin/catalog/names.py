"""Trace file names: ``{worker}.{stamp}.pt.trace.json[.gz]`` as ``tensorboard_trace_handler`` writes them."""

from __future__ import annotations

import os
import posixpath
import re
from dataclasses import dataclass

# The worker is the shortest prefix; the optional stamp is all digits (milliseconds in 2021, 19 digits in 2026).
# Matched whole (``fullmatch``, ``.`` matching newlines too): a name is a trace's or not, whatever odd characters
# it holds, so none is silently left out of the listing.
_TRACE_NAME = re.compile(r"(?P<worker>.+?)(?:\.(?P<stamp>\d+))?\.pt\.trace\.json(?:\.gz)?", re.DOTALL)
DEFAULT_SPAN = "default"

# A run folder's ``.capture/`` holds the files of capture requests (``tb_plugin.capture``): never traces, never
# listed as a run. A job listening for requests announces each rank there as ``listener-<worker>.json``.
CAPTURE_DIR = ".capture"
LISTENER_PREFIX = "listener-"


@dataclass(frozen=True)
class TraceName:
    worker: str
    stamp: int | None


def parse_trace_name(filename: str) -> TraceName | None:
    """Worker and stamp of a trace file name, or None when the name is not a trace file's."""
    m = _TRACE_NAME.fullmatch(filename)
    if not m:
        return None
    stamp = m.group("stamp")
    return TraceName(worker=m.group("worker"), stamp=int(stamp) if stamp is not None else None)


_ANY_JSON_NAME = re.compile(r"(?P<worker>.+?)\.json(?:\.gz)?", re.DOTALL)


def parse_any_json_name(filename: str) -> TraceName | None:
    """Worker of a ``*.json[.gz]`` file sniffed as a trace (``rank-0.json.gz`` → ``rank-0``, one span each);
    ``*.pt.trace.json`` names keep their own rule (:func:`parse_trace_name`)."""
    parsed = parse_trace_name(filename)
    if parsed is not None:
        return parsed
    m = _ANY_JSON_NAME.fullmatch(filename)
    return TraceName(worker=m.group("worker"), stamp=None) if m else None


def number_spans(stamps: list[int | None]) -> list[str]:
    """Span labels for one worker's files, in the given order: 1..N by numeric stamp, ``default`` without one.

    Numeric order matters: stamps of different lengths (``9`` and ``10``) must not sort as text.
    """
    ranked = sorted({s for s in stamps if s is not None})
    position = {stamp: str(i + 1) for i, stamp in enumerate(ranked)}
    return [DEFAULT_SPAN if s is None else position[s] for s in stamps]


def span_keys(spans: list[tuple[str, int | None]]) -> list[str]:
    """Stable keys for one worker's spans, given as (label, stamp): the stamp, which does not change when a file
    with an older stamp is added (the labels 1..N do: they renumber), or the label where there is no stamp or
    the stamp reads as another span's label (``worker.2`` beside labels 1, 2: a label always means its span)."""
    labels = {label for label, _ in spans}
    return [str(stamp) if stamp is not None and (str(stamp) not in labels or str(stamp) == label) else label
            for label, stamp in spans]


def span_order(span: str) -> tuple[int, str]:
    """The sort key of a span name: numbered spans ("1", "2", … "10") by number, others after them by name.
    ASCII digits only: ``str.isdigit`` also takes "²", which ``int`` refuses."""
    return (int(span), "") if span.isascii() and span.isdigit() else (1 << 62, span)


def file_name(url: str) -> str:
    """The file name of a local path or a URL: local paths split as the OS splits them (a backslash is a character
    of a name on POSIX, a separator on Windows), URLs at ``/``."""
    return posixpath.basename(url) if "://" in url else os.path.basename(url)


def capture_parts(path: str) -> tuple[str, str] | None:
    """(run folder, file name) of a file inside a run folder's ``.capture/`` (at any depth below it), else None."""
    marker = f"/{CAPTURE_DIR}/"
    at = path.replace("\\", "/").find(marker)
    if at < 0:
        return None
    return path[:at], path[at + len(marker):]
