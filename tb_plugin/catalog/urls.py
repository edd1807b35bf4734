"""The shape of a logdir URL, before any store is asked: is it a URL, is it on another machine, its query."""

from __future__ import annotations

import re

AZURE_HOST = re.compile(r"^(?P<account>[a-z0-9]{3,24})\.(?:blob|dfs)\.core\.[a-z0-9.-]+$", re.IGNORECASE)


def is_url(path: str) -> bool:
    return "://" in path


def is_remote(url: str) -> bool:
    """Whether ``url`` names a file on a store other than this machine's disk (``file://`` is local): the one
    test of "is this remote?" (a remote original is cached beside its parse, a local one is checked as listed)."""
    return is_url(url) and not url.lower().startswith("file://")


def strip_query(url: str) -> tuple[str, str]:
    """``url`` without its query string, and the query string."""
    base, _, query = url.partition("?")
    return base, query
