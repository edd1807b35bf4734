"""Shared fixtures: where the real traces are, synthetic trace writers, and an in-process TensorBoard."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import outside_guard

REPO = Path(__file__).resolve().parent.parent
REAL_TRACES = REPO / "tests" / "data"  # real traces copied into the repository: see tests/data/README.md
SAMPLES = REPO / "samples"


def real_trace_files() -> list[Path]:
    return sorted(REAL_TRACES.glob("**/*.pt.trace.json*"))


def distinct_trace_files() -> list[Path]:
    """The real traces less the calibration corpus's repeats of a pair (``repeat_of`` in its manifest: the same
    program recorded again, which test_calibration reads); the sweeps over every trace's shape take one of each."""
    manifest = json.loads((REAL_TRACES / "calibration" / "MANIFEST.json").read_text())
    repeats = {p["pair"] for p in manifest["pairs"] if p.get("repeat_of")}
    return [f for f in real_trace_files() if f.relative_to(REAL_TRACES).parts[:2] not in
            {("calibration", pair) for pair in repeats}]


def sample_trace_files() -> list[Path]:
    return sorted(SAMPLES.glob("**/*.pt.trace.json*"))


def pytest_report_header(config: Any) -> str:
    return f"real traces: {REAL_TRACES} ({len(real_trace_files())} files); {outside_guard.describe()}"


PARSES_ENV = "PTP_TEST_PARSES"  # the session's folder of parsed real traces (see parsed_trace)


def pytest_configure(config: Any) -> None:
    outside_guard.install()
    if not hasattr(config, "workerinput") and PARSES_ENV not in os.environ:  # the controller (or a lone process):
        os.environ[PARSES_ENV] = tempfile.mkdtemp(prefix="ptp-parses-")  # its xdist workers inherit the folder
        config._ptp_parses = os.environ[PARSES_ENV]


def pytest_unconfigure(config: Any) -> None:
    folder = getattr(config, "_ptp_parses", None)
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)
        os.environ.pop(PARSES_ENV, None)


# make test hands pytest-xdist's workers one file at a time (--dist loadfile), in collection order
# (--no-loadscope-reorder). The files that take longest go first, so that the last files handed out are short ones
# and both workers finish together; measured on the 2-core machine (longest first: a quiet make test's durations,
# summed per file, less what a change cut since, measured alone). Only the order changes: every file still runs
# whole, on one worker. A file not listed keeps its place after these.
SLOWEST_FIRST = (
    "tests/unit/test_capture_job.py",
    "tests/browser/test_click_through.py",
    "tests/browser/test_shell.py",
    "tests/unit/test_warm_views.py",
    "tests/browser/test_trace_first_paint.py",
    "tests/browser/test_capture.py",
    "tests/browser/test_views.py",
    "tests/unit/test_loader.py",
    "tests/remote/test_scale_out_s3.py",
    "tests/browser/test_distributed_pages.py",
    "tests/browser/test_overview_diagnosis.py",
    "tests/browser/test_trace.py",
    "tests/unit/test_two_servers_one_cache.py",
    "tests/browser/test_memory_module.py",
    "tests/unit/test_gpu_insights.py",
    "tests/remote/test_azure.py",
    "tests/unit/test_hostile.py",
    "tests/browser/test_flame.py",
    "tests/browser/test_distributed_diff.py",
    "tests/unit/test_many_runs.py",
    "tests/unit/test_api_properties.py",
    "tests/unit/test_whatif.py",
    "tests/browser/test_history.py",
    "tests/browser/test_remote_azure.py",
    "tests/unit/test_cache_faults.py",
    "tests/unit/test_calibration.py",
    "tests/browser/test_trace_spawn.py",
    "tests/unit/test_cli.py",
    "tests/unit/test_scale_out_local.py",
    "tests/browser/test_gpu.py",
    "tests/browser/test_memory_categories_view.py",
    "tests/unit/test_openapi.py",
    "tests/unit/test_trace_properties.py",
    "tests/remote/test_s3.py",
    "tests/unit/test_diagnosis.py",
    "tests/browser/test_memory_snapshot.py",
    "tests/unit/test_snapshot_api.py",
    "tests/unit/test_code_size.py",
    "tests/browser/test_report.py",
    "tests/unit/test_sdk.py",
    "tests/unit/test_frontend_contract.py",
    "tests/browser/test_progressive_page.py",
    "tests/browser/test_gpu_counters.py",
    "tests/unit/test_api.py",
    "tests/unit/test_rewritten_runs.py",
)


