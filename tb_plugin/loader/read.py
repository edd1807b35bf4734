"""Bytes in: read a trace file (local or fsspec URL), gunzip it and decode it with the typed schema.

Why here and not in the model: this is the only module that knows about gzip, broken JSON and the non-JSON tokens
some Kineto versions write (bare ``Infinity``, ``NaN``, ``inf``, ``nan``, ``N/A``). Everything after it sees
well-typed :class:`~tb_plugin.loader.schema.Event` structs.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Callable
from typing import Any, BinaryIO

import msgspec

from .errors import TraceLoadError
from .schema import Args, Event, TraceDocument

try:  # ISA-L's gzip is 2-3x faster than zlib's; optional.
    from isal import igzip as _gzip
except ImportError:  # pragma: no cover - exercised where isal is not installed
    import gzip as _gzip  # type: ignore[no-redef]

Progress = Callable[[float], None]
_CHUNK = 8 << 20
_GZIP_MAGIC = b"\x1f\x8b"

_DOC_DECODER = msgspec.json.Decoder(TraceDocument)
_ARRAY_DECODER = msgspec.json.Decoder(list[Event])
_LOOSE_DECODER = msgspec.json.Decoder()

# A JSON string literal, or one of the bare tokens that are not JSON. Strings are matched first so that tokens
# inside them stay untouched.
_BARE_TOKENS = re.compile(rb'"(?:[^"\\]|\\.)*"|(?<![\w.])(-?Infinity|NaN|-?inf|nan|N/A)(?![\w.])')
_CONTROL_TABLE = bytes(b if b >= 32 else 32 for b in range(256))


def read_bytes(stream: BinaryIO, total: int | None, progress: Progress | None = None) -> bytes:
    """Read a whole stream in chunks, reporting the fraction read so far (reading dominates on remote stores)."""
    chunks: list[bytes] = []
    done = 0
    while True:
        chunk = stream.read(_CHUNK)
        if not chunk:
            break
        chunks.append(chunk)
        done += len(chunk)
        if progress and total:
            progress(min(done / total, 1.0))
    return b"".join(chunks)


def decompress(raw: bytes, name: str) -> bytes:
    """Gunzip ``raw`` if it is gzip data; plain JSON inside a ``.gz`` name is accepted as it is."""
    if not raw.strip():
        raise TraceLoadError(f"{name}: the file is empty")
    if raw[:2] != _GZIP_MAGIC:
        if name.endswith(".gz") and raw.lstrip()[:1] not in (b"{", b"["):
            raise TraceLoadError(f"{name}: not gzip data (the name ends in .gz) and not JSON either")
        return raw
    try:
        out: bytes = _gzip.decompress(raw)  # type: ignore[no-untyped-call]
        return out
    except EOFError:
        raise TraceLoadError(f"{name}: the gzip data is cut short (was the file still being written?)") from None
    except (OSError, zlib.error, ValueError) as err:
        raise TraceLoadError(f"{name}: the gzip data is corrupt ({err})") from None


def _decode_typed(data: bytes) -> TraceDocument:
    if data.lstrip()[:1] == b"[":
        return TraceDocument(traceEvents=_ARRAY_DECODER.decode(data))
    return _DOC_DECODER.decode(data)


def _quote_bare_tokens(data: bytes) -> bytes:
    def repl(m: re.Match[bytes]) -> bytes:
        token = m.group(1)
        return m.group(0) if token is None else b'"' + token + b'"'

    return _BARE_TOKENS.sub(repl, data)


_RAW_FIELDS = {f.encode_name: f.name for f in msgspec.structs.fields(Args) if f.type is msgspec.Raw}


def _loose_args(args: dict[str, Any]) -> Args:
    """``Args`` from an already-decoded dict: Raw fields are re-encoded (msgspec cannot convert into Raw)."""
    raws = {attr: msgspec.Raw(msgspec.json.encode(args.pop(key))) for key, attr in _RAW_FIELDS.items() if key in args}
    try:
        result = msgspec.convert(args, Args, strict=False)
    except msgspec.ValidationError:
        result = Args()
    for attr, value in raws.items():
        setattr(result, attr, value)
    return result


def _decode_loose(data: bytes, name: str) -> TraceDocument:
    """Last resort for files whose structure has wrong types (e.g. ``args`` that is not an object)."""
    doc: Any = _LOOSE_DECODER.decode(data)
    events: Any = doc if isinstance(doc, list) else doc.get("traceEvents") if isinstance(doc, dict) else None
    if events is None:
        return msgspec.convert(doc, TraceDocument, strict=False) if isinstance(doc, dict) else TraceDocument()
    if not isinstance(events, list):
        raise TraceLoadError(f"{name}: 'traceEvents' is not a list")
    cleaned = []
    for ev in events:
        if not isinstance(ev, dict):
            continue
        args = ev.pop("args", None)
        event = msgspec.convert(ev, Event, strict=False)
        if isinstance(args, dict):
            event.args = _loose_args(args)
        cleaned.append(event)
    top = {k: v for k, v in doc.items() if k != "traceEvents"} if isinstance(doc, dict) else {}
    result = msgspec.convert(top, TraceDocument, strict=False)
    result.traceEvents = cleaned
    return result


def _describe_json_error(err: msgspec.DecodeError, name: str, size: int) -> TraceLoadError:
    text = str(err)
    m = re.search(r"byte (\d+)", text)
    if "truncated" in text:
        return TraceLoadError(f"{name}: the JSON is cut short at byte {size:,} (was the file still being written?)")
    where = f" near byte {int(m.group(1)):,}" if m else ""
    return TraceLoadError(f"{name}: not valid JSON{where} ({text})")


def decode(data: bytes, name: str) -> TraceDocument:
    """Decode trace JSON, repairing the non-JSON tokens and control characters real traces contain.

    The fast typed path handles well-formed files; the repairs cost a regex pass and run only after it failed.
    """
    try:
        doc = _decode_typed(data)
    except msgspec.ValidationError:
        doc = None
    except msgspec.DecodeError as err:
        repaired = _quote_bare_tokens(data.translate(_CONTROL_TABLE))
        try:
            doc = _decode_typed(repaired)
        except msgspec.ValidationError:
            data = repaired
            doc = None
        except msgspec.DecodeError:
            raise _describe_json_error(err, name, len(data)) from None
        else:
            data = repaired
    if doc is None:
        try:
            doc = _decode_loose(data, name)
        except msgspec.DecodeError as err:
            raise _describe_json_error(err, name, len(data)) from None
        except msgspec.ValidationError as err:
            raise TraceLoadError(f"{name}: unexpected structure ({err})") from None
    if doc.traceEvents is None:
        raise TraceLoadError(f"{name}: a JSON object without 'traceEvents': not a Kineto trace")
    return doc
