"""The shared cache's ordering guarantees, on fsspec's in-memory store: an entry is published and copied with its
manifest and completion markers last, so neither a reader of the store nor the server's local copy ever sees a half
entry as complete; a local path publishes by renaming."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tb_plugin.jobs.cache import SUMMARY_MARKER, ParseCache, entry_name
from tb_plugin.jobs.entries import MANIFEST
from tb_plugin.jobs.shared import MODEL_MARKER, SharedCache


def _built(tmp_path: Path, name: str) -> Path:
    built = tmp_path / "built" / name
    built.mkdir(parents=True)
    for f in ("events.arrow", "strings.arrow", MODEL_MARKER, "summary-steps.parquet",
              "summary-collectives.parquet", SUMMARY_MARKER):
        (built / f).write_text(f)
    return built


def _recording(fs: Any, method: str, calls: list[list[str]]) -> None:
    real = getattr(fs, method)

    def record(sources: Any, targets: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(sorted(Path(str(t)).name for t in (targets if isinstance(targets, list) else [targets])))
        return real(sources, targets, *args, **kwargs)

    setattr(fs, method, record)


def test_publish_and_fetch_put_the_markers_last(tmp_path: Path) -> None:
    cache = SharedCache("memory://shared-order")
    name = entry_name(("s3://b/rank0.1.pt.trace.json.gz", 10, 0.0, "etag1"))
    puts: list[list[str]] = []
    _recording(cache.fs, "put", puts)
    assert cache.done() == set()
    cache.publish(_built(tmp_path, name), name)
    assert puts[-3:] == [[MANIFEST], [MODEL_MARKER], [SUMMARY_MARKER]]
    assert set(puts[0]) == {"events.arrow", "strings.arrow", "summary-steps.parquet", "summary-collectives.parquet"}
    assert cache.done() == {name}

    local = ParseCache(tmp_path / "local")
    gets: list[list[str]] = []
    _recording(cache.fs, "get", gets)
    cache.fetch([name], local.directory, summary_only=True)
    assert gets == [["summary-collectives.parquet", "summary-steps.parquet"], [MANIFEST], [SUMMARY_MARKER]]
    entry = local.directory / name
    assert local.has_summary(entry) and not local.has(entry)  # the model is not here yet
    gets.clear()
    cache.fetch([name], local.directory, summary_only=False)
    assert gets[-3:] == [[MANIFEST], [MODEL_MARKER], [SUMMARY_MARKER]] and local.has(entry)
    assert (entry / "events.arrow").read_text() == "events.arrow"


def test_an_entry_without_its_marker_is_not_done(tmp_path: Path) -> None:
    cache = SharedCache("memory://shared-partial")
    cache.fs.pipe(cache.path("v4-half", MODEL_MARKER), b"{}")
    assert cache.done() == set()


def test_a_local_cache_publishes_by_renaming(tmp_path: Path) -> None:
    cache = SharedCache(str(tmp_path / "cache"))
    name = "v4-local"
    holder = cache.staging()
    assert holder.parent == tmp_path / "cache" and holder.name.startswith(".tmp-")
    built = holder / name
    built.mkdir()
    (built / MODEL_MARKER).write_text("{}")
    (built / SUMMARY_MARKER).write_text("{}")
    cache.publish(built, name)
    assert cache.done() == {name} and not built.exists()
    assert ParseCache(tmp_path / "cache").has_summary(tmp_path / "cache" / name)
