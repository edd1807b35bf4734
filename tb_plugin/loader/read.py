"""Bytes in: read a trace file, gunzip it and decode it with the typed schema, a chunk of events at a time.

Why here and not in the model: this is the only module that knows about gzip, broken JSON, invalid UTF-8 and the
non-JSON tokens some Kineto versions write (bare ``Infinity``, ``NaN``, ``inf``, ``nan``, ``N/A``). Everything after
it sees well-typed :class:`~tb_plugin.loader.schema.Event` structs.
"""

from __future__ import annotations

import math
import re
import zlib
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO

import msgspec
import numpy as np

from .errors import TraceLoadError
from .schema import Args, Event, TraceDocument

try:  # ISA-L's inflate is 2-3x faster than zlib's; optional.
    from isal import isal_zlib as _zlib
except ImportError:  # pragma: no cover - exercised where isal is not installed
    _zlib = zlib  # type: ignore[misc]

Progress = Callable[[float], None]
_CHUNK = 8 << 20
_GZIP_MAGIC = b"\x1f\x8b"
EVENTS_PER_CHUNK = 16384  # ~10 MB of event objects alive at a time

_DOC_DECODER = msgspec.json.Decoder(TraceDocument)
_ARRAY_DECODER = msgspec.json.Decoder(list[msgspec.Raw])
_EVENTS_DECODER = msgspec.json.Decoder(list[Event])
_LOOSE_DECODER = msgspec.json.Decoder()

# A JSON string literal, or one of the bare tokens that are not JSON. Strings are matched first so that tokens
# inside them stay untouched.
_BARE_TOKENS = re.compile(rb'"(?:[^"\\]|\\.)*"|(?<![\w.])(-?Infinity|NaN|-?inf|nan|N/A)(?![\w.])')
# Control characters are invalid inside JSON strings and mere whitespace outside them: a space is safe for both.
_CONTROL_TABLE = bytes(b if b >= 32 else 32 for b in range(256))
_RAW_FIELDS = {f.encode_name: f.name for f in msgspec.structs.fields(Args) if f.type is msgspec.Raw}


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


_LEADING_SPACE = re.compile(rb"\s*")


def first_byte(data: bytes) -> bytes:
    """The first non-whitespace byte (without copying the buffer as ``lstrip`` would)."""
    start = _LEADING_SPACE.match(data)
    offset = start.end() if start else 0
    return data[offset:offset + 1]


def decompress(raw: bytes, name: str) -> bytes:
    """Gunzip ``raw`` if it is gzip data; plain JSON inside a ``.gz`` name is accepted as it is."""
    if not first_byte(raw):
        raise TraceLoadError(f"{name}: the file is empty")
    if raw[:2] != _GZIP_MAGIC:
        if name.endswith(".gz") and first_byte(raw) not in (b"{", b"["):
            raise TraceLoadError(f"{name}: not gzip data (the name ends in .gz) and not JSON either")
        return raw
    try:
        out = _gunzip(raw)
    except EOFError:
        raise TraceLoadError(f"{name}: the gzip data is cut short (was the file still being written?)") from None
    except (OSError, zlib.error, ValueError) as err:
        raise TraceLoadError(f"{name}: the gzip data is corrupt ({err})") from None
    if not first_byte(out):
        raise TraceLoadError(f"{name}: the file is empty")
    return out


_INFLATE_STEP = 1 << 20


def _gunzip(raw: bytes) -> bytes:
    """Inflate into a buffer sized from the gzip trailer, so the peak is the output plus a step, not twice it.

    The trailer holds the size modulo 2**32; multi-member files or outputs over 4 GiB take the plain path.
    """
    expected = int.from_bytes(raw[-4:], "little")
    view = memoryview(raw)
    if expected < len(raw) // 2 or expected > 400 * len(raw):
        return _gunzip_plain(view)
    whole = _gunzip_whole(raw, expected)
    if whole is not None:
        return whole
    out = bytearray(expected)
    inflater = _zlib.decompressobj(wbits=31)
    pos = 0
    for start in range(0, len(raw), _INFLATE_STEP):
        piece = inflater.decompress(view[start:start + _INFLATE_STEP])
        if pos + len(piece) > expected:
            return _gunzip_plain(view)
        out[pos:pos + len(piece)] = piece
        pos += len(piece)
        if inflater.eof:
            break
    if not inflater.eof:
        raise EOFError("truncated")
    if pos != expected or inflater.unused_data:
        return _gunzip_plain(view)
    return out  # type: ignore[return-value]  # a bytearray: every consumer takes any bytes-like buffer


