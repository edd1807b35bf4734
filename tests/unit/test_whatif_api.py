"""The what-if replay where users meet it: the ``/what_if`` route (validated against docs/api/openapi.yaml), the
Overview's findings (``what_if``, ``estimated``), the Python API (``Trace.what_if``) and the CLI summary give the
same prediction; unknown and malformed ids say why."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
import yaml

import tb_plugin
from tb_plugin.analysis.whatif.what_if import UnknownFinding, what_if
from tb_plugin.cli import main
from tb_plugin.loader import load_trace
from tests.conftest import API, SAMPLES, wait_until_settled
from tests.unit.test_openapi import SPEC_PATH, check

RUN = "cnn_sgd_memcat"  # three findings with a fix to replay: GPU idle gaps, pageable copies, a sync


@pytest.fixture(scope="module")
def spec() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(SPEC_PATH.read_text())
    return doc


def test_route_sdk_and_cli_agree(spec: dict[str, Any], tensorboard_app: Any, tmp_path: Path, capsys: Any) -> None:
    logdir = tmp_path / "logdir"
    shutil.copytree(SAMPLES / RUN, logdir / RUN)
    client = tensorboard_app(logdir)
    wait_until_settled(client, expect_spans=1)
    path = next((logdir / RUN).glob("*.pt.trace.json.gz"))
    q = {"run": RUN, "worker": path.name.split(".")[0], "span": "1"}
    o = client.get(f"{API}/overview?{urlencode(q)}").get_json()
    check(spec, "/overview", 200, o)
    ids = [r["id"] for r in o["recommendations"] if r["what_if"]]
    assert ids == ["gpu_idle_gaps", "pageable_copies", "sync_bound"]
    # every cause's saving is replayed; the run's convolutions also get the low-confidence "cuDNN benchmark possibly
    # off" note, which claims no saving (the trace cannot show the flag)
    assert all(r["estimated"] == "replay" for r in o["recommendations"] if r["cause"])
    assert [(r["kind"], r["estimated"]) for r in o["recommendations"] if not r["cause"]] == [("cudnn_benchmark",
                                                                                           "none")]
    # each finding's saving is its fix replayed alone
    for r in (r for r in o["recommendations"] if r["what_if"]):
        alone = client.get(f"{API}/what_if?{urlencode({**q, 'changes': r['id']})}").get_json()
        assert r["saving_us"] == pytest.approx(alone["saving_us"])
        assert r["what_if"]["predicted_step_us"] == pytest.approx(alone["predicted_step_us"])

    answer = client.get(f"{API}/what_if?{urlencode({**q, 'changes': ','.join(ids)})}").get_json()
    check(spec, "/what_if", 200, answer)
    assert answer["ids"] == ids and [c["id"] for c in answer["changes"]] == ids
    assert sum(answer["predicted_breakdown_us"].values()) == pytest.approx(answer["predicted_step_us"])
    assert sum(answer["baseline_breakdown_us"].values()) == pytest.approx(answer["baseline_step_us"])
    # one replay of the three, not the sum of their savings
    assert answer["saving_us"] != pytest.approx(sum(r["saving_us"] for r in o["recommendations"]), abs=1.0)

    t = tb_plugin.open(path, cache_dir=str(tmp_path / "sdk"))
    w = t.what_if(ids)
    assert w.predicted_step_us == pytest.approx(answer["predicted_step_us"])
    assert w.breakdown["predicted_us"].to_dict() == pytest.approx(answer["predicted_breakdown_us"])
    assert t.what_if().ids == ids  # None: every finding with a fix
    with pytest.raises(ValueError, match="gpu_idle_gaps, pageable_copies, sync_bound"):
        t.what_if(["tf32"])

    assert main(["summary", str(path), "--json", "--cache-dir", str(tmp_path / "cli")]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["what_if_all"]["predicted_step_us"] == pytest.approx(answer["predicted_step_us"])
    assert main(["summary", str(path), "--cache-dir", str(tmp_path / "cli")]) == 0
    out = capsys.readouterr().out
    assert f"→ {answer['predicted_step_us'] / 1000:.2f} ms predicted" in out
    assert "[replayed: keep values on the GPU" in out


def test_unknown_and_malformed_ids_say_why(spec: dict[str, Any], tensorboard_app: Any, tmp_path: Path) -> None:
    logdir = tmp_path / "logdir"
    shutil.copytree(SAMPLES / RUN, logdir / RUN)
    client = tensorboard_app(logdir)
    wait_until_settled(client, expect_spans=1)
    worker = next((logdir / RUN).glob("*.pt.trace.json.gz")).name.split(".")[0]
    q = {"run": RUN, "worker": worker, "span": "1"}
    r = client.get(f"{API}/what_if?{urlencode({**q, 'changes': 'gpu_idle_gaps,tf32'})}")
    assert r.status_code == 404
    check(spec, "/what_if", 404, r.get_json())
    assert r.get_json()["error"] == ("unknown finding 'tf32': this trace's findings with a replayable fix are "
                                     "gpu_idle_gaps, pageable_copies, sync_bound")
    r = client.get(f"{API}/what_if?{urlencode({**q, 'changes': 'a b'})}")
    assert r.status_code == 400 and "ids separated by commas" in r.get_json()["error"]
    base = client.get(f"{API}/what_if?{urlencode(q)}").get_json()  # no changes: the baseline alone
    assert base["ids"] == [] and base["predicted_step_us"] == base["baseline_step_us"] and base["saving_us"] == 0


def test_what_if_on_a_cpu_only_run() -> None:
    model = load_trace(str(next((SAMPLES / "cpu_only").glob("*.pt.trace.json.gz"))))
    a = what_if(model, ["input_bound"])
    assert a["saving_us"] > 0 and a["predicted_breakdown_us"]["DataLoader"] < a["baseline_breakdown_us"]["DataLoader"]
    with pytest.raises(UnknownFinding):
        what_if(model, ["cpu_compute"])  # a finding without a fix to replay


def test_a_traces_combinations_share_its_diagnosis_and_baseline(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each toggle of the panel asks another combination: a trace on its own diagnoses and breaks down its measured
    run once (memoised), and every answer is the one a model computing afresh gives."""
    from tb_plugin.analysis.whatif import breakdown
    from tb_plugin.analysis.whatif import what_if as module

    path = next((SAMPLES / RUN).glob("*.pt.trace.json.gz"))
    model = load_trace(str(path))
    calls = {"findings": 0, "breakdown": 0}
    findings, replayed = module.diagnose_findings, breakdown.replayed_breakdown

    def counted_findings(*args: Any, **kw: Any) -> Any:
        calls["findings"] += 1
        return findings(*args, **kw)

    def counted_breakdown(*args: Any, **kw: Any) -> Any:
        calls["breakdown"] += 1
        return replayed(*args, **kw)

    monkeypatch.setattr(module, "diagnose_findings", counted_findings)
    monkeypatch.setattr(breakdown, "replayed_breakdown", counted_breakdown)
    monkeypatch.setattr(module, "replayed_breakdown", counted_breakdown)
    combos = [[], ["gpu_idle_gaps"], ["sync_bound", "pageable_copies"], []]
    answers = [what_if(model, ids, None, "w") for ids in combos]
    # the diagnosis once; the measured run's breakdown once, and one per combination with a change
    assert calls == {"findings": 1, "breakdown": 1 + 2}
    monkeypatch.undo()
    for ids, got in zip(combos, answers):
        assert got == what_if(load_trace(str(path)), ids, None, "w"), ids
