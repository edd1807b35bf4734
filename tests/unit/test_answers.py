"""Answers are computed and encoded once per trace and query, also when a crowd asks at the same moment."""

from __future__ import annotations

import gzip
import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tb_plugin.api import answers
from tb_plugin.api.http import encode
from tb_plugin.model.tables import TraceModel
from tests.conftest import API, computing_server, cpu_op, write_trace


def test_a_crowd_of_requests_computes_each_answer_once(tensorboard_app: Any, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from tb_plugin.api import routes

    calls: list[str] = []
    real = routes.operators.operator_table

    def slow_table(model: Any, group_by: str = "name") -> Any:
        calls.append(group_by)
        time.sleep(0.2)  # every other request arrives while this one computes
        return real(model, group_by)

    monkeypatch.setattr(routes.operators, "operator_table", slow_table)
    write_trace(tmp_path / "ld" / "run" / "w.1.pt.trace.json", [cpu_op("aten::add", 0, 5), cpu_op("aten::mm", 9, 5)])
    client = computing_server(tensorboard_app, tmp_path / "ld", 1)  # the tables computed by the server
    q = "run=run&worker=w&span=1"

    def get(group_by: str) -> Any:
        r = client.get(f"{API}/operators?{q}&group_by={group_by}", headers={"Accept-Encoding": "gzip"})
        assert r.status_code == 200
        return json.loads(gzip.decompress(r.data) if r.headers.get("Content-Encoding") == "gzip" else r.data)

    with ThreadPoolExecutor(max_workers=16) as pool:
        bodies = list(pool.map(get, ["name"] * 24 + ["name_shape"] * 8))
    assert sorted(calls) == ["name", "name_shape"]
    assert all(b == bodies[0] for b in bodies[:24]) and [r["name"] for r in bodies[0]["rows"]] == ["aten::add",
                                                                                                  "aten::mm"]
    assert client.get(f"{API}/operators?{q}&group_by=name").get_json() == bodies[0]  # plain JSON from the same entry


def test_answers_are_kept_within_a_byte_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    from tb_plugin.model import memo

    monkeypatch.setattr(memo.ANSWERS, "max_bytes", 3000)
    model = TraceModel(strings=[], tables={})
    computed: list[int] = []

    def big(i: int) -> Any:
        computed.append(i)
        return {"i": i, "pad": "x" * 900}

    for i in range(10):
        answers.answer(model, i, lambda i=i: big(i))
    recent = answers._answers(model).recent
    assert sorted(recent) == [7, 8, 9] and sum(recent[k].nbytes for k in recent) <= 3000
    answers.answer(model, 7, lambda: big(-1))  # kept: not computed again, and now the most recent
    answers.answer(model, 0, lambda: big(0))  # forgotten: computed again, evicting the least recent (8)
    assert computed[-1] == 0 and -1 not in computed and sorted(recent) == [0, 7, 9]
    assert answers.answer(model, 9, lambda: big(9)) == encode({"i": 9, "pad": "x" * 900})
    # one budget for every trace: another model's answers push this one's least recent out
    other = TraceModel(strings=[], tables={})
    answers.answer(other, "a", lambda: big(100))
    assert sorted(recent) == [0, 9] and memo.ANSWERS.nbytes <= 3000  # 7 was the least recent
    del other  # a model that goes away gives its share back
    assert memo.ANSWERS.nbytes == sum(recent[k].nbytes for k in recent)


def test_a_failed_answer_reaches_all_waiters_and_is_not_kept() -> None:
    model = TraceModel(strings=[], tables={})
    gate = threading.Event()
    attempts: list[int] = []

    def fail() -> Any:
        attempts.append(1)
        gate.wait(5)
        raise KeyError("no such entry")

    def ask() -> Any:
        try:
            return answers.answer(model, "k", fail)
        except KeyError as err:
            return err

    with ThreadPoolExecutor(max_workers=8) as pool:
        futures = [pool.submit(ask) for _ in range(8)]
        time.sleep(0.2)
        gate.set()
        outcomes = [f.result() for f in futures]
    assert len(attempts) == 1 and all(isinstance(o, KeyError) for o in outcomes)
    assert answers.answer(model, "k", lambda: {"ok": True}).body == b'{"ok":true}'
