#!/usr/bin/env python3
"""Where a cold load's time goes: the loader worker's phases, the parallel parts, and each view's first computation.

    python benchmarks/profile_load.py TRACE [--parts 1,4,8,16] [--cprofile] [--views] [--workspace]

- **phases** (per ``--parts`` value, each in a fresh child process, as the loader worker runs them): read, gunzip,
  the top-level outline (the text split into parts' byte ranges, or with one part the decode into raw slices),
  building the tables (``parts`` forked processes; ``MIN_PART_EVENTS`` is lowered
  so that the value asked for is what runs), writing the parse cache (Arrow IPC), building and storing the Trace
  view's index (as the loader process does) and memory-mapping the model back.
- ``--cprofile``: the same with the largest ``--parts`` under cProfile in the parent (the merge of the parts, the
  finish), top functions by cumulative time.
- ``--views``: on the memory-mapped model, each analysis's first (cold) computation, one after another, in the
  order ``precompute`` and a page would run them.
- ``--workspace``: the server's whole pipeline in this process (``Workspace`` on a logdir holding the trace, a
  fresh parse cache): seconds to the first scan, to ``loading`` and to ``ready``, then to the precomputed views.

Prints a table; ``--json FILE`` writes the numbers.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def phases(path: str, parts: int, profile: bool) -> dict[str, Any]:
    """The loader worker's pipeline, step by step (run in a fresh, single-threaded child)."""
    from tb_plugin.loader import columns
    from tb_plugin.loader.read import decode_outline, decompress, outline_by_text, read_bytes
    from tb_plugin.model.tables import load, save
    from tb_plugin.timeline.stored import StoredIndex

    columns.MIN_PART_EVENTS = 1000  # let the number of parts asked for run
    out: dict[str, Any] = {"parts": parts}
    t = time.perf_counter()
    with open(path, "rb") as fh:
        raw = read_bytes(fh, os.path.getsize(path))
    out["read_s"], t = time.perf_counter() - t, time.perf_counter()
    data = decompress(raw, path)
    del raw
    out["gunzip_s"], t = time.perf_counter() - t, time.perf_counter()
    text = outline_by_text(data) if parts > 1 and len(data) >= columns.PARALLEL_MIN_BYTES else None
    doc = text[0] if text else decode_outline(data, path)  # as load_bytes: split the text where it can
    out["path"] = "text parts" if text else "outline"
    out["outline_s"], t = time.perf_counter() - t, time.perf_counter()
    prof = cProfile.Profile() if profile else None
    if prof:
        prof.enable()
    if text:
        model = columns.build_model_from_text(data, doc, text[1], text[2], path, parts=parts)
    else:
        model = columns.build_model(doc, path, parts=parts)
    del data
    if prof:
        prof.disable()
        text = io.StringIO()
        pstats.Stats(prof, stream=text).sort_stats("cumulative").print_stats(30)
        out["cprofile"] = text.getvalue()
    out["build_s"], t = time.perf_counter() - t, time.perf_counter()
    entry = tempfile.mkdtemp(prefix="profile_load_")
    save(model, entry)
    out["save_s"], t = time.perf_counter() - t, time.perf_counter()
    StoredIndex().save(entry)  # the Trace view's index, as the loader process builds and stores it
    out["index_s"], t = time.perf_counter() - t, time.perf_counter()
    model = load(entry)
    out["mmap_load_s"] = time.perf_counter() - t
    out["events"], out["model_mb"] = model.n_events, model.nbytes() / 1e6
    out["total_s"] = sum(v for k, v in out.items() if k.endswith("_s"))
    shutil.rmtree(entry, ignore_errors=True)
    return out


