"""The capture routes of the real TensorBoard app: off by default (and saying so), the POST refused unless it comes
from the page (its header, JSON, this machine's Host, same origin), for a run the catalog listed, with whitelisted
options of bounded size; a valid request writes one file into the run's .capture/ and nothing else; a folder
that cannot be written (not a folder, a full disk) is a 403/507 naming it; the answers match the OpenAPI file."""

from __future__ import annotations

import errno
import re
import time
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from tb_plugin.capture import folder as folder_module
from tests.conftest import API, REPO, cpu_op, wait_until_settled, write_trace

HEADERS = {"X-PTP-Capture": "1"}
SPEC = yaml.safe_load((REPO / "docs" / "api" / "openapi.yaml").read_text())


def schema_check(body: Any, name: str) -> None:
    jsonschema.validate(body, {**SPEC, "$ref": f"#/components/schemas/{name}"}, cls=jsonschema.Draft202012Validator)


def every_file(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


@pytest.fixture
def logdir(tmp_path: Path) -> Path:
    root = tmp_path / "logdir"
    write_trace(root / "traced" / "rank0.1.pt.trace.json", [cpu_op("aten::mm", 0, 10)])
    return root


def post(client: Any, run: str, body: Any, headers: dict[str, str] | None = None, **kw: Any) -> Any:
    return client.post(f"{API}/capture?run={run}", json=body, headers=HEADERS if headers is None else headers, **kw)


def test_capture_is_off_unless_the_server_allows_it(tensorboard_app: Any, logdir: Path) -> None:
    client = tensorboard_app(logdir)
    wait_until_settled(client, expect_spans=1)
    info = client.get(f"{API}/capture").get_json()
    schema_check(info, "CaptureInfo")
    assert info["enabled"] is False and "--profiler_capture" in info["message"]
    assert info["targets"] == [{"run": "traced", "listening": 0, "heard_s": None}] and info["job"] is None
    refused = post(client, "traced", {"steps": 3})
    assert refused.status_code == 403 and refused.get_json()["error"] == info["message"]
    assert every_file(logdir) == ["traced/rank0.1.pt.trace.json"]  # nothing written


def test_a_request_from_the_page_writes_one_file_into_capture(tensorboard_app: Any, logdir: Path) -> None:
    client = tensorboard_app(logdir, profiler_capture=True)
    wait_until_settled(client, expect_spans=1)
    made = post(client, "traced", {"steps": 4, "activities": ["cpu"], "with_stack": True, "deadline_s": 2})
    assert made.status_code == 202, made.get_json()
    answer = made.get_json()
    schema_check(answer, "CaptureProgress")
    assert re.fullmatch(r"[0-9a-f]{16}", answer["id"]) and answer["state"] == "pending" and not answer["done"]
    assert answer["options"] == {"activities": ["cpu"], "record_shapes": False, "profile_memory": False,
                                 "with_stack": True}
    assert every_file(logdir) == [f"traced/.capture/request-{answer['id']}.json", "traced/rank0.1.pt.trace.json"]
    time.sleep(2.2)  # past the 2 s deadline, and nobody listens
    status = client.get(f"{API}/capture/status?run=traced&id={answer['id']}").get_json()
    schema_check(status, "CaptureProgress")
    assert (status["state"], status["done"], status["summary"]) == ("no_job", True,
                                                                   "no job picked the request up within 2 s")
    assert status["message"].startswith(f"No job is listening in {logdir / 'traced'}: ")
    other = post(client, "traced", {"steps": 1, "deadline_s": 2}).get_json()["id"]
    assert other != answer["id"]  # random ids: a second request is a second file
    # the catalog never takes the request files for traces or runs
    time.sleep(1.0)
    assert [r["name"] for r in client.get(f"{API}/runs").get_json()["runs"]] == ["traced"]


@pytest.mark.parametrize(("kwargs", "status", "error"), [
    ({"headers": {}}, 403, "must come from the plugin's page (header X-PTP-Capture)"),
    ({"headers": {**HEADERS, "Host": "evil.example:6006"}}, 403, "only at an address of this machine"),
    ({"headers": {**HEADERS, "Origin": "http://evil.example"}}, 403, "from another site is refused"),
    ({"headers": {**HEADERS, "Sec-Fetch-Site": "cross-site"}}, 403, "from another site is refused"),
    ({"body": None, "data": "steps=3", "content_type": "application/x-www-form-urlencoded"}, 415, "is JSON"),
    ({"body": None, "data": "{", "content_type": "application/json"}, 400, "not valid JSON"),
    ({"body": None, "data": "[1]", "content_type": "application/json"}, 400, "must be a JSON object"),
    ({"body": {"steps": 3, "pad": "x" * 5000}}, 413, "at most 4096 bytes"),
    ({"body": {"steps": 0}}, 400, "'steps' must be a whole number from 1 to 50"),
    ({"body": {"steps": 3, "activities": ["cpu", "rm -rf"]}}, 400, "unknown activity 'rm -rf'"),
    ({"body": {"steps": 3, "with_stack": 1}}, 400, "'with_stack' must be true or false"),
    ({"body": {"steps": 3, "deadline_s": 86400}}, 400, "'deadline_s'"),
    ({"body": {"steps": 3, "on_trace_ready": "os.system"}}, 400, "unknown field 'on_trace_ready'"),
    ({"run": "../traced"}, 404, "unknown run '../traced'"),
    ({"run": "traced/.capture"}, 404, "unknown run"),
])
def test_refused_requests_say_why_and_write_nothing(tensorboard_app: Any, logdir: Path, kwargs: dict[str, Any],
                                                    status: int, error: str) -> None:
    client = tensorboard_app(logdir, profiler_capture=True)
    wait_until_settled(client, expect_spans=1)
    body = kwargs.pop("body", {"steps": 3})
    run = kwargs.pop("run", "traced")
    if body is None:
        answer = client.post(f"{API}/capture?run={run}", headers=kwargs.pop("headers", HEADERS), **kwargs)
    else:
        answer = post(client, run, body, **kwargs)
    assert answer.status_code == status and error in answer.get_json()["error"], answer.get_json()
    assert every_file(logdir) == ["traced/rank0.1.pt.trace.json"]


def test_status_needs_a_listed_run_and_a_well_formed_id(tensorboard_app: Any, logdir: Path) -> None:
    client = tensorboard_app(logdir)
    wait_until_settled(client, expect_spans=1)
    bad = client.get(f"{API}/capture/status?run=traced&id=../../etc")
    assert bad.status_code == 400 and "16 hex digits" in bad.get_json()["error"]
    unknown = client.get(f"{API}/capture/status?run=traced&id=0123456789abcdef")
    assert unknown.status_code == 404 and unknown.get_json()["error"].startswith("no capture request 0123456789abcdef")
    assert client.get(f"{API}/capture/status?run=nope&id=0123456789abcdef").status_code == 404
    assert client.get(f"{API}/capture?run=nope").status_code == 404


def test_a_folder_that_cannot_be_written_is_named_with_the_reason(tensorboard_app: Any, logdir: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    client = tensorboard_app(logdir, profiler_capture=True)
    wait_until_settled(client, expect_spans=1)
    (logdir / "traced" / ".capture").write_text("in the way")
    blocked = post(client, "traced", {"steps": 3})
    assert blocked.status_code == 403
    assert re.fullmatch(r"cannot write the capture request: cannot write request-[0-9a-f]{16}\.json into "
                        + re.escape(str(logdir / "traced")) + r"/\.capture: \.capture is a file, not a folder",
                        blocked.get_json()["error"])
    (logdir / "traced" / ".capture").unlink()

    def full(self: Any, name: str, data: bytes) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(folder_module.CaptureFolder, "_write", full)
    answer = post(client, "traced", {"steps": 3})
    assert answer.status_code == 507
    assert answer.get_json()["error"].endswith(f"into {logdir / 'traced'}/.capture: No space left on device")
