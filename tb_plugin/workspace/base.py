"""What the workspace's parts and its callers share: a span's key, a loaded trace, a span's rank summaries, and
the error a request gets when it names something the workspace cannot give."""

from __future__ import annotations

from dataclasses import dataclass

from ..analysis.rank_summary import RankSummary
from ..catalog.catalog import TraceFile
from ..model.tables import TraceModel

Key = tuple[str, str, str]


class LookupFailed(Exception):
    """A request named something the workspace cannot give; ``status`` is the HTTP status to answer with."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class LoadedTrace:
    file: TraceFile
    model: TraceModel


@dataclass(frozen=True)
class SpanSummaries:
    """The workers of one span of a run as rank summaries: (file, summary) of those that loaded, and the workers
    whose trace failed (sorted)."""

    ranks: list[tuple[TraceFile, RankSummary]]
    failed: list[str]
