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
from .limits import JSON_STARTS, Limits, mebibytes
from .schema import Args, Event, TraceDocument

try:  # ISA-L's inflate is 2-3x faster than zlib's; optional.
    from isal import isal_zlib as _zlib
except ImportError:  # pragma: no cover - exercised where isal is not installed
    _zlib = zlib  # type: ignore[misc]

# What a corrupt gzip stream raises: ISA-L's error is a class of its own, not zlib's
INFLATE_ERRORS: tuple[type[BaseException], ...] = (OSError, zlib.error, ValueError,
                                                    getattr(_zlib, "error", zlib.error))
Progress = Callable[[float], None]
_CHUNK = 8 << 20
GZIP_MAGIC = b"\x1f\x8b"
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


def read_bytes(stream: BinaryIO, total: int | None, progress: Progress | None = None,
               first: Callable[[bytes], None] | None = None) -> bytes:
    """Read a whole stream in chunks, reporting the fraction read so far (reading dominates on remote stores);
    ``first`` looks at the first chunk before the rest is read (and may raise)."""
    chunks: list[bytes] = []
    done = 0
    while True:
        chunk = stream.read(_CHUNK)
        if not chunk:
            break
        if first is not None and not chunks:
            first(chunk)
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


def decompress(raw: bytes, name: str, limits: Limits | None = None, threads: int = 1) -> Any:
    """Gunzip ``raw`` if it is gzip data; plain JSON inside a ``.gz`` name is accepted as it is.

    Within ``limits`` (:mod:`.limits`): bytes that cannot start JSON fail at once (a gzip's first inflated bytes
    are looked at before the rest is inflated), and inflating stops at the ratio or memory bound. The text comes
    back as bytes, or as a read-only memory map of a scratch file when it grows beyond :data:`SPILL_BYTES` and
    ``limits.scratch_dir`` is given (see :func:`_gunzip`); ``threads``: the cores this load may use (rapidgzip's
    parallel inflate where it is installed and pays, :func:`_parallel_gunzip`).
    """
    limits = limits or Limits()
    if not first_byte(raw):
        raise TraceLoadError(f"{name}: the file is empty")
    if raw[:2] != GZIP_MAGIC:
        if name.endswith(".gz") and first_byte(raw) not in JSON_STARTS:
            raise TraceLoadError(f"{name}: not gzip data (the name ends in .gz) and not JSON either")
        require_json_start(raw, name)
        require_text_fits(len(raw), name, limits)
        return raw
    require_json_start(_inflated_head(raw), name, inflated=True)
    limit, lasting, why = _inflate_limit(len(raw), name, limits)
    try:
        out = _gunzip(raw, limit, limits.scratch_dir, threads)
    except _TooLarge:
        raise TraceLoadError(why, lasting=lasting) from None
    except EOFError:
        raise TraceLoadError(f"{name}: the gzip data is cut short (was the file still being written?)") from None
    except INFLATE_ERRORS as err:
        raise TraceLoadError(f"{name}: the gzip data is corrupt ({err})") from None
    if not first_byte(out):
        raise TraceLoadError(f"{name}: the file is empty")
    return out


# What JSON can start with (a value: object, array, string, number, true, false, null), after whitespace.
_JSON_FIRST = frozenset(b'{["-0123456789tfn')


def require_json_start(head: bytes, name: str, inflated: bool = False) -> None:
    """Fail ``name`` at once when its first bytes cannot start JSON (a gigabyte of zeros, an image): without
    this, such a file was decoded, repaired and decoded again, for minutes. Its bytes are never shown."""
    first = first_byte(head)
    if first and first[0] not in _JSON_FIRST:
        what = "its gzip data holds" if inflated else "the file is"
        raise TraceLoadError(f"{name}: not valid JSON: {what} neither an object nor an array (its first byte "
                             "opens no JSON value)")


