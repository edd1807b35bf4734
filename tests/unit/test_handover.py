"""The loader's parse handed to the server in a private file (jobs/handover.py): the server maps what the loader
copied there instead of copying the published entry again, gets the same model and stored views, and falls back to
the entry when what was handed over cannot be used; no handed-over file outlives its load."""

from __future__ import annotations

import json
import multiprocessing
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from tb_plugin.analysis.device_peaks import NO_OVERRIDE
from tb_plugin.api.warm import WarmViews, key, stored_answer
from tb_plugin.catalog.catalog import TraceFile
from tb_plugin.jobs import entries, handover, opening
from tb_plugin.jobs.cache import ParseCache
from tb_plugin.jobs.entries import BadEntry
from tb_plugin.jobs.handover import Filler, Handover, adopt
from tb_plugin.jobs.scheduler import LoadScheduler
from tb_plugin.loader import load_trace
from tb_plugin.model.derived import _key
from tb_plugin.timeline.index import timeline_index
from tests.unit.test_load_paths import assert_same_model
from tests.unit.test_stored_index import wait_ready

DATA = Path(__file__).resolve().parents[1] / "data"
V100 = sorted((DATA / "kineto_v100" / "resnet50_num_workers_0").glob("*.pt.trace.json.gz"))[0]


def _folder(tmp_path: Path) -> Path:
    folder = tmp_path / "built"
    folder.mkdir()
    (folder / "a.arrow").write_bytes(b"A" * 100)
    (folder / "b.json").write_bytes(b"{}")
    (folder / "c.bin").write_bytes(bytes(range(256)) * 5000)
    (folder / ".lock").touch()
    (folder / entries.MANIFEST).write_text("{}")
    return folder


