"""The calibration corpus of issue 25 (tests/data/calibration: each planted cause recorded with its fixed twin in the
same call on the same GPU; MANIFEST.json says what each pair plants and fixes), one test per pair:

- the verdict names the root cause (``root_cause`` in the manifest's terms), with where in the step it lives;
- the step time the what-if replay predicts for the planted run with its cause's fix is within 25 % of the fixed
  twin's measured cadence (``benchmarks/calibration_table.py`` makes the same rows for docs/guide/overview.md);
- the healthy run (recorded twice) is promised no saving above 10 % of its step;
- a sync finding is never charged more than its removal measured (planted − fixed twin).

Where the replay misses for a reason it cannot model, the test says so (docs/guide/overview.md, "Calibration", has
the same notes): a strict xfail, so a pair that starts to pass must be moved back.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

import pytest

from benchmarks.calibration_table import CORPUS, HEALTHY_SHARE, TOLERANCE, Row, _diagnosed, _models, _rank, pair_row
from tb_plugin.analysis.whatif.replay import measured_step_us

MANIFEST = json.loads((CORPUS / "MANIFEST.json").read_text())
PAIRS = {e["pair"]: e for e in MANIFEST["pairs"]}

# The replay misses the fixed twin by more than 25 % where the fix changes what the trace cannot price: the host work
# after a blocking wait runs slower for a few milliseconds (the thread's wake-up: diagnosis/cold_host.py). After the
# 113 MB pageable copy of the corpus's pair it lost 2.2 ms a step against
# the fixed twin; the replay gives back 1.1 ms, the median of 14 measurements on two other models after a 20 ms
# wait (0.1-1.6 ms: samples/host_constants/h200_after_wait.json). The same pair recorded six times more (alone and
# beside another run, on two hosts: pageable_copy_r2 … _r7) lost 0 to 1.6 ms and is within 25 % each time.
MISSES = {
    "pageable_copy": "the host work after the 113 MB pageable copy lost 2.2 ms a step against the fixed twin; the "
                     "wake-up measured apart is 1.1 ms (0.1-1.6); six re-recordings lost 0 to 1.6 ms",
}


@cache
def row(pair: str) -> Row:
    return pair_row(CORPUS, PAIRS[pair])


@cache
def planted_overview(pair: str) -> dict[str, Any]:
    entry = PAIRS[pair]
    models = _models(CORPUS / pair / next(iter(entry["variants"])))
    return _diagnosed(models, _rank(models, entry.get("straggler_rank")))[0]


def _measured(pair: str, variant: int) -> float:
    entry = PAIRS[pair]
    models = _models(CORPUS / pair / list(entry["variants"])[variant])
    return measured_step_us(models[_rank(models, entry.get("straggler_rank"))][1])


CAUSES = [p for p, e in PAIRS.items() if e["root_cause"] != "none"]


def test_the_corpus_is_the_manifest() -> None:
    """Every pair of the manifest has both twins' traces; the pairs dropped are said why."""
    assert len(PAIRS) >= 16 and "healthy" in PAIRS
    for pair, entry in PAIRS.items():
        for variant in list(entry["variants"])[:2]:
            assert list((CORPUS / pair / variant).glob("*.pt.trace.json*")), f"{pair}/{variant}"
    assert [d["pair"] for d in MANIFEST.get("dropped", [])] == ["cudnn_benchmark"]
    assert not (CORPUS / "cudnn_benchmark").exists()


@pytest.mark.parametrize("pair", CAUSES)
def test_the_verdict_names_the_root_cause(pair: str) -> None:
    o = planted_overview(pair)
    v = o["verdict"]
    assert v["root_cause"] == PAIRS[pair]["root_cause"], v["text"]
    # the finding it names carries its fix as a replay, and says where in the step the cause lives: the user's
    # frame (a run recorded without with_stack has none: recompile) or the record_function region around it
    lead = next(r for r in o["recommendations"] if r["kind"] == v["kind"])
    assert lead["estimated"] == "replay" and lead["advice"]
    stack = all(r.get("with_stack", True) for v_ in PAIRS[pair]["variants"].values() for r in v_["results"])
    assert v["where"] or not stack, v["text"]
    if v["where"]:
        assert v["where"].get("frame") or v["where"].get("annotation"), v["where"]


@pytest.mark.parametrize("pair", [pytest.param(p, marks=pytest.mark.xfail(strict=True, reason=MISSES[p]))
                                  if p in MISSES else p for p in CAUSES])
def test_the_prediction_is_within_25_percent_of_the_fixed_twin(pair: str) -> None:
    r = row(pair)
    assert r.replayed, "no fix replayed"
    assert abs(r.error) <= TOLERANCE, f"predicted {r.predicted_us:.0f} µs, fixed twin {r.measured_us:.0f} µs"


@pytest.mark.parametrize("pair", sorted(MISSES))
def test_a_missed_prediction_still_points_the_right_way(pair: str) -> None:
    """Where the replay misses the fixed twin, it still predicts most of the measured gain, and never more."""
    r = row(pair)
    gain, promised = r.planted_us - r.measured_us, r.planted_us - r.predicted_us
    assert 0.8 * gain <= promised <= gain


def test_the_healthy_run_is_promised_no_saving() -> None:
    r = row("healthy")
    assert r.healthy and r.error <= HEALTHY_SHARE
    o = planted_overview("healthy")
    assert o["verdict"]["kind"] in {"gpu_bound", "none"}
    assert all(f["saving_us"] <= HEALTHY_SHARE * r.planted_us for f in o["recommendations"])
    # the noise floor: the two recordings' cadences agree within 1 %
    assert _measured("healthy", 1) == pytest.approx(_measured("healthy", 0), rel=0.01)


@pytest.mark.parametrize("pair", ["item_sync", "tolist_print"])
def test_a_sync_finding_is_never_charged_more_than_its_removal_measured(pair: str) -> None:
    o = planted_overview(pair)
    sync = next(f for f in o["recommendations"] if f["kind"] == "sync_bound")
    removal = _measured(pair, 0) - _measured(pair, 1)
    assert 0 < sync["saving_us"] <= removal
