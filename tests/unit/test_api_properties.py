"""Property-based API test: schemathesis generates requests from docs/api/openapi.yaml and the real TensorBoard app
answers them; every answer must be documented (status, content type, body schema) and none may be a 5xx.

Random strings rarely name a real span, so half the generated requests get their ``run``/``worker``/``span`` (and
the Diff's ``exp_*``) replaced by those of a real span of the logdir: a GPU trace, a 2-rank DDP job, a CPU-only
run, a trace with odd thread ids, a file that fails to load, and a copy of the DDP job with NaN and +-1e308 in its
times and args; the snapshot routes get ``run``/``snapshot`` of the recorded out-of-memory snapshot, a synthetic one
or a refused pickle. The other parameters stay generated.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.config import SchemathesisConfig

from tests.conftest import REAL_TRACES, REPO, SAMPLES, AppFactory, wait_until_settled, write_trace
from tests.snapshots import training, write
from tests.unit.test_ids import odd_ids_trace
from tests.unit.test_openapi import extreme_trace
from tests.unit.test_snapshot_api import aged

SPEC = REPO / "docs" / "api" / "openapi.yaml"
# A schema-valid request may still name an unknown span (404), one still loading (409) or one that failed to
# load (422); a 400 means the spec let through a value the server refuses, which is a mismatch to fix.
CONFIG = SchemathesisConfig.from_dict(
    {"checks": {"positive_data_acceptance": {"expected-statuses": ["2xx", 404, 409, 422]}}})


def _without_prefix_items(node: Any) -> Any:
    """The spec with each tuple (``prefixItems``, OpenAPI 3.1) as an array of its items' types and its length:
    schemathesis 4 rewrites ``prefixItems`` as a draft-4 ``items`` list for responses, then validates with a 2020-12
    validator, which refuses that schema. The positions themselves are checked by tests/unit/test_openapi.py (a
    2020-12 validator over real answers) and frontend/test/contract.test.ts."""
    if isinstance(node, list):
        return [_without_prefix_items(v) for v in node]
    if not isinstance(node, dict):
        return node
    out = {k: _without_prefix_items(v) for k, v in node.items()}
    if "prefixItems" in out:
        prefix = out.pop("prefixItems")
        out.pop("items", None)
        out.update(items={"anyOf": prefix}, minItems=len(prefix), maxItems=len(prefix))
    return out


SCHEMA = schemathesis.openapi.from_dict(_without_prefix_items(yaml.safe_load(SPEC.read_text(encoding="utf-8"))),
                                        config=CONFIG)
PATHS = sorted(SCHEMA.raw_schema["paths"])
EXAMPLES = 25


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, list[dict[str, str]]]]:
    root = tmp_path_factory.mktemp("api_properties")
    logdir = root / "logdir"
    for run, src in (("transformer", REAL_TRACES / "h200" / "transformer_bf16"),
                     ("ddp", REAL_TRACES / "h200" / "ddp_resnet50"), ("cpu_only", SAMPLES / "cpu_only")):
        shutil.copytree(src, logdir / run)
    write_trace(logdir / "odd" / "w.1.pt.trace.json", odd_ids_trace())
    write_trace(logdir / "broken" / "w.1.pt.trace.json", raw=b'{"traceEvents": [', gz=False)
    for src in (REAL_TRACES / "h200" / "ddp_resnet50").glob("*.gz"):
        write_trace(logdir / "extreme" / src.name, raw=extreme_trace(src), gz=False)
    shutil.copytree(SAMPLES / "memory_snapshot" / "oom", logdir / "oom")
    aged(write(training(steps=2).dump(), logdir / "broken" / "train.pickle"))
    aged(write({"segments": [], "device_traces": [[{"action": "alloc", "frames": [Path("/")]}]]},
               logdir / "broken" / "refused.pickle"))
    factory = AppFactory(root / "cache")
    client = factory(logdir)
    body = wait_until_settled(client, timeout=180, expect_spans=8)
    keys = [{"run": r["name"], "worker": w["name"], "span": s["span"]}
            for r in body["runs"] for w in r["workers"] for s in w["spans"]]
    keys += [{"run": r["name"], "snapshot": s["name"]} for r in body["runs"] for s in r["snapshots"]]
    assert len(keys) == 8 + 3
    yield client.wsgi_app, keys
    factory.close()


def _with_real_span(query: dict[str, Any], key: dict[str, str], other: dict[str, str]) -> dict[str, Any]:
    out = dict(query)
    for name, value in key.items():
        if name in out:
            out[name] = value
    for name, value in other.items():
        if f"exp_{name}" in out:
            out[f"exp_{name}"] = value
    return out


@pytest.mark.parametrize("path", PATHS)
def test_every_answer_is_documented_and_none_is_a_server_error(
        path: str, served: tuple[Any, list[dict[str, str]]]) -> None:
    app, keys = served
    operation = SCHEMA[path]["GET"]

    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(case=operation.as_strategy(), real=st.booleans(), key=st.sampled_from(keys),
           other=st.sampled_from(keys))
    def check(case: Any, real: bool, key: dict[str, str], other: dict[str, str]) -> None:
        if real and case.query is not None:
            case.query = _with_real_span(case.query, key, other)
        case.call_and_validate(app=app, headers={"Accept-Encoding": "identity"})

    check()
