"""Parallelism follows the machine: loader processes and parts scale with the cores and the memory available."""

from __future__ import annotations

from pathlib import Path

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
    assert budget.parts_for(200 << 20, False, 1) == 15  # (6 GiB - 600 MB) / 64 MB per part: every slot
    monkeypatch.setattr(budget, "available_memory", lambda: 2 * GiB)
    assert budget.loader_slots() == 5
    assert budget.parts_for(600 << 20, False, 1) == 3  # (2 GiB - 1.8 GB of tables) / 64 MB per part
    assert budget.parts_for(600 << 20, False, 2) == 1  # 1 GiB each does not hold the tables: one process


def test_a_file_loading_alone_is_built_by_every_slot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The scheduler asks the budget with the files loading beside this one. It once counted the file itself among
    them (it is still queued when it starts), so a big trace loading alone got half the machine: 7 parts of 15."""
    from tb_plugin.catalog.catalog import TraceFile
    from tb_plugin.jobs.cache import ParseCache
    from tb_plugin.jobs.scheduler import LOADING, QUEUED, LoadScheduler, _Job

    asked: list[int] = []
    monkeypatch.setattr(budget, "parts_for", lambda size, gz, loading: asked.append(loading) or 1)
    started: list[int] = []

    class Process:  # records the parts the loader process would have been given
        def __init__(self, target: object, args: tuple[object, ...], name: str, daemon: bool) -> None:
            self.parts = args[1]  # run_jobs(items, parts, stored)

        def start(self) -> None:
            started.append(self.parts)  # type: ignore[arg-type]

    scheduler = LoadScheduler(ParseCache(tmp_path / "cache"), max_workers=15)
    scheduler.close()  # no loop thread: the jobs below are started by hand
    monkeypatch.setattr(scheduler.local.ctx, "Process", Process)
    jobs = [_Job(file=TraceFile(run="r", worker="w", span=str(k), url=f"/t/{k}.pt.trace.json.gz", size=12 << 20,
                                mtime=0.0), entry=tmp_path / str(k)) for k in range(3)]
    scheduler._jobs[jobs[0].file.key] = jobs[0]
    scheduler._spawn([jobs[0]])  # alone
    for job in jobs[1:]:
        scheduler._jobs[job.file.key] = job
    scheduler._spawn([jobs[1]])  # beside jobs[0] (loading) and jobs[2] (queued)
    assert asked == [1, 3] and started == [1, 1]
    assert [job.state for job in jobs] == [LOADING, LOADING, QUEUED]


@pytest.mark.parametrize("version", ["v2", "v1"])
def test_a_memory_cgroup_bounds_the_memory_available(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     version: str) -> None:
    """In a container of 12 GB using 5 GB (1 GB of it page cache the kernel takes back first), 8 GB are available,
    whatever the machine's MemAvailable says; the load limits follow (a third of it for the JSON text)."""
    files = {"v2": ("memory.max", "memory.current", "memory.stat", "inactive_file"),
             "v1": ("memory/memory.limit_in_bytes", "memory/memory.usage_in_bytes", "memory/memory.stat",
                    "total_inactive_file")}[version]
    (tmp_path / "memory").mkdir()
    (tmp_path / files[0]).write_text(f"{12 * GiB}\n")
    (tmp_path / files[1]).write_text(f"{5 * GiB}\n")
    (tmp_path / files[2]).write_text(f"anon 1\n{files[3]} {1 * GiB}\nactive_file 7\n")
    assert budget.cgroup_memory_left(str(tmp_path)) == 8 * GiB
    (tmp_path / files[0]).write_text("max\n" if version == "v2" else "9223372036854771712\n")
    assert budget.cgroup_memory_left(str(tmp_path)) is None  # no limit: the machine's memory says it
    assert budget.cgroup_memory_left(str(tmp_path / "nowhere")) is None
    monkeypatch.setattr(budget, "_machine_memory", lambda: 100 * GiB)
    monkeypatch.setattr(budget, "cgroup_memory_left", lambda: 9 * GiB)
    limits = budget.load_limits()
    assert (limits.max_text_bytes, limits.max_events, limits.memory_bytes) == (3 * GiB, 9 * GiB // 200, 9 * GiB)
