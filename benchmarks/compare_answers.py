#!/usr/bin/env python3
"""Every route's answers on every sample and test trace, recorded to compare two versions of the code.

    # record with one checkout's code, from its folder (the loader's fork server imports tb_plugin from there), on a
    # logdir built once and reused for both
    cd CHECKOUT && PYTHONPATH=$PWD python /path/to/compare_answers.py record --logdir /tmp/cmp/logdir OUT.json.gz
    python benchmarks/compare_answers.py compare A.json.gz B.json.gz

``record`` builds (once, if absent) a logdir of every trace in ``tests/data`` and ``samples`` (their folders as
runs, with the samples' exports and allocator snapshots), starts the real TensorBoard app on it with a fresh parse
cache and asks every route of every span: the first views as the pages ask them (answered from the stored views),
each route's other groupings and parameters, Trace view windows, ranges, events and searches, the diff of a span
against itself and its drill-down, the job-level views of every run, the snapshot routes. Then it starts a second
app on the same parses with the stored views taken out (what the server computes itself) and asks the same again.
Each answer is recorded as its status and body (a sha256 for the trace file download). ``compare`` lists every URL
whose answer differs, with the first differing JSON path. The logdir must be the same path in both records (file
names and paths show in some answers).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import logging
import os
import shutil
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any
from urllib.parse import quote

REPO = Path(__file__).resolve().parent.parent
API = "/data/plugin/pytorch_profiler"
PER_SPAN = (
    "summary", "sources", "overview", "what_if",
    "operators?group_by=name", "operators?group_by=name_shape", "operators?group_by=name_stack",
    "kernels?group_by=name", "kernels?group_by=name_op",
    "roofline?group_by=kernel", "roofline?group_by=operator",
    "trace/window?width_px=400", "trace/window?width_px=2000", "trace/window?width_px=1000&category=Kernel",
    "trace/search?q=a", "trace/search?q=aten::mm&match=exact", "trace/file",
    "memory/curve", "memory/events", "memory/stats", "memory_categories",
    "modules", "modules/timeline",
    "idle", "idle?kernel_wait_us=30", "cupti_counters", "launch_stats", "launch_stats?limit=5", "queue_length",
    "memory_bandwidth", "kernel_sequences", "kernel_sequences?length=2&top=5", "critical_path",
    "flamegraph", "flamegraph?metric=self_device_us", "flamegraph?metric=calls&merge=function",
    "flamegraph/search?q=a", "annotations",
)


def build_logdir(logdir: Path) -> None:
    """Every trace of tests/data and samples (and the samples' exports and snapshots), hard-linked (or copied)
    under ``data/`` and ``samples/``, their folders kept as runs."""
    if logdir.exists():
        return
    tmp = logdir.with_name(logdir.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    for src, name in ((REPO / "tests" / "data", "data"), (REPO / "samples", "samples")):
        for f in sorted(src.rglob("*")):
            keep = ".pt.trace.json" in f.name or (name == "samples" and f.parent.name != "scripts" and (
                f.suffix in (".gz", ".pickle") or f.name.endswith(".torch.json")) and f.name != "corpus_manifest.json")
            if not f.is_file() or not keep:
                continue
            dst = tmp / name / f.relative_to(src)
            dst.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(f, dst)
            except OSError:
                shutil.copy2(f, dst)
            old = time.time() - 120
            os.utime(dst, (old, old))
    tmp.rename(logdir)


def app(logdir: Path, cache: Path) -> Any:
    from tensorboard import program
    from tensorboard.backend import application
    from tensorboard.plugins.core import core_plugin
    from werkzeug.test import Client

    from tb_plugin.plugin import ProfilerLoader

    tb = program.TensorBoard(plugins=[core_plugin.CorePluginLoader(), ProfilerLoader()])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tb.configure(logdir=str(logdir), load_fast="false", profiler_cache_dir=str(cache),
                     profiler_rescan_interval=0.5)
        wsgi = application.TensorBoardWSGIApp(tb.flags, tb.plugin_loaders)
    client = Client(wsgi)
    client.wsgi_app = wsgi
    return client


def close(client: Any) -> None:
    for plugin in getattr(client.wsgi_app, "_plugins", []) or []:
        ws = getattr(plugin, "workspace", None)
        if ws is not None:
            ws.close()


def settle(client: Any, timeout: float = 1800) -> dict[str, Any]:
    """/runs once every span is ready or failed, and every stored part has landed (no 409 left)."""
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        body = client.get(f"{API}/runs?limit=1000").get_json()
        spans = [s for r in body["runs"] for w in r["workers"] for s in w["spans"]]
        if spans and all(s["state"] in ("ready", "failed") for s in spans):
            if last is not None and len(spans) == last:
                return body  # type: ignore[no-any-return]
            last = len(spans)
        time.sleep(1.0)
    raise SystemExit("the spans did not settle")


def get(client: Any, url: str, out: dict[str, Any]) -> Any:
    """GET ``url`` (asked again while it answers 409 "computing"), recorded in ``out``; the parsed JSON or None."""
    for _ in range(600):
        r = client.get(f"{API}/{url}")
        if r.status_code != 409:
            break
        time.sleep(0.2)
    data = r.data
    if url.startswith("trace/file"):
        out[url] = [r.status_code, hashlib.sha256(data).hexdigest()]
        return None
    try:
        body = json.loads(data)
    except ValueError:
        body = data.decode("utf-8", "replace")
    out[url] = [r.status_code, body]
    return body if r.status_code == 200 else None


def join(route: str, query: str) -> str:
    return f"{route}{'&' if '?' in route else '?'}{query}"


def span_routes(client: Any, q: str, out: dict[str, Any]) -> None:
    """Every per-span route of the span ``q`` (``run=…&worker=…&span=…``)."""
    bodies = {route: get(client, join(route, q), out) for route in PER_SPAN}
    ops = bodies["operators?group_by=name"]
    if isinstance(ops, dict) and ops.get("rows"):
        name = ops["rows"][0].get("name")
        if isinstance(name, str):
            get(client, join(f"operators?group_by=name&name={quote(name)}", q), out)
    window = bodies["trace/window?width_px=400"]
    if isinstance(window, dict) and "t0" in window:
        t0, t1 = window["t0"], window["t1"]
        mid = (t0 + t1) / 2
        get(client, join(f"trace/window?width_px=800&start_us={t0}&end_us={mid}", q), out)
        get(client, join(f"trace/range?start_us={t0}&end_us={max(t1, t0 + 1)}", q), out)
        get(client, join(f"memory/events?start_us={t0}&end_us={mid}", q), out)
        get(client, join(f"memory/stats?start_us={t0}&end_us={mid}", q), out)
        ids = [i for t in window.get("tracks", []) for lane in t.get("lanes", []) for i in lane["events"]["id"]]
        for i in ids[:: max(1, len(ids) // 4)][:4]:
            get(client, join(f"trace/event?id={i}", q), out)
    exp = q.replace("run=", "exp_run=").replace("worker=", "exp_worker=").replace("span=", "exp_span=")
    diff = get(client, join("diff", f"{q}&{exp}"), out)
    if diff is not None:
        get(client, join("diff/node?path=0", f"{q}&{exp}"), out)


def record(logdir: Path, cache: Path, computed: bool) -> dict[str, Any]:
    """Every answer of one app on ``logdir`` (``computed``: the parse cache's stored views taken out first)."""
    if computed:
        for f in cache.glob("*/warm.*"):
            f.unlink()
        for part in cache.glob("*/part-*"):
            shutil.rmtree(part)
    client = app(logdir, cache)
    out: dict[str, Any] = {}
    try:
        body = settle(client)
        out["runs:states"] = sorted(f"{r['name']}|{w['name']}|{s['span']}|{s['state']}"
                                    for r in body["runs"] for w in r["workers"] for s in w["spans"])
        for r in body["runs"]:
            for w in r["workers"]:
                for s in w["spans"]:
                    if s["state"] == "ready":
                        span_routes(client, f"run={quote(r['name'])}&worker={quote(w['name'])}"
                                            f"&span={quote(str(s['span']))}", out)
            get(client, f"views?run={quote(r['name'])}", out)
            get(client, f"distributed?run={quote(r['name'])}&span=1", out)
            for snap in r.get("snapshots", []) or []:
                name = snap.get("name") if isinstance(snap, dict) else None
                if name:
                    get(client, f"snapshot/summary?run={quote(r['name'])}&snapshot={quote(name)}", out)
    finally:
        close(client)
    return out


def first_difference(a: Any, b: Any, path: str = "$") -> str:
    if type(a) is not type(b):
        return f"{path}: {type(a).__name__} {str(a)[:80]} != {type(b).__name__} {str(b)[:80]}"
    if isinstance(a, dict):
        if a.keys() != b.keys():
            return f"{path}: keys {sorted(set(a) ^ set(b))[:5]}"
        for k in a:
            if a[k] != b[k]:
                return first_difference(a[k], b[k], f"{path}.{k}")
    if isinstance(a, list):
        if len(a) != len(b):
            return f"{path}: length {len(a)} != {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            if x != y:
                return first_difference(x, y, f"{path}[{i}]")
    return f"{path}: {str(a)[:100]} != {str(b)[:100]}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    rec = sub.add_parser("record")
    rec.add_argument("out", type=Path)
    rec.add_argument("--logdir", type=Path, default=Path(tempfile.gettempdir()) / "compare_answers_logdir")
    cmp = sub.add_parser("compare")
    cmp.add_argument("a", type=Path)
    cmp.add_argument("b", type=Path)
    args = parser.parse_args(argv)
    if args.cmd == "record":
        logging.getLogger("tb_plugin").setLevel(logging.ERROR)  # the computed pass's entries lack their views
        import tb_plugin

        here = Path.cwd() / "tb_plugin"
        if here.is_dir() and here.resolve() != Path(tb_plugin.__file__).parent.resolve():
            raise SystemExit(f"run this from the folder of the code recorded: the loader processes' fork server "
                             f"imports tb_plugin from the current folder ({here}), this process from "
                             f"{Path(tb_plugin.__file__).parent}")
        build_logdir(args.logdir)
        cache = Path(tempfile.mkdtemp(prefix="compare_answers_cache_"))
        started = time.time()
        try:
            doc = {"code": tb_plugin.__file__, "logdir": str(args.logdir),
                   "stored": record(args.logdir, cache, computed=False),
                   "computed": record(args.logdir, cache, computed=True)}
        finally:
            shutil.rmtree(cache, ignore_errors=True)
        with gzip.open(args.out, "wt") as fh:
            json.dump(doc, fh)
        print(f"{len(doc['stored'])} + {len(doc['computed'])} answers from {doc['code']} in "
              f"{time.time() - started:.0f} s -> {args.out}")
        return 0
    with gzip.open(args.a, "rt") as fa, gzip.open(args.b, "rt") as fb:
        a, b = json.load(fa), json.load(fb)
    differ = 0
    total = 0
    for mode in ("stored", "computed"):
        keys = sorted(set(a[mode]) | set(b[mode]))
        total += len(keys)
        for url in keys:
            if a[mode].get(url) != b[mode].get(url):
                differ += 1
                print(f"{mode} {url}: {first_difference(a[mode].get(url), b[mode].get(url))}")
    ok = sum(1 for m in ("stored", "computed") for v in a[m].values() if isinstance(v, list) and v[0] == 200)
    print(f"{total} answers compared ({ok} of them 200), {differ} differ")
    return 1 if differ else 0


if __name__ == "__main__":
    raise SystemExit(main())