def test_a_filled_handover_maps_back_to_the_same_bytes(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    assert handover.handed_files(folder) == ["a.arrow", "b.json", "c.bin"]
    made = handover.make(tmp_path)
    assert made is not None
    filler = Filler(made, folder)
    filler.start(["c.bin"])  # in a forked child
    layout = filler.finish(handover.handed_files(folder))
    assert layout is not None and sorted(layout) == ["a.arrow", "b.json", "c.bin"]
    assert all(offset % 64 == 0 for offset, _ in layout.values())
    files = adopt(made, layout, ["a.arrow"], lambda name: name != "b.json")
    assert made.file is None and made.fd == -1  # the map keeps the file; the handover is let go
    assert sorted(files) == ["a.arrow", "c.bin"]
    for name, buffer in files.items():
        assert buffer.to_pybytes() == (folder / name).read_bytes()


@pytest.mark.parametrize("layout, reason", [
    ({"a.arrow": (0, 10 ** 9)}, "does not fit"),
    ({"a.arrow": (-1, 10)}, "does not fit"),
    ({"a.arrow": (0, True)}, "does not fit"),
    ({"a.arrow": "0,10"}, "does not fit"),
    ([("a.arrow", (0, 10))], "not a mapping"),
    ({"b.json": (0, 2)}, "a.arrow not handed over"),
])
def test_a_layout_that_does_not_fit_the_file_is_refused(tmp_path: Path, layout: Any, reason: str) -> None:
    made = handover.make(tmp_path)
    assert made is not None
    os.write(made.fd, b"x" * 100)
    with pytest.raises(BadEntry, match=reason):
        adopt(made, layout, ["a.arrow"], lambda name: True)
    assert made.file is None  # let go all the same


def _child_writes(handed: Handover, conn: Any) -> None:
    os.pwrite(handed.fd, b"from the loader", 64)
    conn.send(os.fstat(handed.fd).st_size)


def test_a_handover_travels_to_a_fork_server_process(tmp_path: Path) -> None:
    """It is pickled with the loader's other arguments: the process gets a descriptor of the same unlinked file."""
    made = handover.make(tmp_path)
    assert made is not None
    assert list(tmp_path.iterdir()) == []  # no name anyone could open
    ctx = multiprocessing.get_context("forkserver")
    recv, send = ctx.Pipe(duplex=False)
    process = ctx.Process(target=_child_writes, args=(made, send))
    process.start()
    assert recv.recv() == 79
    process.join(10)
    files = adopt(made, {"x": (64, 15)}, ["x"], lambda name: False)
    assert files["x"].to_pybytes() == b"from the loader"


def _load(tmp_path: Path, path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[LoadScheduler, TraceFile, list[Any]]:
    """``path`` through a real scheduler (a loader process from the fork server, the plugin's stored views); the
    entries the server copied are recorded."""
    copied: list[Any] = []
    real = entries.open_entry

    def spy(entry: Path, *args: Any, **kwargs: Any) -> entries.Opened:
        copied.append(entry.name)
        return real(entry, *args, **kwargs)

    monkeypatch.setattr(entries, "open_entry", spy)
    scheduler = LoadScheduler(ParseCache(tmp_path / "cache"), max_workers=1, stored=WarmViews())
    file = TraceFile(run="r", worker="w", span="1", url=str(path), size=path.stat().st_size,
                     mtime=path.stat().st_mtime)
    scheduler.request(file)
    wait_ready(scheduler, file)
    return scheduler, file, copied


def test_the_server_maps_the_parse_handed_over_instead_of_copying_the_entry(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    assert V100.stat().st_size >= handover.MIN_FILE_BYTES
    scheduler, file, copied = _load(tmp_path, V100, monkeypatch)
    try:
        model = scheduler.model(file.key)
        assert model is not None
        assert copied == []  # nothing copied out of the cache
        assert_same_model(model, load_trace(str(V100)))
        # the stored views came with it: the Overview answers from what the loader stored, the index is found
        overview = json.loads(stored_answer(model, key("overview", worker="w", workers=1, peaks=NO_OVERRIDE,
                                                       ranks=[])).body)
        assert overview["verdict"]["kind"]
        assert _key(timeline_index, ()) in model.memo
        job = scheduler._jobs[file.key]
        assert job.handover is None
        # the published entry is whole: a second server opens it from the cache (copied and checked)
        other = LoadScheduler(ParseCache(tmp_path / "cache"), max_workers=1, stored=WarmViews())
        try:
            other.request(file)
            wait_ready(other, file)
            assert copied == [scheduler.cache.entry(file.identity).name]
            reopened = other.model(file.key)
            assert reopened is not None
            assert_same_model(reopened, model)
        finally:
            other.close()
    finally:
        scheduler.close()


def test_a_handover_that_cannot_be_used_falls_back_to_the_entry(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(handed: Handover, *args: Any) -> dict[str, Any]:
        handed.close()
        raise BadEntry("planted")

    monkeypatch.setattr(handover, "adopt", refuse)
    scheduler, file, copied = _load(tmp_path, V100, monkeypatch)
    try:
        assert copied == [scheduler.cache.entry(file.identity).name]
        model = scheduler.model(file.key)
        assert model is not None
        assert_same_model(model, load_trace(str(V100)))
    finally:
        scheduler.close()


def test_a_failed_load_lets_its_handover_go(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bad = tmp_path / "bad.pt.trace.json"
    bad.write_bytes(b'{"traceEvents": [' + b"x" * (2 << 20))
    monkeypatch.setattr(handover, "MIN_FILE_BYTES", 1)
    made: list[Handover] = []
    real = handover.make

    def spy(scratch: Path) -> Handover | None:
        made.append(real(scratch))  # type: ignore[arg-type]
        return made[-1]

    monkeypatch.setattr(handover, "make", spy)
    scheduler = LoadScheduler(ParseCache(tmp_path / "cache"), max_workers=1, stored=WarmViews())
    file = TraceFile(run="r", worker="w", span="1", url=str(bad), size=bad.stat().st_size, mtime=bad.stat().st_mtime)
    try:
        scheduler.request(file)
        with pytest.raises(AssertionError):
            wait_ready(scheduler, file, timeout=60)
        status = scheduler.status(file.key)
        assert status is not None and status.error
        assert len(made) == 1 and made[0].file is None
    finally:
        scheduler.close()


def test_the_opener_lets_go_of_a_handover_without_a_layout(tmp_path: Path) -> None:
    made = handover.make(tmp_path)
    assert made is not None
    cache = ParseCache(tmp_path / "cache")
    opener = opening.EntryOpener(cache, None, threading.Lock(), lambda: None)
    assert opener._handed(tmp_path, made, None) is None
    assert made.file is None


def test_the_sums_the_copying_child_gives_make_the_same_manifest(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    made = handover.make(tmp_path)
    assert made is not None
    filler = Filler(made, folder)
    filler.start(["a.arrow", "c.bin"])
    assert filler.finish(handover.handed_files(folder)) is not None
    assert filler.sums == {name: entries.size_and_crc(folder / name) for name in ("a.arrow", "c.bin")}
    (folder / entries.MANIFEST).unlink()
    entries.seal(folder)
    read = entries.manifest(folder)
    (folder / entries.MANIFEST).unlink()
    entries.seal(folder, filler.sums)
    assert entries.manifest(folder) == read
    # a sum whose size no longer matches is not trusted: the file is read again
    (folder / entries.MANIFEST).unlink()
    entries.seal(folder, {"a.arrow": (99, 0), "c.bin": (filler.sums["c.bin"][0], 0)})
    assert entries.manifest(folder)["a.arrow"] == read["a.arrow"]
    assert entries.manifest(folder)["c.bin"] == (read["c.bin"][0], 0)  # the same size: taken as given
    made.close()


_ORPHAN = """
import os, sys, time
from tb_plugin.loader.columns import fork_worker
pid, fd = fork_worker(lambda w: time.sleep(60))  # a writer or copier still at work
print(pid, flush=True)
os._exit(0)  # the loader process ends (killed, or stopped at its time limit)
"""


def test_a_forked_helper_dies_with_the_loader() -> None:
    """The loader's forked helpers (the parse's parts, the writer, the handover's copier) end with it: none is left
    working for nobody, holding the answer pipe it inherited."""
    import subprocess
    import sys
    import time

    out = subprocess.run([sys.executable, "-c", _ORPHAN], capture_output=True, text=True, check=True, timeout=60)
    child = int(out.stdout.split()[0])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    raise AssertionError(f"the helper {child} outlived the process that forked it")
