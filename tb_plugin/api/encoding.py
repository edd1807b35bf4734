"""Answers as bytes: JSON by msgspec, gzipped where that pays. Apart from ``http`` (which needs werkzeug) because the
loader processes encode the first views' answers too (``api/warm.py``), and must import no more than they use."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec

try:  # ISA-L's deflate is 4-5x faster than zlib's level 1 at a like size: the Trace view's wide windows are
    # 0.5-1 MB of JSON, each gzipped once (isal is installed where the platform has it; zlib elsewhere)
    from isal.igzip import compress as _compress
except ImportError:  # pragma: no cover - exercised where isal is not installed
    from gzip import compress as _compress  # type: ignore[assignment]

_ENCODER = msgspec.json.Encoder()
GZIP_MIN_BYTES = 1024


def gzip_body(body: bytes) -> bytes:
    """``body`` as a gzip stream, the fastest way at hand: level 1 of ISA-L, else of zlib."""
    return _compress(body, compresslevel=1)


def encode_json(payload: Any) -> bytes:
    return _ENCODER.encode(payload)


@dataclass(frozen=True)
class Encoded:
    """A JSON answer, encoded, and gzipped where that pays (what :mod:`.answers` keeps per trace)."""

    body: bytes
    gzipped: bytes | None

    @property
    def nbytes(self) -> int:
        return len(self.body) + len(self.gzipped or b"")


def encode(payload: Any) -> Encoded:
    body = _ENCODER.encode(payload)
    return Encoded(body, gzip_body(body) if len(body) >= GZIP_MIN_BYTES else None)