def require_text_fits(size: int, name: str, limits: Limits) -> None:
    """Fail a plain JSON file larger than the memory left for its text (``limits.max_text_bytes``): loading it
    needs about three times its size. Not lasting: it may load where (or when) there is more memory."""
    if limits.max_text_bytes is not None and size > limits.max_text_bytes:
        raise TraceLoadError(f"{name}: too large for the memory available: its {mebibytes(size)} of JSON need "
                             f"about {mebibytes(size * 3)} to load, and {_available(limits)} is available now",
                             lasting=False)


def _available(limits: Limits) -> str:
    return mebibytes(limits.memory_bytes) if limits.memory_bytes is not None else "less"


_HEAD_BYTES = 1 << 16


def _inflated_head(raw: bytes) -> bytes:
    """The first bytes a gzip stream inflates to (at most 64 KiB of it inflated), or b"" if that fails (the
    full inflate then says what is wrong)."""
    try:
        return bytes(zlib.decompressobj(wbits=31).decompress(raw[:_HEAD_BYTES], _HEAD_BYTES))
    except zlib.error:
        return b""


class _TooLarge(Exception):
    """Inflating went past its limit."""


def ratio_limit(packed: int, limits: Limits) -> int:
    """How many bytes ``packed`` bytes of gzip may inflate to before they look like a decompression bomb."""
    return max(int(limits.max_ratio * packed), limits.always_inflate_bytes)


def _inflate_limit(packed: int, name: str, limits: Limits) -> tuple[int, bool, str]:
    """How many bytes ``packed`` bytes of gzip may inflate to, whether breaking it is lasting, and the reason."""
    by_ratio = ratio_limit(packed, limits)
    if limits.max_text_bytes is None or by_ratio <= limits.max_text_bytes:
        return by_ratio, True, (
            f"{name}: refused: its {mebibytes(packed)} of gzip data inflate to more than {mebibytes(by_ratio)}, "
            f"over {by_ratio / max(packed, 1):,.0f} times their size (traces compress 5 to 30 times; this looks like "
            "a decompression bomb)")
    return limits.max_text_bytes, False, (
        f"{name}: too large for the memory available: it inflates to more than {mebibytes(limits.max_text_bytes)} "
        f"of JSON, which need about three times that to load, and {_available(limits)} is available now")


# Text beyond this is inflated into a scratch file (``Limits.scratch_dir``) and mapped, where the parse does not stream
# it (``stream``: fewer than four processes for the file, or it failed): the kernel's page cache holds
# it, which the parts read and give back page by page (``pages``) and which the machine may reclaim, instead of the
# loader's own memory (a 10 GB trace's text alone is more than the 8 GB a load of it may take). Below it the text is
# inflated in memory, in one call: writing it to a file would cost a copy for nothing. Decided up front, by the
# ratio of the first megabyte (:func:`projected_size`), so that neither path holds the text twice.
SPILL_BYTES = 3 << 30
_SPILL_PIECE = 64 << 20
# rapidgzip inflates one gzip member on several cores; it pays only for text streamed to the scratch file, from this
# many cores (bench_gunzip.py on the lent 16-core Xeon, the 2 GB trace: into memory ISA-L 2.29 s, rapidgzip 3.57 s at
# 4 threads, 3.68 at 8, 4.16 at 16; streamed in 64 MB pieces ISA-L 3.53 s, rapidgzip 2.75 at 8, 3.40 at 16; on 2
# cores it is 3x slower than ISA-L) and for files this big.
PARALLEL_GUNZIP_THREADS = 8
PARALLEL_GUNZIP_BYTES = 64 << 20