def _gunzip_whole(raw: bytes, expected: int) -> bytes | None:
    """One ISA-L call into a buffer of the trailer's size: half the time of inflating step by step (no copy of
    each piece, no page faults for pieces). ISA-L stops after the first gzip member, so the result counts only
    when it also matches the trailer's CRC (a single-member file); None sends the caller down the checked path,
    which also words the errors (a cut-short or corrupt file)."""
    if _zlib is zlib:
        return None
    try:
        out = _zlib.decompress(raw, wbits=31, bufsize=expected)
    except Exception:  # noqa: BLE001 - ISA-L's own error types; the stepwise path reports what is wrong
        return None
    if len(out) != expected or _zlib.crc32(out) != int.from_bytes(raw[-8:-4], "little"):
        return None
    return out


def _gunzip_plain(view: memoryview) -> bytes:
    inflater = _zlib.decompressobj(wbits=31)
    parts = []
    data = bytes(view)
    while data:
        parts.append(inflater.decompress(data))
        if not inflater.eof:
            raise EOFError("truncated")
        data = inflater.unused_data
        if data:
            inflater = _zlib.decompressobj(wbits=31)
    return b"".join(parts)


def _quote_bare_tokens(data: bytes) -> bytes:
    def repl(m: re.Match[bytes]) -> bytes:
        token = m.group(1)
        return m.group(0) if token is None else b'"' + token + b'"'

    return _BARE_TOKENS.sub(repl, data)


def _describe_json_error(err: msgspec.DecodeError, name: str, size: int) -> TraceLoadError:
    text = str(err)
    if "truncated" in text:
        return TraceLoadError(f"{name}: the JSON is cut short at byte {size:,} (was the file still being written?)")
    m = re.search(r"byte (\d+)", text)
    where = f" near byte {int(m.group(1)):,}" if m else ""
    return TraceLoadError(f"{name}: not valid JSON{where} ({text})")


def _outline_once(data: bytes, name: str) -> TraceDocument:
    if first_byte(data) == b"[":
        return TraceDocument(traceEvents=_ARRAY_DECODER.decode(data))
    try:
        return _DOC_DECODER.decode(data)
    except msgspec.ValidationError as err:
        if "traceEvents" in str(err):
            raise TraceLoadError(f"{name}: not a Kineto trace: 'traceEvents' is not a list") from None
        if "out of range" in str(err):
            raise TraceLoadError(f"{name}: a number in the trace's top level is out of range ({err})") from None
        raise TraceLoadError(f"{name}: not a Kineto trace: the top level is neither an object nor a list") from None


def decode_outline(data: bytes, name: str) -> TraceDocument:
    """The top-level document with ``traceEvents`` as raw slices of ``data``, repairing non-JSON tokens.

    The fast path handles well-formed files; the repairs cost a regex pass and run only after it failed.
    """
    try:
        doc = _outline_tolerant(data, name)
    except msgspec.DecodeError as err:
        repaired = _quote_bare_tokens(data.translate(_CONTROL_TABLE))
        try:
            doc = _outline_tolerant(repaired, name)
        except msgspec.DecodeError:
            raise _describe_json_error(err, name, len(data)) from None
    if doc.traceEvents is None:
        raise TraceLoadError(f"{name}: not a Kineto trace: {_what_else(data)}")
    return doc


def _what_else(data: bytes) -> str:
    """What a JSON object without ``traceEvents`` is, as far as its top-level keys tell."""
    try:
        keys = set(msgspec.json.decode(data, type=dict[str, msgspec.Raw]))
    except (msgspec.DecodeError, UnicodeDecodeError):  # odd bytes or tokens: the keys are not worth a repair pass
        return "a JSON object without 'traceEvents'"
    if "nodes" in keys:
        return "a PyTorch execution trace ('nodes', no 'traceEvents'); open the Kineto trace recorded beside it"
    # never its keys: the file may be anything a link points to, and its key names are its content
    return "a JSON object without 'traceEvents'"


