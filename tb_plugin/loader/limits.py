"""What one trace file may cost to load, and the text of names too long to show (``docs/guide/limits.md``).

A file that breaks a limit fails fast with a one-line reason that names it, before it costs the machine its
memory: a gzip bomb stops inflating at its limit, zeros or other non-JSON bytes stop at the first chunk, and a
file too large for the memory left is refused by its size. Whether the failure is **lasting** says if the same
file version would fail again anywhere (a bomb, broken JSON: the parse cache remembers it, so a restart does not
load it again) or only here and now (too large for the memory available at this moment, a read that failed).

The limits of a load come from ``jobs.budget.load_limits`` (the loader process's memory); the loader knows only
the fixed ones by default.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

# Inflated bytes per gzip byte beyond which a file is refused: Kineto traces compress 5 to 30 times (30x on the
# 2021 V100 traces, ~19x on 2026 H200 ones); a run of one byte compresses ~1,000 times (a bomb).
MAX_RATIO = 100
# Up to this much JSON any gzip may inflate to, whatever its ratio: a small synthetic trace of identical events
# compresses over 100 times, and 64 MiB of text cost a loader a few hundred MB at most.
ALWAYS_INFLATE_BYTES = 64 << 20
# The characters of a name or argument text the views show; a longer one is cut there, with its length and a
# checksum appended so that two long names stay two names. Real names reach 1,675 (a templated kernel).
DISPLAY_CHARS = 8192
# The characters of such a text kept for the event's details (``/trace/event``: ``full_name``, the arguments).
FULL_TEXT_CHARS = 1 << 20
# JSON is plain text: the first byte that is not whitespace opens an object or an array.
JSON_STARTS = (b"{", b"[")


@dataclass(frozen=True)
class Limits:
    """The bounds of one load. ``max_text_bytes`` (the inflated JSON) and ``max_events`` follow the memory the
    loader may use (None: no bound but the ratio, as for a test or a memory export read in the server)."""

    max_ratio: float = MAX_RATIO
    always_inflate_bytes: int = ALWAYS_INFLATE_BYTES
    max_text_bytes: int | None = None
    max_events: int | None = None
    memory_bytes: int | None = None  # what the bounds above were derived from, for the reason given
    # where text beyond ``read.SPILL_BYTES`` is inflated to (a file, mapped: the page cache holds it, not the
    # loader's memory); None: in memory, however large
    scratch_dir: str | None = None


def shorten(text: str) -> str:
    """``text`` as the views show it: itself, or its first :data:`DISPLAY_CHARS` characters, then its length and
    a checksum of the whole (``… [1,073,741,824 characters, #3f2a91c0]``)."""
    if len(text) <= DISPLAY_CHARS:
        return text
    digest = zlib.crc32(text.encode("utf-8", "surrogatepass")) & 0xFFFFFFFF
    return f"{text[:DISPLAY_CHARS]}… [{len(text):,} characters, #{digest:08x}]"


def kept_in_full(text: str) -> str:
    """The text kept for the details of an event: the first :data:`FULL_TEXT_CHARS` characters at most."""
    if len(text) <= FULL_TEXT_CHARS:
        return text
    return f"{text[:FULL_TEXT_CHARS]}… [{len(text):,} characters; the rest is not kept]"


def mebibytes(n: int) -> str:
    return f"{n / (1 << 20):,.0f} MiB" if n >= 1 << 20 else f"{n:,} bytes"
