"""The loader process's stored views are an optimisation: when computing them fails, the trace still loads, and the
failure is logged where an operator looks (the views are computed on first use)."""

from __future__ import annotations

import logging
from types import SimpleNamespace
from typing import Any

import pytest

from tb_plugin.catalog.catalog import TraceFile
from tb_plugin.jobs import worker


class _Broken:
    def save(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("no space left for warm.overview.bin")


def test_stored_views_that_fail_are_logged_and_left_to_first_use(caplog: pytest.LogCaptureFixture) -> None:
    file = TraceFile(run="r", worker="w", span="1", url="/logs/r/w.1.pt.trace.json.gz", size=1, mtime=0.0)
    with caplog.at_level(logging.WARNING, logger=worker.__name__):
        later = worker._save_derived(_Broken(), "/cache/entry", file, (2, 1 << 30), 0.5,  # type: ignore[arg-type]
                                     SimpleNamespace(model=None))  # type: ignore[arg-type]
    assert later is None
    assert "/logs/r/w.1.pt.trace.json.gz" in caplog.text
    assert "RuntimeError: no space left for warm.overview.bin" in caplog.text
