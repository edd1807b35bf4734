"""One cache entry's life beside other processes (``jobs/entries.py``): published whole (a lost race uses the
winner's entry, a damaged one in the way is replaced), opened as a checked private copy that nothing done to the
entry afterwards changes, and removed only when no one is reading it."""

from __future__ import annotations

import multiprocessing
import os
import time
from pathlib import Path

import numpy as np
import pytest

from tb_plugin.jobs import entries
from tb_plugin.jobs.entries import BadEntry
from tb_plugin.model.tables import columns_of, write_columns


def _built(cache: Path, values: np.ndarray, extra: bytes = b"{}") -> Path:
    folder = entries.staging(cache)
    write_columns(folder / "t.arrow", {"v": values})
    (folder / "extra.json").write_bytes(extra)
    entries.seal(folder)
    return folder


def test_the_first_publication_wins_and_the_loser_is_dropped(tmp_path: Path) -> None:
    entry = tmp_path / "v5-entry"
    assert entries.publish(_built(tmp_path, np.arange(10)), entry)
    loser = _built(tmp_path, np.arange(10))
    assert not entries.publish(loser, entry)  # whole and intact: used as it is
    assert not loser.exists() and entries.verify(entry) is None
    assert sorted(p.name for p in tmp_path.iterdir()) == ["v5-entry"]  # no temp folder left


def test_a_damaged_entry_in_the_way_is_replaced(tmp_path: Path) -> None:
    entry = tmp_path / "v5-entry"
    entries.publish(_built(tmp_path, np.arange(10)), entry)
    with open(entry / "t.arrow", "r+b") as fh:  # a flipped byte: sizes match, the CRC does not
        fh.seek(-20, os.SEEK_END)
        fh.write(b"\xff")
    assert entries.verify(entry) == "t.arrow differs from what was written"
    assert entries.publish(_built(tmp_path, np.arange(10)), entry)
    assert entries.verify(entry) is None


def test_opening_checks_each_file_and_drops_a_damaged_optional_one(tmp_path: Path) -> None:
    entry = tmp_path / "v5-entry"
    entries.publish(_built(tmp_path, np.arange(1000, dtype=np.int64), b'{"a": 1}'), entry)
    opened = entries.open_entry(entry, ["t.arrow"], lambda name: name == "extra.json", tmp_path)
    assert columns_of(opened.files["t.arrow"])["v"].tolist() == list(range(1000))
    assert opened.files["extra.json"].to_pybytes() == b'{"a": 1}' and opened.dropped == {}
    (entry / "extra.json").write_bytes(b'{"a": 2}')
    opened = entries.open_entry(entry, ["t.arrow"], lambda name: name == "extra.json", tmp_path)
    assert "extra.json" not in opened.files and opened.dropped == {"extra.json": "extra.json differs from what "
                                                                                  "was written (CRC-32)"}
    os.truncate(entry / "t.arrow", 100)
    with pytest.raises(BadEntry, match=r"t.arrow has 100 bytes, not the [\d,]+ written"):
        entries.open_entry(entry, ["t.arrow"], scratch=tmp_path)
    (entry / "t.arrow").unlink()
    with pytest.raises(BadEntry, match=r"t\.arrow is missing"):
        entries.open_entry(entry, ["t.arrow"], scratch=tmp_path)
    with pytest.raises(BadEntry, match=r"not in its manifest"):
        entries.open_entry(entry, ["other.arrow"], scratch=tmp_path)


@pytest.mark.parametrize("rows", [1000, 1 << 20])  # in memory (8 KB), and a private file (8 MB)
def test_an_opened_entry_is_unchanged_by_anything_done_to_the_cache_after(tmp_path: Path, rows: int) -> None:
    """Truncating a file mapped in place is a SIGBUS at the next read of the lost pages (it killed TensorBoard);
    the opened copy is private: the numbers stay, whatever happens to the entry."""
    entry = tmp_path / "v5-entry"
    values = np.arange(rows, dtype=np.int64) * 3
    entries.publish(_built(tmp_path, values), entry)
    column = columns_of(entries.open_entry(entry, ["t.arrow"], scratch=tmp_path).files["t.arrow"])["v"]
    os.truncate(entry / "t.arrow", 0)
    (entry / "extra.json").unlink()
    assert int(column.sum()) == int(values.sum()) and column[-1] == values[-1]
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(("tmp", ".tmp"))] == []  # the copy: unlinked


def _hold_shared(entry: str, ready: object, release: object) -> None:
    with entries.entry_lock(Path(entry), shared=True):
        ready.set()  # type: ignore[attr-defined]
        release.wait(30)  # type: ignore[attr-defined]


def test_an_entry_another_process_reads_is_not_removed(tmp_path: Path) -> None:
    entry = tmp_path / "v5-entry"
    entries.publish(_built(tmp_path, np.arange(10)), entry)
    ctx = multiprocessing.get_context("spawn")
    ready, release = ctx.Event(), ctx.Event()
    reader = ctx.Process(target=_hold_shared, args=(str(entry), ready, release))
    reader.start()
    try:
        assert ready.wait(30)
        assert not entries.discard(entry) and entries.verify(entry) is None  # being copied elsewhere: kept
    finally:
        release.set()
        reader.join(30)
    assert entries.discard(entry) and not entry.exists()
    assert not list(tmp_path.glob(".trash-*"))


def test_a_reader_waits_for_a_removal_and_then_misses(tmp_path: Path) -> None:
    entry = tmp_path / "v5-entry"
    entries.publish(_built(tmp_path, np.arange(10)), entry)
    started = time.monotonic()
    assert entries.discard(entry)
    with pytest.raises(BadEntry, match=r"gone"):
        entries.open_entry(entry, ["t.arrow"], scratch=tmp_path)
    assert time.monotonic() - started < 5