def _gunzip(raw: bytes, limit: int, scratch_dir: str | None = None, threads: int = 1) -> Any:
    """Inflate every gzip member of ``raw``, at most ``limit`` bytes in all (:class:`_TooLarge` beyond).

    One call per member with a bound on its output: ISA-L's inflate fills one buffer that grows in place, so the
    peak is the output, not twice it, and a gzip trailer's size (which anyone can write) is never trusted. Text
    that will be larger than :data:`SPILL_BYTES` (by the ratio of its first megabytes, with a ``scratch_dir``)
    goes to a scratch file instead, piece by piece, returned mapped; never when ``limit`` is below that size (a
    bomb: its first megabyte promises gigabytes, the limit stops it in memory long before, where writing the limit's
    worth of text to a file first took seconds more).
    """
    spill = scratch_dir is not None and limit > SPILL_BYTES and projected_size(raw) > SPILL_BYTES
    if spill and threads >= PARALLEL_GUNZIP_THREADS and len(raw) >= PARALLEL_GUNZIP_BYTES:
        fast = _parallel_gunzip(raw, limit, scratch_dir if spill else None, threads)
        if fast is not None:
            return fast
    if spill:
        assert scratch_dir is not None
        return _spill(scratch_dir, inflated_pieces(raw, limit, _SPILL_PIECE))
    data: bytes | memoryview = memoryview(raw)
    parts: list[bytes] = []
    total = 0
    while True:
        inflater = _zlib.decompressobj(wbits=31)
        piece = inflater.decompress(data, limit - total + 1)
        total += len(piece)
        if total > limit:
            raise _TooLarge
        parts.append(piece)
        if not inflater.eof:
            raise EOFError("truncated")
        data = inflater.unused_data
        if not data:
            break
    return parts[0] if len(parts) == 1 else b"".join(parts)


_PROBE_BYTES = 1 << 20


def projected_size(raw: bytes) -> int:
    """About how many bytes ``raw`` inflates to: its size times the ratio of its first megabyte (a trace's events
    are much alike, so the ratio holds; a wrong guess costs memory or a copy, never a wrong answer)."""
    if len(raw) <= _PROBE_BYTES:
        return 0
    inflater = _zlib.decompressobj(wbits=31)
    try:
        out = inflater.decompress(memoryview(raw)[:_PROBE_BYTES], 64 * _PROBE_BYTES)
    except INFLATE_ERRORS:
        return 0
    used = _PROBE_BYTES - len(inflater.unconsumed_tail)
    return len(out) * len(raw) // max(used, 1)


# Compressed bytes handed to the inflater at a time: its unconsumed tail is copied at every call, so a whole file's
# input handed at once was copied again for each piece.
_FEED = 1 << 20


def inflated_pieces(raw: bytes, limit: int, piece: int) -> Iterator[bytes]:
    """Every gzip member of ``raw`` inflated, ``piece`` bytes at most at a time; :class:`_TooLarge` past ``limit``
    bytes in all, EOFError if cut short, the inflater's error if corrupt."""
    view, at, total = memoryview(raw), 0, 0
    inflater = _zlib.decompressobj(wbits=31)
    pending: bytes | memoryview = b""
    while True:
        if not pending:
            if at >= len(view):
                if not inflater.eof:
                    raise EOFError("truncated")
                return
            pending, at = view[at:at + _FEED], at + _FEED
        if inflater.eof:  # another member starts here
            inflater = _zlib.decompressobj(wbits=31)
        out = inflater.decompress(pending, piece)
        pending = inflater.unused_data if inflater.eof else inflater.unconsumed_tail
        total += len(out)
        if total > limit:
            raise _TooLarge
        if out:
            yield out


def _spill(scratch_dir: str, pieces: Iterator[bytes]) -> Any:
    """Write ``pieces`` into an unlinked scratch file in ``scratch_dir`` and map it read-only (the mapping keeps
    the file until every process that inherited it unmaps it; no name is left behind)."""
    import mmap
    import tempfile

    with tempfile.TemporaryFile(dir=scratch_dir, prefix=".text-") as fh:
        for piece in pieces:
            fh.write(piece)
        fh.flush()
        size = fh.tell()
        if size == 0:
            return b""
        return mmap.mmap(fh.fileno(), size, access=mmap.ACCESS_READ)


