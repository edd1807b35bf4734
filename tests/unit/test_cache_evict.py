"""The parse cache's eviction while other loader processes write beside it: a temp folder or an entry that
vanishes between listing and measuring is skipped (it once raised FileNotFoundError and stopped the loader thread,
so a 300-rank logdir never settled)."""
from __future__ import annotations

import os
import time
from pathlib import Path

from tb_plugin.jobs.cache import ParseCache


def _entry(root: Path, name: str, size: int, age_s: float) -> Path:
    folder = root / name
    folder.mkdir()
    (folder / "model.bin").write_bytes(b"x" * size)
    stamp = time.time() - age_s
    os.utime(folder, (stamp, stamp))
    return folder


def test_vanished_temp_folder_and_entry_are_skipped(tmp_path: Path) -> None:
    cache = ParseCache(tmp_path, max_bytes=2_500)
    old, new = _entry(tmp_path, "old", 2_000, 100), _entry(tmp_path, "new", 1_000, 10)
    # what a renamed .tmp folder and a removed entry look like to a listing made just before: names that are gone
    (tmp_path / ".tmp-renamed").symlink_to(tmp_path / "nowhere")
    (new / "gone.bin").symlink_to(tmp_path / "nowhere")
    cache.evict()
    # 3,000 bytes over a 2,500 budget: the oldest entry goes, the newer one (1,000 bytes, its dangling file 0) stays
    assert not old.exists() and new.exists()


def test_old_temp_folders_are_removed_young_ones_kept(tmp_path: Path) -> None:
    cache = ParseCache(tmp_path, max_bytes=10**9)
    stale, fresh = _entry(tmp_path, ".tmp-stale", 10, 7_200), _entry(tmp_path, ".tmp-fresh", 10, 60)
    cache.evict()
    assert not stale.exists() and fresh.exists()