def _outline_tolerant(data: bytes, name: str) -> TraceDocument:
    try:
        return _outline_once(data, name)
    except UnicodeDecodeError:  # invalid UTF-8 in a top-level string (events are raw slices: not checked here)
        return _outline_once(valid_utf8(data), name)


def valid_utf8(data: bytes) -> bytes:
    """``data`` with invalid UTF-8 sequences replaced by U+FFFD: an odd byte in a string costs that character.

    JSON's structure is ASCII and invalid bytes are all >= 0x80, so the replacement never changes the structure.
    It copies the buffer twice, so it runs only after a decode failed on it.
    """
    return str(data, "utf-8", "replace").encode()


def decode_events(raws: list[msgspec.Raw]) -> list[Event]:
    """Typed events from raw slices; an event of unexpected shape costs only its odd fields."""
    buffer = b"[" + b",".join(raws) + b"]"
    try:
        return _decode_typed(buffer)
    except UnicodeDecodeError:  # msgspec checks UTF-8 while decoding strings; only this chunk is repaired
        return _decode_typed(valid_utf8(buffer))


def _decode_typed(buffer: bytes) -> list[Event]:
    try:
        return _EVENTS_DECODER.decode(buffer)
    except msgspec.ValidationError:
        return _decode_events_loose(buffer)


def iter_event_chunks(doc: TraceDocument, lo: int = 0, hi: int | None = None,
                      size: int = 0) -> Iterator[tuple[int, list[Event]]]:
    """Typed events of ``traceEvents[lo:hi]``, a chunk at a time, with the index just past each chunk."""
    raws = doc.traceEvents or []
    hi = len(raws) if hi is None else hi
    size = size or EVENTS_PER_CHUNK
    for start in range(lo, hi, size):
        stop = min(start + size, hi)
        yield stop, decode_events(raws[start:stop])


# An element separator of an array of objects: a comma, a line break, an opening brace. A raw line break is never
# inside a JSON string, so this is structure; Kineto writes one event per "},\n  {". Whether it separates top-level
# events (not objects nested in an event's args) is proven by the decode: a slice cut inside a nested value does
# not parse.
_SEPARATOR = re.compile(rb",[ \t\r]*\n\s*\{")
_ARRAY_START = re.compile(rb'"traceEvents"\s*:\s*\[\s*')
_TAIL_SEARCH = 1 << 16


class TextSplitFailed(ValueError):
    """A slice of ``traceEvents`` found by :data:`_SEPARATOR` did not parse: build the file the usual way."""


def outline_by_text(data: bytes) -> tuple[TraceDocument, int, int] | None:
    """The top-level document without decoding ``traceEvents``, and the byte range of the array's elements.

    The usual outline decodes every event once just to find where it ends (seconds on a 2 GB trace, in one
    process); split at separators instead, each parallel part decodes only its own bytes. The document's other
    keys come from a skeleton (the bytes before the array, ``[]``, the bytes after it), which must decode with an
    empty ``traceEvents``. None when the layout is not that of a Kineto trace (then the usual path runs).
    """
    head = _ARRAY_START.search(data, 0, min(len(data), 1 << 24))
    if head is None:
        return None
    lo = head.end()
    tail_from = max(lo, len(data) - _TAIL_SEARCH)
    end = len(data)
    for _ in range(8):  # the array's closing bracket: the last ']' before a tail that makes a valid skeleton
        end = data.rfind(b"]", tail_from, end)
        if end < 0:
            return None
        try:
            doc = _DOC_DECODER.decode(bytes(data[:head.start()]) + b'"traceEvents": []' + bytes(data[end + 1:]))
        except (msgspec.DecodeError, UnicodeDecodeError):
            continue
        if doc.traceEvents == []:
            hi = end
            while hi > lo and data[hi - 1:hi].isspace():
                hi -= 1
            return doc, lo, hi
    return None


