"""difflib's alignment of two sequences, with its longest-match search in numpy: the same blocks, far sooner on long
repetitive sequences.

Why: the diff's drill-down aligns the two runs' sequences with :class:`difflib.SequenceMatcher` (``autojunk=False``).
Its longest-match search walks, for each element of one side, every position of that element in the other: on the
top level of a long run (forward, backward, optimizer … a dozen phases per step, four distinct keys) that is
quadratic in the steps, 0.18 s for the 2 GB trace's 3,252 phases and ~5 s for a 10 GB trace's. :class:`Matcher` is
a ``SequenceMatcher`` whose :meth:`~Matcher.find_longest_match` does the same dynamic programme a row at a time on
arrays (each row: the run lengths ending at the positions of that element in the other side), so every block, and
so every opcode, is difflib's own: the match that ends first in ``a``, then first in ``b``, among the longest (with
no junk, difflib's extensions of its best match are no-ops: the runs counted are already maximal). Tested against
difflib on random and real sequences (``tests/unit/test_align.py``).
"""

from __future__ import annotations

import difflib
from collections.abc import Hashable, Sequence

import numpy as np


class Matcher(difflib.SequenceMatcher):  # type: ignore[type-arg]
    """``difflib.SequenceMatcher(a=a, b=b, autojunk=False)`` with its longest match found on arrays."""

    def __init__(self, a: Sequence[Hashable], b: Sequence[Hashable]) -> None:
        codes: dict[Hashable, int] = {}
        self._a = np.array([codes.setdefault(x, len(codes)) for x in a], dtype=np.int64)
        self._b = np.array([codes.setdefault(x, len(codes)) for x in b], dtype=np.int64)
        order = np.argsort(self._b, kind="stable")  # b's positions grouped by element, ascending within each
        self._positions = order
        self._starts = np.searchsorted(self._b[order], np.arange(len(codes) + 1))
        super().__init__(None, a, b, autojunk=False)

    def find_longest_match(self, alo: int = 0, ahi: int | None = None, blo: int = 0,
                           bhi: int | None = None) -> difflib.Match:
        ahi = len(self._a) if ahi is None else ahi
        bhi = len(self._b) if bhi is None else bhi
        best_i, best_j, best = alo, blo, 0
        prev_j = np.zeros(0, dtype=np.int64)  # positions j of the row before with a run ending at (i - 1, j)
        prev_k = np.zeros(0, dtype=np.int64)  # their run lengths
        for i in range(alo, ahi):
            code = int(self._a[i])
            where = self._positions[self._starts[code]:self._starts[code + 1]]
            js = where[(where >= blo) & (where < bhi)]
            if not len(js):
                prev_j, prev_k = js, js
                continue
            ks = np.ones(len(js), dtype=np.int64)
            if len(prev_j):  # a run ending at (i - 1, j - 1) goes on at (i, j)
                at = np.minimum(np.searchsorted(prev_j, js - 1), len(prev_j) - 1)
                ks += np.where(prev_j[at] == js - 1, prev_k[at], 0)
            top = int(ks.max())
            if top > best:
                first = int(np.argmax(ks == top))
                best_i, best_j, best = i - top + 1, int(js[first]) - top + 1, top
            prev_j, prev_k = js, ks
        return difflib.Match(best_i, best_j, best)


# From this many pairs of elements (len(a) × len(b)) on, the arrays' matcher: below it difflib's own is quicker (144
# operators a side: 0.09 ms against 1.5 ms; the 2 GB trace's 3,252 phases a side: 0.18 s against 0.054 s).
ARRAYS_FROM = 1_000_000


def matcher(a: Sequence[Hashable], b: Sequence[Hashable]) -> difflib.SequenceMatcher:  # type: ignore[type-arg]
    """The matcher of ``a`` against ``b`` (``autojunk=False``): difflib's, or :class:`Matcher` for long sides; the
    same opcodes either way."""
    if len(a) * len(b) >= ARRAYS_FROM:
        return Matcher(a, b)
    return difflib.SequenceMatcher(a=a, b=b, autojunk=False)