def pytest_collection_modifyitems(session: Any, config: Any, items: list[Any]) -> None:
    """Order the files as :data:`SLOWEST_FIRST` says (a stable sort: a file's tests keep their order)."""
    rank = {name: i for i, name in enumerate(SLOWEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))


def pytest_sessionfinish(session: Any, exitstatus: int) -> None:
    """The suite's own process never imports torch (TensorBoard, the API and the CLI must not need it): tests that
    need a training job run it in a subprocess (tests/capture_job.py)."""
    if "torch" in sys.modules:
        print("\nERROR: a test imported torch into the test process; run training jobs in a subprocess",
              file=sys.stderr)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(scope="session")
def real_traces() -> Path:
    """The real traces in tests/data; absent means a broken checkout, so fail loudly, never skip."""
    if not real_trace_files():
        pytest.fail(f"real traces not found in {REAL_TRACES}")
    return REAL_TRACES


def raw_events(path: Path) -> list[dict[str, Any]]:
    """The ``traceEvents`` of a gzipped trace as the JSON has them: the independent side of a test's check."""
    with gzip.open(path) as fh:
        events: list[dict[str, Any]] = json.load(fh)["traceEvents"]
    return events


def parsed_trace(path: Path | str) -> Any:
    """``load_trace(path)`` of a real trace (tests/data, samples/: files nobody changes), parsed once per test session:
    the first call parses it and saves the parse (``model.tables.save``) in the session's folder, which the xdist
    workers share; every call maps it back (``model.tables.load``): the same tables, strings and metadata, as a
    model of its own with nothing computed on it yet. For tests of what the analyses compute from real traces,
    which would otherwise parse the same files again in every file and parametrised case; tests of the loader
    itself call ``load_trace``."""
    from tb_plugin.loader import load_trace
    from tb_plugin.model import tables

    source = Path(path).resolve()
    session = os.environ.get(PARSES_ENV)
    if session is None or not source.is_relative_to(REPO):
        return load_trace(str(source))
    stat = source.stat()
    rel = source.relative_to(REPO).as_posix().replace("/", "__")
    folder = Path(session) / f"{rel}.{stat.st_size}.{stat.st_mtime_ns}"
    if not (folder / "meta.json").is_file():
        building = folder.with_name(f".{folder.name}.{os.getpid()}")
        shutil.rmtree(building, ignore_errors=True)
        tables.save(load_trace(str(source)), building)
        try:
            building.rename(folder)  # whole, at once: another worker sees no half-written parse
        except OSError:  # another worker saved it first
            shutil.rmtree(building, ignore_errors=True)
    return tables.load(folder)


@pytest.fixture(scope="module")
def h200_transformer(real_traces: Path) -> tuple[Path, Any]:
    """The H200 bf16 transformer trace (a with_stack=True run): its path and loaded model."""
    from tb_plugin.loader import load_trace

    path = next((real_traces / "h200" / "transformer_bf16").glob("*.gz"))
    return path, load_trace(str(path))


def write_trace(path: Path, events: list[dict[str, Any]] | None = None, *, raw: bytes | None = None,
                gz: bool | None = None, **top: Any) -> Path:
    """Write a synthetic trace (a dict with traceEvents, or exact ``raw`` bytes), gzip when the name says so."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = raw if raw is not None else json.dumps({"traceEvents": events or [], **top}).encode()
    if gz if gz is not None else path.name.endswith(".gz"):
        data = gzip.compress(data)
    path.write_bytes(data)
    old = time.time() - 60  # older than the catalog's settle time, as a finished file is
    os.utime(path, (old, old))
    return path


def cpu_op(name: str, ts: float, dur: float, tid: int = 1, **args: Any) -> dict[str, Any]:
    return {"ph": "X", "cat": "cpu_op", "name": name, "pid": 100, "tid": tid, "ts": ts, "dur": dur, "args": args}


class AppFactory:
    """Builds the real TensorBoard WSGI app (core plugin + ours) on a logdir, as test clients; ``close`` stops the
    plugin's worker processes and threads."""

    def __init__(self, cache_dir: Path) -> None:
        self.cache_dir = cache_dir
        self.apps: list[Any] = []

    def __call__(self, logdir: Path | str | None = None, **flags: Any) -> Any:
        from tensorboard import program
        from tensorboard.backend import application
        from tensorboard.plugins.core import core_plugin
        from werkzeug.test import Client

        from tb_plugin.plugin import ProfilerLoader

        tb = program.TensorBoard(plugins=[core_plugin.CorePluginLoader(), ProfilerLoader()])
        options: dict[str, Any] = {"load_fast": "false", "profiler_cache_dir": str(self.cache_dir),
                                   "profiler_rescan_interval": 0.5}
        if logdir is not None:
            options["logdir"] = str(logdir)
        options.update(flags)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tb.configure(**options)
            app = application.TensorBoardWSGIApp(tb.flags, tb.plugin_loaders)
        self.apps.append(app)
        client = Client(app)
        client.wsgi_app = app
        return client

    def close(self) -> None:
        for app in self.apps:
            for plugin in getattr(app, "_plugins", []) or []:
                ws = getattr(plugin, "workspace", None)
                if ws is not None:
                    ws.close()


