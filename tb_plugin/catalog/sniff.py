"""Sniffing: is a ``*.json[.gz]`` file not named ``*.pt.trace.json`` a Chrome/Kineto trace?

``prof.export_chrome_trace("trace.json")``, HTA's ``rank-0.json.gz`` and other tools write traces under any name.
The name cannot tell them from configs and metrics beside them, so the first bytes are read instead: a trace is a
JSON object with a ``traceEvents`` key near its top (Kineto writes it after a few KB of metadata) or a JSON array
whose first entry is an event object. Anything else is rejected with a reason a person can act on.

The same first bytes also recognise ``prof.export_memory_timeline`` output (:func:`export_kind`): an array of two
arrays, times then size rows (``*.json``), or an array of ``[t_ns, action, bytes, category]`` rows
(``*.raw.json``). Such a file is listed beside the traces for the Memory view, never loaded as a trace.

PyTorch allocator snapshots (``torch.cuda.memory._dump_snapshot``: a pickle, ``*.pickle``/``*.pkl``, gzipped or
not) are recognised by their first bytes too (:func:`is_snapshot_head`): a pickle protocol header, then a dict whose
first key is ``segments`` (or ``device_traces``), which torch always writes first. Nothing is unpickled here.
"""

from __future__ import annotations

import re
import zlib
from typing import Any

from .names import file_name
from .storage import open_url

HEAD_BYTES = 64 << 10  # read from the file: a gzip head of this size inflates to ~10x as much
INFLATED_BYTES = 1 << 20  # looked at, at most, after gunzip
_ANY_JSON = re.compile(r".+\.json(?:\.gz)?", re.DOTALL)
_BOM = b"\xef\xbb\xbf"
_TRACE_KEY = re.compile(rb'"traceEvents"\s*:')
_FIRST_EVENT = re.compile(rb'\[\s*\{[^{}]*?"(?:ph|ts|name)"\s*:', re.DOTALL)
# torch's memory timeline exports (see loader/memory_export.py); the kind names are the model's
MEMORY_TIMELINE, MEMORY_RAW = "timeline", "raw"
_INT = rb"-?\d+\s*"
# a row of 4 integers followed by another row or the end: the raw export
_RAW_EXPORT = re.compile(rb"\[\s*\[\s*" + rb",\s*".join([_INT] * 4) + rb"\]\s*(?:,\s*\[\s*-?\d|\]|$)")
# a list of integers (the times) closed and followed by a list of rows, or cut off by the head's end: the timeline
_TIMELINE_EXPORT = re.compile(rb"\[\s*\[\s*(?:" + _INT + rb",\s*)*(?:" + _INT + rb")?(?:\]\s*,\s*\[\s*[\[\]]|$)")
_EXPORT_HEAD = 1 << 16  # export heads are numbers only: a few KiB tell
_SNAPSHOT_NAME = re.compile(r".+\.(?:pickle|pkl)(?:\.gz)?", re.DOTALL)
_SNAPSHOT_KEY = re.compile(rb"segments|device_traces")
_SNAPSHOT_KEY_WITHIN = 64  # torch's first key comes after the protocol, frame, dict and mark opcodes


def is_snapshot_name(filename: str) -> bool:
    """Whether a file name is one an allocator snapshot may have (``*.pickle``, ``*.pkl``, either ``.gz``)."""
    return _SNAPSHOT_NAME.fullmatch(filename) is not None


def is_snapshot_head(head: bytes) -> bool:
    """Whether ``head`` (a file's first bytes, gzipped or not) starts a pickled allocator snapshot."""
    text, _ = _inflate(head)
    if text is None or len(text) < 2 or text[0] != 0x80 or not 2 <= text[1] <= 5:
        return False
    return _SNAPSHOT_KEY.search(text[:_SNAPSHOT_KEY_WITHIN]) is not None


def snapshot_file(url: str, access: Any = None) -> bool:
    """Whether the file at ``url`` is an allocator snapshot by its first bytes (unreadable: no)."""
    try:
        stream, _ = open_url(url, access)
        with stream:
            head = stream.read(1 << 12)
    except Exception:  # noqa: BLE001 - a store's own errors too: not listed, as any unreadable other file
        return False
    return is_snapshot_head(head)


def is_json_name(filename: str) -> bool:
    """Whether a file name is one sniffing looks at (``*.json`` or ``*.json.gz``)."""
    return _ANY_JSON.fullmatch(filename) is not None


def _inflate(head: bytes) -> tuple[bytes | None, str | None]:
    """The head's text: gunzipped when it is gzip data (a partial stream is fine), or why it cannot be read."""
    if head[:2] != b"\x1f\x8b":
        return head, None
    try:
        text = zlib.decompressobj(wbits=31).decompress(head, INFLATED_BYTES)
    except zlib.error as err:
        return None, f"corrupt gzip data ({err})"
    return (text, None) if text else (None, "gzip data that inflates to nothing (cut short?)")


def export_kind(head: bytes) -> str | None:
    """``"timeline"`` or ``"raw"`` when ``head`` (a file's first bytes) starts a torch memory timeline export."""
    text, _ = _inflate(head)
    if text is None:
        return None
    text = text[:_EXPORT_HEAD].removeprefix(_BOM).lstrip()
    if _RAW_EXPORT.match(text):
        return MEMORY_RAW
    return MEMORY_TIMELINE if _TIMELINE_EXPORT.match(text) else None


def sniff(head: bytes, complete: bool = False) -> str | None:
    """``None`` when ``head`` (a file's first bytes; ``complete`` when that is the whole file) starts a trace,
    else why it is not one."""
    text, problem = _inflate(head)
    if text is None:
        return problem
    text = text.removeprefix(_BOM).lstrip()
    if not text:
        return "the file is empty"
    first = text[:1]
    if first == b"[":
        if _FIRST_EVENT.match(text):
            return None
        return "a JSON array whose first entry is not a trace event (an object with 'ph', 'ts', 'name')"
    if first != b"{":
        return f"not JSON (it starts with {text[:16]!r})"
    if _TRACE_KEY.search(text):
        return None
    if b'"nodes"' in text and b'"schema"' in text:
        return "a PyTorch execution trace ('nodes', no 'traceEvents'); open the Kineto trace recorded beside it"
    where = "" if complete else f" in its first {len(text) >> 10:,} KiB"
    return f"a JSON object without 'traceEvents'{where}, so not a Chrome/Kineto trace"


def classify_file(url: str, access: Any = None) -> tuple[str | None, str | None]:
    """(export kind, why it is not a trace) of a local path or fsspec URL: ``(None, None)`` for a trace,
    ``("timeline" | "raw", reason)`` for a memory timeline export, ``(None, reason)`` for anything else."""
    try:
        stream, size = open_url(url, access)
        with stream:
            head = stream.read(HEAD_BYTES)
    except OSError as err:
        return None, f"cannot read {file_name(url)} ({err.strerror or err})"
    except Exception as err:  # noqa: BLE001 - a store's own errors: a reason, never a failed listing
        return None, f"cannot read {file_name(url)} ({type(err).__name__}: {err})"
    reason = sniff(head, complete=size is not None and size <= len(head))
    kind = export_kind(head) if reason is not None else None
    if kind is not None:
        reason = "a torch memory timeline export (export_memory_timeline), shown in the Memory view of its trace"
    return kind, reason
