"""A table's search box on the server: the rule the page's tables apply in the browser (``matches`` in
``frontend/src/views/common/table.ts``), for the tables too large to send whole (the Memory events, the Distributed
ranks of a big job), so a search finds the same rows whichever side runs it."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def search_mask(texts: Sequence[str], q: str) -> np.ndarray:
    """Per text, whether the search ``q`` finds it: case-insensitive, a substring, or the whole text when quoted
    (``"aten::add"``); an empty search finds every text."""
    query = q.strip().lower()
    if not query:
        return np.ones(len(texts), dtype=bool)
    if len(query) >= 2 and query.startswith('"') and query.endswith('"'):
        whole = query[1:-1]
        return np.array([t.lower() == whole for t in texts], dtype=bool)
    return np.array([query in t.lower() for t in texts], dtype=bool)
