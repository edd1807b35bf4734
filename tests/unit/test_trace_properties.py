"""Property-based traces: hypothesis writes traces with arbitrary field types, ids, nesting and shapes (what files
from the wider world, or hostile ones, hold). Loading either succeeds or fails with a one-line reason naming the
file, and no route answers a 5xx for any span that results."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from tb_plugin.loader import TraceLoadError, load_bytes
from tests.conftest import API, AppFactory, every_span_route, write_trace

CATEGORIES = ["cpu_op", "Operator", "user_annotation", "gpu_user_annotation", "python_function", "cuda_runtime",
              "Runtime", "cuda_driver", "kernel", "Kernel", "gpu_memcpy", "Memcpy", "gpu_memset", "ac2g",
              "cpu_instant_event", "Trace", "mtia_ccp_events", "xpu_runtime", "overhead", "fwdbwd"]
PHASES = ["X", "i", "I", "s", "f", "t", "M", "B", "E"]

scalars = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(2**70), max_value=2**70),
                    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=12))
json_values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                             st.dictionaries(st.text(max_size=6), inner, max_size=3)),
                           max_leaves=8)
ids = st.one_of(st.integers(min_value=-(2**65), max_value=2**65), st.sampled_from([0, 1, 7, -1, -549452224]),
                st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=8), st.none())
times = st.one_of(st.floats(min_value=0, max_value=1e6), st.integers(min_value=-10, max_value=10**6),
                  st.sampled_from(["x", "12", None, "inf", "N/A"]))
ARG_KEYS = ["External id", "correlation", "device", "stream", "Input Dims", "Input type", "Call stack",
            "Collective name", "Addr", "Bytes", "Total Allocated", "Device Type", "Device Id", "Python id",
            "Python parent id", "Sequence number", "name", "labels", "sort_index", "est. achieved occupancy %"]
args = st.one_of(st.dictionaries(st.sampled_from(ARG_KEYS), json_values, max_size=6), json_values)


@st.composite
def events(draw: st.DrawFn) -> Any:
    event: dict[str, Any] = {
        "ph": draw(st.one_of(st.sampled_from(PHASES), scalars)),
        "cat": draw(st.one_of(st.sampled_from(CATEGORIES), scalars)),
        "name": draw(st.one_of(st.sampled_from(["ProfilerStep#1", "aten::mm", "[memory]", "nccl:all_reduce",
                                                "cudaLaunchKernel", "thread_name"]), scalars)),
        "pid": draw(ids), "tid": draw(ids), "ts": draw(times), "dur": draw(times), "args": draw(args),
    }
    for key in draw(st.lists(st.sampled_from(list(event)), max_size=3)):
        event.pop(key, None)  # fields go missing too
    return draw(st.one_of(st.just(event), json_values)) if draw(st.integers(0, 9)) == 0 else event


documents = st.one_of(
    st.builds(lambda evs, extra: {"traceEvents": evs, **extra}, st.lists(events(), max_size=25),
              st.dictionaries(st.sampled_from(["deviceProperties", "distributedInfo", "schemaVersion",
                                               "baseTimeNanoseconds", "displayTimeUnit"]), json_values, max_size=3)),
    st.lists(events(), max_size=10),  # a bare array of events
    json_values,  # anything else JSON can be
)


def encode(doc: Any) -> bytes:
    return json.dumps(doc, allow_nan=False).encode()


def reason_is_one_line_naming_the_file(err: TraceLoadError, name: str) -> bool:
    text = str(err)
    return text.startswith(f"{name}:") and "\n" not in text and "Traceback" not in text


def every_view(model: Any) -> None:
    """Call every analysis a route calls, with default parameters (what a 5xx would come from)."""
    from tb_plugin.analysis import kernels, operators
    from tb_plugin.analysis.diff import diff_node, diff_summary
    from tb_plugin.analysis.distributed import distributed
    from tb_plugin.analysis.memory import memory_curve, memory_events, memory_statistics
    from tb_plugin.analysis.modules import module_timeline, module_view
    from tb_plugin.analysis.overview import overview
    from tb_plugin.analysis.summary import summary
    from tb_plugin.analysis.views import available_views
    from tb_plugin.timeline.details import event_details, range_summary, search
    from tb_plugin.timeline.index import timeline_index
    from tb_plugin.timeline.window import window

    available_views([model])
    summary(model)
    overview(model)
    for group in ("name", "name_shape", "name_stack"):
        operators.operator_table(model, group)
    operators.device_time_totals(model)
    for group in ("name", "name_op"):
        kernels.kernel_table(model, group)
    kernels.tensor_core_share(model)
    memory_curve(model, 4000)
    memory_events(model, None, None, "")
    memory_statistics(model, None, None)
    module_view(model)
    module_timeline(model, 1000)
    distributed([("w", model), ("v", model)])
    diff_summary(model, model)
    diff_node(model, model, "0")
    index = timeline_index(model)
    t0, t1 = index.t_min, max(index.t_max, index.t_min + 1.0)
    answer = window(model, t0, t1, 800, frozenset())
    range_summary(model, t0, t1, None)
    search(model, "a", 0, 100)
    for track in answer["tracks"]:
        for lane in track["lanes"]:
            for row in lane["events"]["id"][:3]:
                event_details(model, row)


@settings(max_examples=300, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(doc=documents)
def test_loading_succeeds_or_names_the_reason_and_every_view_answers(doc: Any) -> None:
    name = "w.1.pt.trace.json"
    try:
        model = load_bytes(encode(doc), name)
    except TraceLoadError as err:
        assert reason_is_one_line_naming_the_file(err, name), str(err)
        return
    for table, cols in model.tables.items():  # every table is whole: equal columns, rows that exist
        assert len({len(c) for c in cols.values()}) <= 1, table
        if "row" in cols and len(cols["row"]):
            assert int(cols["row"].min()) >= 0 and int(cols["row"].max()) < model.n_events, table
    codes = [c for cols in model.tables.values() for c in cols.values() if c.dtype.kind == "i" and c.itemsize == 4]
    assert all(len(c) == 0 or int(c.max()) < len(model.strings) for c in codes)  # string codes resolve
    every_view(model)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, Path]]:
    root = tmp_path_factory.mktemp("trace_properties")
    (root / "logdir").mkdir()
    factory = AppFactory(root / "cache")
    client = factory(root / "logdir", profiler_rescan_interval=0.05)
    yield client, root / "logdir"
    factory.close()


def settle(client: Any, run: str, count: int, timeout: float = 60.0) -> dict[str, Any]:
    deadline = time.time() + timeout
    while time.time() < deadline:
        body = client.get(f"{API}/runs").get_json()
        mine = [r for r in body["runs"] if r["name"] == run]
        spans = [s for r in mine for w in r["workers"] for s in w["spans"]]
        if len(spans) == count and all(s["state"] in ("ready", "failed") for s in spans):
            return {**body, "runs": mine}
        time.sleep(0.1)
    raise AssertionError(f"run {run} did not settle")


COUNTER = iter(range(10**6))


@settings(max_examples=6, phases=[Phase.explicit, Phase.generate], deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(docs=st.lists(documents, min_size=3, max_size=3))
def test_no_route_answers_a_server_error_for_any_span(server: tuple[Any, Path], docs: list[Any]) -> None:
    client, logdir = server
    run = f"ex{next(COUNTER)}"
    for n, doc in enumerate(docs):
        (logdir / run).mkdir(parents=True, exist_ok=True)
        write_trace(logdir / run / f"w{n}.1.pt.trace.json", raw=encode(doc), gz=False)
    body = settle(client, run, len(docs))
    for span in (s for r in body["runs"] for w in r["workers"] for s in w["spans"]):
        if span["state"] == "failed":
            assert span["error"].startswith(span["file"]) and "\n" not in span["error"], span["error"]
    statuses = every_span_route(client, body)
    assert {url: s for url, s in statuses.items() if s >= 500} == {}
