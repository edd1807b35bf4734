"""Runs, workers and spans from a logdir, and rescans that pick up new, changed and deleted files."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from tb_plugin.catalog.catalog import SETTLE_SECONDS, Catalog, Root, parse_logdir_spec
from tb_plugin.catalog.storage import Storage
from tests.conftest import API, cpu_op, wait_until_settled, write_trace


def keys(files: list) -> set[tuple[str, str, str]]:
    return {f.key for f in files}


def test_runs_workers_and_spans(tmp_path: Path) -> None:
    write_trace(tmp_path / "exp" / "a" / "w0.9.pt.trace.json", [cpu_op("x", 0, 1)])
    write_trace(tmp_path / "exp" / "a" / "w0.10.pt.trace.json.gz", [cpu_op("x", 0, 1)])
    write_trace(tmp_path / "exp" / "a" / "w1.5.pt.trace.json", [cpu_op("x", 0, 1)])
    write_trace(tmp_path / "b" / "host_1.pt.trace.json", [cpu_op("x", 0, 1)])
    (tmp_path / "b" / "notes.txt").write_text("not a trace")
    files = Catalog([Root(None, Storage(str(tmp_path)))]).scan()
    assert keys(files) == {("exp/a", "w0", "1"), ("exp/a", "w0", "2"), ("exp/a", "w1", "1"), ("b", "host_1", "default")}
    by_key = {f.key: f for f in files}
    assert by_key[("exp/a", "w0", "1")].filename == "w0.9.pt.trace.json"  # 9 before 10: numeric order
    assert by_key[("exp/a", "w0", "2")].filename == "w0.10.pt.trace.json.gz"


def test_traces_at_the_top_of_the_logdir_form_a_run_named_after_it(tmp_path: Path) -> None:
    logdir = tmp_path / "my_logdir"
    write_trace(logdir / "w.1.pt.trace.json", [cpu_op("x", 0, 1)])
    assert keys(Catalog([Root(None, Storage(str(logdir)))]).scan()) == {("my_logdir", "w", "1")}


def test_symlinked_run_directories_are_followed(tmp_path: Path) -> None:
    write_trace(tmp_path / "real" / "w.1.pt.trace.json", [cpu_op("x", 0, 1)])
    (tmp_path / "logdir").mkdir()
    os.symlink(tmp_path / "real", tmp_path / "logdir" / "linked")
    os.symlink(tmp_path / "logdir", tmp_path / "logdir" / "linked" / "loop")  # a cycle must not hang the scan
    files = Catalog([Root(None, Storage(str(tmp_path / "logdir")))]).scan()
    assert ("linked", "w", "1") in keys(files)


def test_logdir_spec_names_prefix_runs(tmp_path: Path) -> None:
    write_trace(tmp_path / "x" / "r1" / "w.1.pt.trace.json", [cpu_op("x", 0, 1)])
    write_trace(tmp_path / "y" / "w.1.pt.trace.json", [cpu_op("x", 0, 1)])
    spec = parse_logdir_spec(f"first:{tmp_path / 'x'},second:{tmp_path / 'y'}")
    assert spec == [("first", str(tmp_path / "x")), ("second", str(tmp_path / "y"))]
    roots = [Root(name, Storage(path)) for name, path in spec]
    assert keys(Catalog(roots).scan()) == {("first/r1", "w", "1"), ("second", "w", "1")}


def test_logdir_spec_keeps_urls_and_unnamed_paths_whole() -> None:
    assert parse_logdir_spec("s3://bucket/runs") == [(None, "s3://bucket/runs")]
    assert parse_logdir_spec("/a/b,c:/d") == [(None, "/a/b"), ("c", "/d")]


def test_rescans_see_new_changed_and_deleted_files(tmp_path: Path) -> None:
    catalog = Catalog([Root(None, Storage(str(tmp_path)))])
    first = write_trace(tmp_path / "run1" / "w.1.pt.trace.json", [cpu_op("x", 0, 1)])
    assert keys(catalog.scan()) == {("run1", "w", "1")}
    write_trace(tmp_path / "run1" / "w.2.pt.trace.json", [cpu_op("x", 0, 1)])
    write_trace(tmp_path / "run2" / "w.1.pt.trace.json", [cpu_op("x", 0, 1)])
    assert keys(catalog.scan()) == {("run1", "w", "1"), ("run1", "w", "2"), ("run2", "w", "1")}
    first.unlink()
    # the remaining file of run1 becomes span 1
    assert keys(catalog.scan()) == {("run1", "w", "1"), ("run2", "w", "1")}
    (tmp_path / "run2" / "w.1.pt.trace.json").unlink()
    (tmp_path / "run2").rmdir()
    assert keys(catalog.scan()) == {("run1", "w", "1")}


def test_a_file_still_being_written_waits_for_the_next_scan(tmp_path: Path) -> None:
    catalog = Catalog([Root(None, Storage(str(tmp_path)))])
    path = tmp_path / "run" / "w.1.pt.trace.json"
    path.parent.mkdir()
    path.write_text('{"traceEvents": [')  # fresh mtime: may still be growing
    now = time.time()
    assert catalog.scan(now) == [] and catalog.pending == 1
    # unchanged at the next scan: taken even though young
    assert keys(catalog.scan(now + 0.5)) == {("run", "w", "1")}
    # or old enough
    assert keys(Catalog([Root(None, Storage(str(tmp_path)))]).scan(now + SETTLE_SECONDS + 1)) == {("run", "w", "1")}


def test_a_young_memory_export_beside_a_settled_trace_keeps_the_scan_going(tmp_path: Path) -> None:
    """A logdir scanned once rescans while anything is settling: an export written a moment before TensorBoard
    started (its trace older) was never listed, so the Memory view never named it."""
    write_trace(tmp_path / "run" / "w.1.pt.trace.json")  # settled (a minute old)
    export = tmp_path / "run" / "memory_timeline.json"
    export.write_text("[[1, 2], [[0, 1, 2, 3, 4, 5, 6, 7, 8]]]")
    catalog = Catalog([Root(None, Storage(str(tmp_path)))])
    now = time.time()
    assert keys(catalog.scan(now)) == {("run", "w", "1")}
    assert catalog.exports == [] and catalog.pending == 1
    catalog.scan(now + 0.5)
    assert [e.filename for e in catalog.exports] == ["memory_timeline.json"] and catalog.pending == 0


def test_missing_logdir_is_empty_not_an_error(tmp_path: Path) -> None:
    catalog = Catalog([Root(None, Storage(str(tmp_path / "nope")))])
    assert catalog.scan() == [] and catalog.errors == {}


def test_a_file_changed_without_a_new_size_or_mtime_is_parsed_again(tensorboard_app: Any, tmp_path: Path) -> None:
    """The parse cache and the loaded model follow the content, not only (size, mtime): a trace rewritten with the
    same size and the same mtime (``cp -p``, a coarse clock) must not keep serving the old parse."""
    path = write_trace(tmp_path / "ld" / "run" / "w.1.pt.trace.json", [cpu_op("aten::aaaa", 0, 10)])
    client = tensorboard_app(tmp_path / "ld")
    wait_until_settled(client, expect_spans=1)
    q = f"{API}/operators?run=run&worker=w&span=1"
    assert [r["name"] for r in client.get(q).get_json()["rows"]] == ["aten::aaaa"]
    stat = path.stat()
    path.write_bytes(path.read_bytes().replace(b"aten::aaaa", b"aten::bbbb"))  # same size
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # same mtime
    deadline = time.time() + 30
    names: list[str] = []
    while time.time() < deadline:
        r = client.get(q)
        if r.status_code == 200:
            names = [row["name"] for row in r.get_json()["rows"]]
            if names == ["aten::bbbb"]:
                break
        time.sleep(0.2)
    assert names == ["aten::bbbb"]
