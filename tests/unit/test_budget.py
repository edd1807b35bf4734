"""Parallelism follows the machine: loader processes and parts scale with the cores and the memory available."""

from __future__ import annotations

import pytest

from tb_plugin.jobs import budget

GiB = 1 << 30


@pytest.mark.parametrize(("cores", "memory", "slots"), [(16, 128 * GiB, 15), (2, 24 * GiB, 2), (1, 8 * GiB, 1),
                                                        (16, 2 * GiB, 5), (64, 1 * GiB, 2)])
def test_loader_slots_leave_a_core_to_the_server_and_fit_in_memory(
        monkeypatch: pytest.MonkeyPatch, cores: int, memory: int, slots: int) -> None:
    monkeypatch.setattr(budget, "cores", lambda: cores)
    monkeypatch.setattr(budget, "available_memory", lambda: memory)
    assert budget.loader_slots() == slots


def test_one_big_file_gets_every_slot_and_many_files_one_each(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(budget, "cores", lambda: 16)
    monkeypatch.setattr(budget, "available_memory", lambda: 128 * GiB)
    assert budget.parts_for(150 << 20, True, 1) == 15  # a 150 MB gz (~1.5 GB JSON) alone: all 15 slots
    assert budget.parts_for(150 << 20, True, 15) == 1  # 15 files at once: one process each
    assert budget.parts_for(150 << 20, True, 4) == 3


def test_parts_shrink_when_memory_is_short(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(budget, "cores", lambda: 16)
    monkeypatch.setattr(budget, "available_memory", lambda: 6 * GiB)
    # 2 GB of JSON needs ~6 GB of columns however it is split; each part adds a process: fewer parts fit
    assert budget.parts_for(2 << 30, False, 1) == 1
    assert budget.parts_for(200 << 20, False, 1) == 14  # (6 GiB - 600 MB) / 384 MB per process
