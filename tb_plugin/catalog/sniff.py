"""Sniffing: is a ``*.json[.gz]`` file not named ``*.pt.trace.json`` a Chrome/Kineto trace?

``prof.export_chrome_trace("trace.json")``, HTA's ``rank-0.json.gz`` and other tools write traces under any name.
The name cannot tell them from configs and metrics beside them, so the first bytes are read instead: a trace is a
JSON object with a ``traceEvents`` key near its top (Kineto writes it after a few KB of metadata) or a JSON array
whose first entry is an event object. Anything else is rejected with a reason a person can act on.
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


def sniff_file(url: str, access: Any = None) -> str | None:
    """Sniff a local path or fsspec URL (see :func:`sniff`); a file that cannot be read is rejected with why."""
    try:
        stream, size = open_url(url, access)
        with stream:
            head = stream.read(HEAD_BYTES)
    except OSError as err:
        return f"cannot read {file_name(url)} ({err.strerror or err})"
    except Exception as err:  # noqa: BLE001 - a store's own errors: a reason, never a failed listing
        return f"cannot read {file_name(url)} ({type(err).__name__}: {err})"
    return sniff(head, complete=size is not None and size <= len(head))
