"""docs/api/openapi.yaml is a valid OpenAPI document and the real responses match it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import jsonschema_rs
import pytest
import yaml
from openapi_spec_validator import validate

from tests.conftest import API, REPO, wait_until_settled

SPEC_PATH = REPO / "docs" / "api" / "openapi.yaml"


@pytest.fixture(scope="module")
def spec() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(SPEC_PATH.read_text())
    return doc


# (id of the spec, path, status) → the spec (kept, so that its id is not reused) and the validators of that answer
_VALIDATORS: dict[tuple[int, str, int], tuple[dict[str, Any], Any, jsonschema.Draft202012Validator]] = {}


def _validators(spec: dict[str, Any], path: str, status: int) -> tuple[Any, jsonschema.Draft202012Validator]:
    """The validators of the response schema the spec gives for ``GET path`` with ``status`` (jsonschema-rs's, and
    python-jsonschema's for its error message), the schema checked against the 2020-12 meta-schema once."""
    key = (id(spec), path, status)
    if key not in _VALIDATORS:
        response = spec["paths"][path]["get"]["responses"][str(status)]
        if "$ref" in response:
            response = spec["components"]["responses"][response["$ref"].rsplit("/", 1)[-1]]
        schema = response["content"]["application/json"]["schema"]
        resolver_doc = {**spec, **schema}
        jsonschema.Draft202012Validator.check_schema(resolver_doc)
        _VALIDATORS[key] = (spec, jsonschema_rs.Draft202012Validator(resolver_doc),
                            jsonschema.Draft202012Validator(resolver_doc))
    return _VALIDATORS[key][1:]


def check(spec: dict[str, Any], path: str, status: int, body: Any) -> None:
    """Validate ``body`` against the response schema the spec gives for ``GET path`` with ``status``: by
    jsonschema-rs (the same Draft 2020-12, 50-100 times faster than python-jsonschema on these answers, which
    took most of this file's time; the two agreed on 4,400 real and mutated answers), and an invalid one by
    python-jsonschema too, for its message."""
    fast, full = _validators(spec, path, status)
    if fast.is_valid(body):
        return
    error = jsonschema.exceptions.best_match(full.iter_errors(body))
    if error is not None:
        raise error
    raise AssertionError(f"{path} {status}: " + "; ".join(str(e) for e in fast.iter_errors(body)))


def test_spec_is_valid_openapi(spec: dict[str, Any]) -> None:
    validate(spec)
    # Every JSON route the plugin serves is documented.
    from tb_plugin.api.routes import Api

    served = Api(workspace=None, plugin_name="pytorch_profiler").apps()  # type: ignore[arg-type]
    json_routes = {r for r in served if not r.endswith("*") and not r.endswith(".js")}
    assert "/trace/file" in json_routes
    assert json_routes <= set(spec["paths"]), json_routes - set(spec["paths"])


def test_responses_match_the_spec(spec: dict[str, Any], tensorboard_app: Any, real_traces: Path,
                                  tmp_path: Path) -> None:
    logdir = tmp_path / "ld"
    (logdir / "bad").mkdir(parents=True)
    (logdir / "bad" / "x.1.pt.trace.json").write_text("{")
    for sub in ("ddp_resnet50", "transformer_bf16"):
        (logdir / sub).symlink_to(real_traces / "h200" / sub)
    client = tensorboard_app(logdir)
    body = wait_until_settled(client, expect_spans=4)
    check(spec, "/runs", 200, body)
    page = client.get(f"{API}/runs?limit=1&q=ddp&run=bad").get_json()  # a page: the failed run's span in attention
    check(spec, "/runs", 200, page)
    assert {r["name"] for r in page["runs"]} == {"bad", "ddp_resnet50", page["newest"]}  # the run asked, the page
    assert page["attention"][0]["run"] == "bad" and page["states"]["failed"] == 1
    check(spec, "/views", 200, client.get(f"{API}/views?run=ddp_resnet50").get_json())
    for worker in ("rank0", "rank1"):
        r = client.get(f"{API}/summary?run=ddp_resnet50&worker={worker}&span=1")
        check(spec, "/summary", 200, r.get_json())
        assert r.get_json()["metadata"]["distributed"]["world_size"] == 2
        # every rank's Overview knows the job: rank 1 is the straggler, rank 0 waits for it (the GPUs set the pace)
        o = client.get(f"{API}/overview?run=ddp_resnet50&worker={worker}&span=1").get_json()
        check(spec, "/overview", 200, o)
        assert o["context"]["job"]["straggler_rank"] == 1
        kinds = [r["kind"] for r in o["recommendations"]]
        assert o["verdict"]["kind"] == "gpu_bound" and {"rank0": "straggler_wait", "rank1": "straggler"}[worker] in kinds
        # MFU per rank and for the job, from the span's rank summaries
        assert [r["worker"] for r in o["mfu"]["job"]["ranks"]] == ["rank0", "rank1"] and o["mfu"]["ratio"] > 0
    q = "run=transformer_bf16&worker=vm_562&span=1"
    check(spec, "/overview", 200, client.get(f"{API}/overview?{q}").get_json())
    check(spec, "/sources", 200, client.get(f"{API}/sources?{q}").get_json())
    for group in ("name", "name_shape", "name_stack"):
        check(spec, "/operators", 200, client.get(f"{API}/operators?{q}&group_by={group}").get_json())
    for group in ("name", "name_op"):
        check(spec, "/kernels", 200, client.get(f"{API}/kernels?{q}&group_by={group}").get_json())
    for group in ("kernel", "operator"):
        roof = client.get(f"{API}/roofline?{q}&group_by={group}").get_json()
        check(spec, "/roofline", 200, roof)
        assert roof["device"]["key"] == "H200-SXM" and roof["points"] and roof["roofs"]["compute"]
    custom = client.get(f"{API}/roofline?{q}&peaks=device%3DH100-SXM%2Cbw%3D1000&limit=3").get_json()
    check(spec, "/roofline", 200, custom)
    assert custom["roofs"]["bandwidth_bytes_per_s"] == 1e12 and len(custom["points"]) == 3
    bad = client.get(f"{API}/roofline?{q}&peaks=bf16%3Dfast")
    assert bad.status_code == 400 and "bf16='fast' is not a number" in bad.get_json()["error"]
    check(spec, "/trace/window", 200, client.get(f"{API}/trace/window?{q}&width_px=800").get_json())
    for route in ("memory/curve", "memory/events", "memory/stats", "modules", "modules/timeline"):
        check(spec, "/" + route, 200, client.get(f"{API}/{route}?{q}").get_json())
    page = client.get(f"{API}/memory/events?{q}&limit=5&sort=lifetime&order=desc&q=mm").get_json()
    check(spec, "/memory/events", 200, page)
    assert len(page["rows"]) == 5 and page["total"] > 5 and page["sort"] == "lifetime"
    peak = client.get(f"{API}/memory/curve?{q}").get_json()["devices"]["GPU0"]["peak_time_us"]
    live = client.get(f"{API}/memory/events?{q}&at_us={peak!r}&device=GPU0&limit=3").get_json()
    check(spec, "/memory/events", 200, live)
    assert len(live["rows"]) == 3 and live["allocated_bytes"] > 0 and live["unfiltered"] > 3
    check(spec, "/distributed", 200, client.get(f"{API}/distributed?run=ddp_resnet50&span=1").get_json())
    d = "run=ddp_resnet50&worker=rank0&span=1&exp_run=ddp_resnet50&exp_worker=rank1&exp_span=1"
    check(spec, "/diff", 200, client.get(f"{API}/diff?{d}").get_json())
    check(spec, "/diff/node", 200, client.get(f"{API}/diff/node?{d}&path=0-1").get_json())
    assert client.get(f"{API}/diff/node?{d}&path=0-999").status_code == 404
    w = client.get(f"{API}/trace/window?{q}&width_px=100").get_json()
    check(spec, "/trace/range", 200, client.get(f"{API}/trace/range?{q}&start_us={w['t0']}&end_us={w['t1']}").get_json())
    hits = client.get(f"{API}/trace/search?{q}&q=mm&limit=3").get_json()
    check(spec, "/trace/search", 200, hits)
    check(spec, "/trace/event", 200, client.get(f"{API}/trace/event?{q}&id={hits['items'][0]['id']}").get_json())
    for url, status in ((f"{API}/summary?run=bad&worker=x&span=1", 422), (f"{API}/summary?run=bad", 400),
                        (f"{API}/summary?run=zzz&worker=x&span=1", 404), (f"{API}/views?run=zzz", 404)):
        r = client.get(url)
        assert r.status_code == status
        check(spec, url.split("?")[0][len(API):], status, r.get_json())


GPU_ROUTES = ("idle", "launch_stats", "queue_length", "memory_bandwidth", "kernel_sequences", "critical_path",
              "annotations")


def test_gpu_insight_routes_match_the_spec(spec: dict[str, Any], tensorboard_app: Any, real_traces: Path,
                                           tmp_path: Path) -> None:
    """Every GPU insight on a 2026 and a 2021 trace and on a CPU-only run (empty answers, never an error)."""
    from tests.conftest import SAMPLES

    logdir = tmp_path / "ld"
    logdir.mkdir()
    (logdir / "bf16").symlink_to(real_traces / "h200" / "transformer_bf16")
    (logdir / "v100").symlink_to(real_traces / "kineto_v100" / "resnet50_num_workers_0")
    (logdir / "cpu").symlink_to(SAMPLES / "cpu_only")
    client = tensorboard_app(logdir)
    body = wait_until_settled(client, expect_spans=4)
    for run in body["runs"]:
        worker = run["workers"][0]["name"]
        q = f"run={run['name']}&worker={worker}&span=1"
        answers = {}
        for route in GPU_ROUTES:
            r = client.get(f"{API}/{route}?{q}")
            assert r.status_code == 200, (route, run["name"], r.get_json())
            check(spec, f"/{route}", 200, r.get_json())
            answers[route] = r.get_json()
        if run["name"] == "cpu":
            assert answers["idle"]["streams"] == [] and answers["queue_length"]["streams"] == []
            assert answers["launch_stats"]["summary"]["kernels"] == 0
        else:
            assert answers["idle"]["streams"] and answers["launch_stats"]["rows"]
            assert answers["kernel_sequences"]["sequences"]
        steps = answers["critical_path"]["steps"]
        last = client.get(f"{API}/critical_path?{q}&step={steps[-1]}").get_json()
        assert last["step"] == steps[-1]
        r = client.get(f"{API}/critical_path?{q}&step=nope")
        assert r.status_code == 404
        check(spec, "/critical_path", 404, r.get_json())
        if run["name"] == "bf16":  # its record_function regions are offered; one is walked, and a time range
            offered = [a["name"] for a in answers["critical_path"]["annotations"]]
            assert {"forward", "backward", "optimizer"} <= set(offered)
            b = client.get(f"{API}/critical_path?{q}&annotation=backward&occurrence=2").get_json()
            check(spec, "/critical_path", 200, b)
            assert b["scope"] == {"kind": "annotation", "label": "backward #2"} and b["step"] is None
            mid = (b["start_us"] + b["end_us"]) / 2
            rng = client.get(f"{API}/critical_path?{q}&start_us={b['start_us']}&end_us={mid}").get_json()
            check(spec, "/critical_path", 200, rng)
            assert rng["scope"]["kind"] == "range" and rng["duration_us"] == pytest.approx(mid - b["start_us"])
            # a range wins over an annotation, an annotation over a step; a missing bound is the trace's
            both = client.get(f"{API}/critical_path?{q}&step=3&annotation=backward&occurrence=2").get_json()
            assert both["scope"]["label"] == "backward #2"
            tail = client.get(f"{API}/critical_path?{q}&annotation=backward&start_us={mid}").get_json()
            assert tail["scope"]["kind"] == "range" and tail["start_us"] == mid and tail["end_us"] > b["end_us"]
            for bad in ("end_us=nan", "annotation=backward&occurrence=0"):
                r = client.get(f"{API}/critical_path?{q}&{bad}")
                assert r.status_code == 400, bad
                check(spec, "/critical_path", 400, r.get_json())
            assert client.get(f"{API}/critical_path?{q}&annotation=backward&occurrence=99").status_code == 404
    assert client.get(f"{API}/kernel_sequences?run=bf16&worker=vm_562&span=1&length=1").status_code == 400


def extreme_trace(src: Path, seed: int = 1) -> bytes:
    """A real trace with some times and numeric args made extreme: NaN (written as the bare token, as some Kineto
    versions do), ``1e308`` and ``-1e308``. Every answer on it must still be a documented one (a sum of such times
    used to be infinite, and infinity and NaN go out as ``null`` where the spec says number).

    Made once per test session (this file and tests/unit/test_api_properties.py write the same ones): kept in the
    session's folder of parsed traces (``tests.conftest.PARSES_ENV``), which the xdist workers share."""
    import os

    from tests.conftest import PARSES_ENV

    session = os.environ.get(PARSES_ENV)
    if session is None or not src.resolve().is_relative_to(REPO):
        return _extreme_trace(src, seed)
    stat = src.stat()
    name = src.resolve().relative_to(REPO).as_posix().replace("/", "__")
    kept = Path(session) / f"extreme.{name}.{stat.st_size}.{stat.st_mtime_ns}.{seed}"
    if not kept.is_file():
        building = kept.with_name(f".{kept.name}.{os.getpid()}")
        building.write_bytes(_extreme_trace(src, seed))
        os.replace(building, kept)  # whole, at once: another worker never reads half of it
    return kept.read_bytes()


def _extreme_trace(src: Path, seed: int) -> bytes:
    import gzip
    import json
    import random

    doc = json.loads(gzip.decompress(src.read_bytes()))
    rnd = random.Random(seed)
    extremes = (float("nan"), 1e308, -1e308)
    for event in doc["traceEvents"]:
        if event.get("ph") not in ("X", "i"):
            continue
        r = rnd.random()
        if r < 0.06:
            event["dur" if r < 0.04 else "ts"] = extremes[int(r * 1000) % 3]
        args = event.get("args") or {}
        for key, value in list(args.items()):
            if isinstance(value, (int, float)) and not isinstance(value, bool) and rnd.random() < 0.1:
                args[key] = rnd.choice(extremes)
    return gzip.compress(json.dumps(doc).encode(), compresslevel=1)


@pytest.mark.slow  # 40-110 s on 2 cores: make test runs it, make test-fast leaves it out
def test_answers_on_nan_and_1e308_traces_match_the_spec(spec: dict[str, Any], tensorboard_app: Any,
                                                         real_traces: Path, tmp_path: Path) -> None:
    """Every route on traces with NaN and +-1e308 times and args answers as documented: numbers stay numbers."""
    from tests.conftest import SPAN_ROUTES, write_trace

    logdir = tmp_path / "ld"
    for src in [*(real_traces / "h200" / "ddp_resnet50").glob("*.gz"),
                *(real_traces / "h200" / "transformer_bf16").glob("*.gz")]:
        write_trace(logdir / f"extreme_{src.parent.name}" / src.name, raw=extreme_trace(src), gz=False)
    client = tensorboard_app(logdir)
    body = wait_until_settled(client, expect_spans=3, timeout=120)
    checked = 0
    for run in body["runs"]:
        for worker in run["workers"]:
            span = worker["spans"][0]
            assert span["state"] == "ready", span
            q = f"run={run['name']}&worker={worker['name']}&span={span['span']}"
            routes = [r for r in SPAN_ROUTES if r != "trace/file"] + [
                "flamegraph", "trace/window?width_px=300", f"distributed?run={run['name']}&span=1&x=1",
                f"diff?exp_run={run['name']}&exp_worker={worker['name']}&exp_span=1", f"views?run={run['name']}"]
            for route in routes:
                r = client.get(f"{API}/{route}{'&' if '?' in route else '?'}{q}")
                check(spec, "/" + route.split("?")[0], r.status_code, r.get_json())
                checked += 1
    assert checked == 3 * 24