def views(path: str) -> dict[str, float]:
    """Each analysis's cold computation on a freshly loaded (memory-mapped) model, in turn."""
    from tb_plugin.analysis import kernels, operators
    from tb_plugin.analysis.diff import diff_node, diff_summary
    from tb_plugin.analysis.memory import memory_curve, memory_events, memory_statistics
    from tb_plugin.analysis.modules import module_timeline, module_view
    from tb_plugin.analysis.overview import overview
    from tb_plugin.analysis.summary import summary
    from tb_plugin.loader import columns, load_trace
    from tb_plugin.model.tables import load, save
    from tb_plugin.timeline.index import timeline_index
    from tb_plugin.timeline.window import window

    columns.MIN_PART_EVENTS = 1000
    entry = tempfile.mkdtemp(prefix="profile_views_")
    save(load_trace(path, parts=os.cpu_count() or 1), entry)
    model = load(entry)
    steps: list[tuple[str, Any]] = [
        ("overview", lambda: overview(model)),
        ("timeline_index", lambda: timeline_index(model)),
        ("trace window", lambda: window(model, timeline_index(model).t_min, timeline_index(model).t_max, 2000)),
        ("summary", lambda: summary(model)),
        ("operators name", lambda: operators.operator_table(model, "name")),
        ("operators name_shape", lambda: operators.operator_table(model, "name_shape")),
        ("operators name_stack", lambda: operators.operator_table(model, "name_stack")),
        ("kernels name", lambda: kernels.kernel_table(model, "name")),
        ("kernels name_op", lambda: kernels.kernel_table(model, "name_op")),
        ("memory curve", lambda: memory_curve(model, 4000)),
        ("memory events", lambda: memory_events(model, None, None, None)),
        ("memory stats", lambda: memory_statistics(model, None, None)),
        ("modules", lambda: module_view(model)),
        ("modules timeline", lambda: module_timeline(model, 20001)),
        ("diff", lambda: diff_summary(model, model)),
        ("diff node", lambda: diff_node(model, model, "0")),
    ]
    out = {}
    for name, fn in steps:
        t = time.perf_counter()
        fn()
        out[name] = time.perf_counter() - t
    shutil.rmtree(entry, ignore_errors=True)
    return out


def workspace(path: str) -> dict[str, Any]:
    """The server's pipeline without TensorBoard: scan, loader process, ready, precompute."""
    from tb_plugin.jobs.scheduler import READY
    from tb_plugin.workspace import Workspace, precompute

    home = Path(tempfile.mkdtemp(prefix="profile_ws_"))
    (home / "logdir" / "run").mkdir(parents=True)
    os.link(path, home / "logdir" / "run" / Path(path).name)
    marks: dict[str, float] = {}
    t0 = time.perf_counter()

    def warm(model: Any) -> None:
        marks["precompute_start_s"] = time.perf_counter() - t0
        precompute(model)
        marks["precompute_end_s"] = time.perf_counter() - t0

    ws = Workspace([(None, str(home / "logdir"))], cache_dir=str(home / "cache"), rescan_seconds=0, on_ready=warm)
    ws.start()
    ws.wait_scanned(60)
    marks["scanned_s"] = time.perf_counter() - t0
    while time.perf_counter() - t0 < 300:
        spans = [s for r in ws.listing() for w in r["workers"] for s in w["spans"]]
        if spans and spans[0]["state"] == "loading" and "loading_s" not in marks:
            marks["loading_s"] = time.perf_counter() - t0
        if spans and spans[0]["state"] in (READY, "failed"):
            marks["ready_s"] = time.perf_counter() - t0
            marks["state"] = spans[0]["state"]
            break
        time.sleep(0.01)
    while "precompute_end_s" not in marks and time.perf_counter() - t0 < 300:
        time.sleep(0.01)
    ws.close()
    shutil.rmtree(home, ignore_errors=True)
    return marks


def _child(args: list[str]) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, __file__, *args, "--child"], capture_output=True, text=True, check=False,
                          timeout=600)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])  # type: ignore[no-any-return]
    return {"error": proc.stderr[-2000:]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace")
    parser.add_argument("--parts", default="1,4,8,16")
    parser.add_argument("--cprofile", action="store_true")
    parser.add_argument("--views", action="store_true")
    parser.add_argument("--workspace", action="store_true")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--mode", default="", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        mode, _, value = args.mode.partition(":")
        result: Any = (phases(args.trace, int(value), args.cprofile) if mode == "phases" else
                       views(args.trace) if mode == "views" else workspace(args.trace))
        print("RESULT " + json.dumps(result))
        return 0
    out: dict[str, Any] = {"cores": os.cpu_count(), "phases": []}
    counts = [int(p) for p in args.parts.split(",")]
    for parts in counts:
        res = _child([args.trace, "--mode", f"phases:{parts}"])
        out["phases"].append(res)
        print(" ".join(f"{k} {v:.3f}" if isinstance(v, float) else f"{k} {v}" for k, v in res.items()), flush=True)
    if args.cprofile:
        res = _child([args.trace, "--mode", f"phases:{max(counts)}", "--cprofile"])
        out["cprofile"] = res.get("cprofile", res.get("error"))
        print(out["cprofile"], flush=True)
    if args.workspace:
        out["workspace"] = _child([args.trace, "--mode", "workspace"])
        print("workspace:", json.dumps(out["workspace"]), flush=True)
    if args.views:
        out["views"] = _child([args.trace, "--mode", "views"])
        print("views:", json.dumps(out["views"]), flush=True)
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