def split_text(data: bytes, lo: int, hi: int, pieces: int,
               weights: list[float] | None = None) -> list[tuple[int, int]]:
    """``[lo, hi)`` cut at separators into about ``pieces`` ranges of whole elements, each ``start`` at a ``{``;
    range k gets about ``weights[k]`` shares of the bytes (equal shares by default)."""
    shares = weights or [1.0] * pieces
    edges = np.cumsum(shares) / sum(shares)
    bounds = [(lo, lo)]
    for k in range(1, pieces):
        target = max(bounds[-1][1] + 1, lo + int((hi - lo) * edges[k - 1]))
        found = _SEPARATOR.search(data, target, hi)
        if found is None:
            break
        bounds.append((found.start(), found.end() - 1))
    ranges = [(start, stop) for (_, start), (stop, _) in zip(bounds, [*bounds[1:], (hi, hi)])]
    return [(start, stop) for start, stop in ranges if stop > start]


# Bytes of event text a parallel part decodes at a time. The decoded events of a chunk take about 4x its bytes
# (structs, strings, the bracketed copy), and a part keeps that high-water mark as private pages until it exits:
# with 8 MB chunks each part held ~50 MB, which the parts of one load multiplied into most of its memory peak.
# Half-megabyte chunks hold ~12 MB per part (its tables included) and decode no slower, as the chunk's columns
# stay in cache; below that the per-chunk work starts to show.
TEXT_CHUNK_BYTES = 512 << 10


def text_chunks(data: bytes, lo: int, hi: int, size: int = TEXT_CHUNK_BYTES) -> Iterator[tuple[int, list[Event]]]:
    """Typed events of the elements in ``[lo, hi)``, about ``size`` bytes at a time, with the offset reached."""
    for start, stop in split_text(data, lo, hi, max(1, (hi - lo) // size)):
        yield stop, decode_text(memoryview(data)[start:stop])


def decode_text(elements: bytes | memoryview) -> list[Event]:
    """Typed events from the text of whole array elements (``{...}, {...}``), repaired as the usual path does."""
    buffer = b"".join((b"[", elements, b"]"))
    try:
        return decode_buffer(buffer)
    except msgspec.DecodeError:
        pass
    try:
        return decode_buffer(_quote_bare_tokens(buffer.translate(_CONTROL_TABLE)))
    except msgspec.DecodeError as err:
        raise TextSplitFailed(str(err)) from None


def decode_buffer(buffer: bytes) -> list[Event]:
    try:
        return _decode_typed(buffer)
    except UnicodeDecodeError:
        return _decode_typed(valid_utf8(buffer))


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


# A JSON string literal, or a number: strings first, so that digits inside them stay untouched.
_NUMBERS = re.compile(rb'"(?:[^"\\]|\\.)*"|(-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)')


def _quote_huge_numbers(buffer: bytes) -> bytes:
    """``buffer`` with every number beyond float range (``1e400``, an integer of thousands of digits), which
    msgspec refuses, quoted: as text it costs that field of that event (NaN, -1), like any odd value."""
    def repl(m: re.Match[bytes]) -> bytes:
        token = m.group(1)
        if token is None or (len(token) < 300 and math.isfinite(float(token))):
            return m.group(0)
        return b'"' + token + b'"'

    return _NUMBERS.sub(repl, buffer)


def _decode_events_loose(buffer: bytes) -> list[Event]:
    """Slow path for a chunk with wrong types (``args`` that is not an object, an event that is a string) or
    numbers out of range."""
    try:
        decoded = _LOOSE_DECODER.decode(buffer)
    except msgspec.ValidationError:  # "Number out of range": msgspec checks it whatever the type
        decoded = _LOOSE_DECODER.decode(_quote_huge_numbers(buffer))
    cleaned = []
    for ev in decoded:
        if not isinstance(ev, dict):
            continue
        args = ev.pop("args", None)
        event = msgspec.convert(ev, Event, strict=False)
        if isinstance(args, dict):
            event.args = _loose_args(args)
        cleaned.append(event)
    return cleaned
