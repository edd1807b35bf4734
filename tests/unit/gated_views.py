"""Stored views whose after-ready parts wait for a test (``test_warm_views_later.py``): a module of its own, free of
test imports, because the loader processes' fork server imports it to unpickle the ``Stored`` it is handed.

The loader's after-ready work starts only once the test opens the FIFO ``gate`` for writing and closes it (a
blocking read: no timing), so a request made before that finds its part in progress, deterministically; ``fail``
names parts whose placing into the entry fails (their views must then be computed by the server)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from tb_plugin.api import warm


class GatedViews(warm.WarmViews):
    def __init__(self, peaks: Any, gate: str, fail: tuple[str, ...] = (), inline_events: int | None = None) -> None:
        super().__init__(peaks, rule=warm.ReadyRule(seconds=0.0, share=0.0, always=()),  # all after ready
                         inline_events=inline_events)
        self.gate, self.fail = gate, fail

    def save(self, directory: str, file: Any = None, processes: int = 1,
             parse_seconds: float | None = None, memory: int | None = None, built: Any = None,
             saved: Any = None) -> Any:
        later = super().save(directory, file, processes, parse_seconds, memory, built, saved)
        return _Gated(later, self.gate, self.fail) if later is not None else None


class _Gated:
    def __init__(self, later: warm.Later, gate: str, fail: tuple[str, ...]) -> None:
        self.later, self.gate, self.fail = later, gate, fail
        self.parts = later.parts

    def rebase(self, files: dict[str, Any]) -> None:
        self.later.rebase(files)

    def run(self, stage: Callable[[], Path], place: Callable[[Path, str], bool],
            report: Callable[[str, bool], None]) -> None:
        with open(self.gate, "rb") as fh:  # blocks until the test opens the FIFO, returns when it closes it
            fh.read()
        self.later.run(stage, lambda built, part: part not in self.fail and place(built, part), report)