def _parallel_gunzip(raw: bytes, limit: int, scratch_dir: str | None, threads: int) -> Any:
    """rapidgzip's parallel inflate (an optional dependency: ``pip install "pytorch-tb-profiler[fast-gzip]"``), within
    the same limit, into memory or (given ``scratch_dir``) a scratch file; None where it is not installed or fails
    (ISA-L then inflates, and says what is wrong with the data, as everywhere else)."""
    try:
        import io

        import rapidgzip
    except ImportError:
        return None

    def pieces(f: Any) -> Iterator[bytes]:
        budget = limit
        while piece := f.read(_SPILL_PIECE):
            budget -= len(piece)
            if budget < 0:
                raise _TooLarge
            yield piece

    try:
        with rapidgzip.RapidgzipFile(io.BytesIO(raw), parallelization=threads) as f:
            if scratch_dir is not None:
                return _spill(scratch_dir, pieces(f))
            out = f.read(limit + 1)
            if len(out) > limit:
                raise _TooLarge
            return out
    except _TooLarge:
        raise
    except Exception:  # noqa: BLE001 - corrupt or cut data: ISA-L inflates it again and names the problem
        return None


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


def outline_by_text(data: Any, size: int | None = None) -> tuple[TraceDocument, int, int] | None:
    """The top-level document without decoding ``traceEvents``, and the byte range of the array's elements.

    The usual outline decodes every event once just to find where it ends (seconds on a 2 GB trace, in one
    process); split at separators instead, each parallel part decodes only its own bytes. The document's other
    keys come from a skeleton (the bytes before the array, ``[]``, the bytes after it), which must decode with an
    empty ``traceEvents``. None when the layout is not that of a Kineto trace (then the usual path runs).
    ``size``: the text's length, where ``data`` is a map larger than it (``stream``).
    """
    size = len(data) if size is None else size
    head = _ARRAY_START.search(data, 0, min(size, 1 << 24))
    if head is None:
        return None
    lo = head.end()
    tail_from = max(lo, size - _TAIL_SEARCH)
    end = size
    for _ in range(8):  # the array's closing bracket: the last ']' before a tail that makes a valid skeleton
        end = data.rfind(b"]", tail_from, end)
        if end < 0:
            return None
        try:
            doc = _DOC_DECODER.decode(bytes(data[:head.start()]) + b'"traceEvents": []' + bytes(data[end + 1:size]))
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


def text_chunks(data: Any, lo: int, hi: int,
                size: int = TEXT_CHUNK_BYTES) -> Iterator[tuple[int, int, list[Event]]]:
    """Typed events of the elements in ``[lo, hi)``, about ``size`` bytes at a time, with their text's range.

    Each chunk's end is found as it is reached, not all ends first: a text mapped from a scratch file (``_spill``)
    is then read front to back, and the pages behind are given back as they go, where a search for every end at
    once mapped the whole range (the kernel maps a file 2 MB at a time)."""
    start = lo
    while start < hi:
        found = _SEPARATOR.search(data, start + size, hi) if hi - start > size + size // 2 else None
        stop, after = (found.start(), found.end() - 1) if found is not None else (hi, hi)
        yield start, stop, decode_text(memoryview(data)[start:stop])
        start = after


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


def raw_text(elements: bytes | memoryview) -> list[msgspec.Raw]:
    """Each array element's own text, repaired as :func:`decode_text` repairs it (what ``ModelBuilder.add_counters``
    reads: the counters' arbitrary ``args``, which the typed decode drops)."""
    buffer = b"".join((b"[", elements, b"]"))
    try:
        return msgspec.json.decode(buffer, type=list[msgspec.Raw])
    except msgspec.DecodeError:
        return msgspec.json.decode(_quote_bare_tokens(buffer.translate(_CONTROL_TABLE)), type=list[msgspec.Raw])


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
