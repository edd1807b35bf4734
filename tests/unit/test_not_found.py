"""What a trace does not have is a 404 said by the analysis that knows it; a ``KeyError`` is a bug, never a 404.

The analyses raise ``model.errors.NotFound`` (``UnknownStep``, ``UnknownAnnotation``, ``UnknownPath``, the what-if
panel's ``UnknownFinding``) with the user's sentence, and ``api.http.json_route`` answers it 404 in one place.
Before, each route turned any ``KeyError`` into "no step … in this trace", so a bug deep in an analysis (a dict
missing a key) read as the user's mistake.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from werkzeug.test import Client
from werkzeug.wrappers import Request, Response

from tb_plugin.analysis import flamegraph
from tb_plugin.api import routes
from tb_plugin.api.http import json_route
from tb_plugin.model.errors import NotFound, UnknownAnnotation, UnknownPath, UnknownStep
from tests.conftest import API, cpu_op, wait_until_settled, write_trace


def _app(error: BaseException) -> Client:
    def handler(request: Request) -> Response:
        raise error

    return Client(json_route(handler))


def test_not_found_is_a_404_with_the_analysis_sentence() -> None:
    for error, sentence in ((UnknownStep("7", ["1", "2"]), "no step '7' in this trace (its steps: 1, 2)"),
                            (UnknownAnnotation("fwd", 3, 2), "no annotation 'fwd' #3 in this trace (it has 2)"),
                            (UnknownPath("0-9"), "no diff entry at path '0-9'")):
        r = _app(error).get("/")
        assert (r.status_code, r.get_json()) == (404, {"error": sentence})
        assert isinstance(error, LookupError) and not isinstance(error, KeyError)


def test_a_long_step_list_is_cut_and_counted() -> None:
    err = UnknownStep("x", [str(i) for i in range(60)])
    assert str(err).endswith(", 48, 49, … 10 more)")


def test_an_accidental_key_error_is_a_logged_500_not_a_404() -> None:
    r = _app(KeyError("bytes")).get("/")
    assert r.status_code == 500 and r.get_json() == {"error": "internal error: KeyError; see the TensorBoard log"}


def test_a_route_answers_a_bug_in_its_analysis_as_500(tensorboard_app: Any, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The flame graph of a step the trace has, whose analysis hits a ``KeyError``: 500 (the old routes said
    "no step '1' in this trace", a 404 that blamed the user); an unknown step is still the analysis's 404."""
    events = [cpu_op("ProfilerStep#1", 0, 100), cpu_op("aten::mm", 10, 50)]
    write_trace(tmp_path / "logs" / "run" / "w.1.pt.trace.json", events)
    client = tensorboard_app(tmp_path / "logs")
    wait_until_settled(client, expect_spans=1)
    url = f"{API}/flamegraph?run=run&worker=w&span=1&format=folded"
    unknown = client.get(f"{url}&step=9")
    assert unknown.status_code == 404 and unknown.get_json()["error"] == "no step '9' in this trace (its steps: 1)"

    def broken(*args: Any, **kwargs: Any) -> str:
        raise KeyError("a key the code forgot")

    monkeypatch.setattr(routes, "folded_stacks", broken)
    r = client.get(f"{url}&step=1")
    assert r.status_code == 500 and "KeyError" in r.get_json()["error"]
    assert flamegraph.folded_stacks is not broken  # only the route's reference was replaced


def test_not_found_says_its_sentence_as_text() -> None:
    err = NotFound("no such thing")
    assert str(err) == "no such thing" and err.args == ("no such thing",)