def without_stored_views(cache_dir: Path) -> None:
    """Make a parse cache what an older version left: no stored first views (api/warm.py) in any entry, so that a
    server started on it computes them (tests of how the server computes an answer)."""
    for f in cache_dir.glob("*/warm.*"):
        f.unlink()


def computing_server(factory: AppFactory, logdir: Path, spans: int) -> Any:
    """A test client of a server whose traces are loaded (``spans`` of them) from entries without stored views."""
    wait_until_settled(factory(logdir), expect_spans=spans)
    without_stored_views(factory.cache_dir)
    client = factory(logdir)
    wait_until_settled(client, expect_spans=spans)
    return client


@pytest.fixture
def tensorboard_app(tmp_path: Path) -> Iterator[AppFactory]:
    """A factory of test clients of the real TensorBoard app (see :class:`AppFactory`)."""
    factory = AppFactory(tmp_path / "cache")
    yield factory
    factory.close()


API = "/data/plugin/pytorch_profiler"


def wait_until_settled(client: Any, timeout: float = 60.0, expect_spans: int | None = None) -> dict[str, Any]:
    """Poll /runs until every span is ready or failed (and, if given, that many spans exist)."""
    deadline = time.time() + timeout
    body: dict[str, Any] = {}
    while time.time() < deadline:
        body = client.get(f"{API}/runs").get_json()
        spans = [s for r in body["runs"] for w in r["workers"] for s in w["spans"]]
        settled = spans and all(s["state"] in ("ready", "failed") for s in spans)
        if settled and (expect_spans is None or len(spans) == expect_spans):
            return body
        time.sleep(0.1)
    raise AssertionError(f"spans did not settle in {timeout}s: {json.dumps(body)[:2000]}")


def spans_by_file(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {s["file"]: {**s, "run": r["name"], "worker": w["name"]}
            for r in body["runs"] for w in r["workers"] for s in w["spans"]}


# Every per-span route, with default parameters (some need more: /trace/range a range, /trace/event an id).
SPAN_ROUTES = ("summary", "overview", "operators", "kernels", "memory/curve", "memory/events", "memory/stats",
               "memory_categories",
               "modules", "modules/timeline", "trace/window", "trace/search?q=a", "trace/file", "idle", "launch_stats",
               "queue_length", "memory_bandwidth", "kernel_sequences", "critical_path", "annotations")


def every_span_route(client: Any, body: dict[str, Any]) -> dict[str, int]:
    """GET every per-span route (and /views, /distributed, /trace/range, /trace/event) of every span in a /runs
    answer; returns {url: status}. What a property test asserts over: no 5xx, whatever the trace."""
    statuses: dict[str, int] = {}

    def get(url: str) -> Any:
        r = client.get(f"{API}/{url}")
        statuses[url] = r.status_code
        return r

    for run in body["runs"]:
        get(f"views?run={run['name']}")
        get(f"distributed?run={run['name']}&span=1")
        for worker in run["workers"]:
            for span in worker["spans"]:
                q = f"run={run['name']}&worker={worker['name']}&span={span['span']}"
                for route in SPAN_ROUTES:
                    get(f"{route}{'&' if '?' in route else '?'}{q}")
                w = get(f"trace/window?{q}&width_px=400")
                if w.status_code == 200:
                    t0, t1 = w.get_json()["t0"], w.get_json()["t1"]
                    get(f"trace/range?{q}&start_us={t0}&end_us={max(t1, t0 + 1)}")
                    ids = [e for t in w.get_json()["tracks"] for lane in t["lanes"] for e in lane["events"]["id"]]
                    if ids:
                        get(f"trace/event?{q}&id={ids[0]}")
    return statuses


@pytest.fixture
def usual_builds(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The builds the loader's usual path made (one outline decode, then its parts): the parts each was given."""
    import tb_plugin.loader as loader
    from tb_plugin.loader import columns

    usual: list[int] = []
    real = columns.build_model

    def spy(doc: Any, source: str, progress: Any = None, parts: int = 1) -> Any:
        usual.append(parts)
        return real(doc, source, progress, parts=parts)

    monkeypatch.setattr(loader, "build_model", spy)
    return usual
