"""Process and thread ids: any id a trace can hold, numeric or textual, as one int64 that never collides.

Kineto writes numbers (also negative ones: ``tid: -549452224`` on some runtimes, 64-bit thread handles, floats
such as ``7.0``) and text (``"Spans"``, ``"Traces"``, ``"stream 7"``). Both go into one int64 column so tables
can group and join on them with numpy:

- a number that fits in ``[-2**62, 2**62)`` (after dropping an integral float's ``.0``) is itself;
- anything else (text, numbers beyond that range, non-integral floats) is interned as its text and stored as
  ``TEXT_BASE + code``, far below every number kept as itself, so a thread id never equals a textual one;
- a missing id is ``-1`` (the tables' convention for a missing integer).
"""

from __future__ import annotations

from typing import Any

import numpy as np

TEXT_BASE = -(1 << 63)
NUMERIC_LIMIT = 1 << 62
MISSING = -1


def is_text(values: np.ndarray) -> np.ndarray:
    """Mask of the ids in an id column that stand for text."""
    return values < -NUMERIC_LIMIT


def encode_text(code: int) -> int:
    return TEXT_BASE + code


def text_code(value: int) -> int:
    """The string code behind a textual id."""
    return value - TEXT_BASE


def numeric(value: Any) -> int | None:
    """The id as itself when it is an integral number in range, else None (it is then stored as text)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float):
        if not value.is_integer():
            return None
        value = int(value)
    if isinstance(value, int):
        return value if -NUMERIC_LIMIT <= value < NUMERIC_LIMIT else None
    return None


def display(strings: list[str], value: int) -> str:
    """How an id reads on screen: its number, or its text ("(unknown)" when missing, never "-1")."""
    if value == MISSING:
        return "(unknown)"
    return strings[text_code(value)] if value < -NUMERIC_LIMIT else str(value)


def for_json(strings: list[str], value: int) -> int | str:
    """An id for an API answer: a number stays a JSON number (within 2**53 it is exact in a browser); text and
    numbers a browser cannot hold exactly become strings."""
    if value < -NUMERIC_LIMIT:
        return strings[text_code(value)]
    return value if abs(value) < (1 << 53) else str(value)
