"""The calibration corpus of issue 25 (tests/data/calibration: each planted cause recorded with its fixed twin in the
same call on the same GPU; MANIFEST.json says what each pair plants and fixes), one test per pair:

- the verdict names the root cause (``root_cause`` in the manifest's terms), with where in the step it lives;
- the step time the what-if replay predicts for the planted run with its cause's fix is within 25 % of the fixed
  twin's measured cadence (``benchmarks/calibration_table.py`` makes the same rows for docs/guide/overview.md);
- the healthy run (recorded twice) is promised no saving above 10 % of its step;
- a sync finding is never charged more than its removal measured (planted − fixed twin).

Where a recording does not show its cause under the profiler, or the replay misses for a reason it cannot model,
the test says so (docs/guide/overview.md, "Calibration", has the same notes): those are strict xfails, so a pair
that starts to pass must be moved back.
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

# The planted cause costs nothing the profiler's run shows: the verdict cannot name it (the test checks what it
# says instead).
NOT_SHOWN = {
    # GPU-bound in both twins under the profiler (GPU busy 19.1 of 21.2 ms per step planted, 18.8 fixed): the host
    # augments while the GPU still runs the previous step; the fixed twin's lower cadence (17.0) is its window
    # starting with a backlog (its GPU work per step exceeds its cadence)
    "host_augment": "the run is GPU-bound under the profiler; the augmentation overlaps the GPU's work",
    # host-bound under the profiler (DDP's Python per micro-batch): the fixed twin (no_sync) measured 18.86 ms
    # against 18.82, the extra all-reduces overlap the backward; the finding is listed, with that replayed saving
    "grad_accum_allreduce": "the extra all-reduces overlap the host-bound backward: the fixed twin is no faster",
}
# The replay keeps every host interval it does not change at its measured length. After a host phase that streams
# far more than the host caches (57 ms of CPU RNG over 32 MB; a 113 MB pageable staging copy), the rest of the
# planted step's host work runs 25-100 % slower than the same work in the fixed twin, which the replay cannot know;
# cuDNN's plan building for the candidates it times is not in the trace call by call.
MISSES = {
    "cpu_tensor_creation": "the host work after 57 ms of CPU RNG runs ~25 % slower than in the fixed twin",
    "pageable_copy": "the host work after the 113 MB pageable staging copy runs ~2x slower than in the fixed twin",
    "cudnn_autotune_shapes": "how many plans cuDNN builds per timed candidate is not in the trace",
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


@pytest.mark.parametrize("pair", [p for p in CAUSES if p not in NOT_SHOWN])
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


@pytest.mark.parametrize("pair", sorted(NOT_SHOWN))
def test_a_cause_the_profiled_run_does_not_show_is_not_the_verdict(pair: str) -> None:
    """The planted cause costs nothing in the profiled run: the verdict does not claim it, and nothing promises
    more than the fixed twin measured plus the 25 % tolerance."""
    o = planted_overview(pair)
    assert o["verdict"]["root_cause"] != PAIRS[pair]["root_cause"]
    r = row(pair)
    assert abs(r.error) <= TOLERANCE
    if pair == "grad_accum_allreduce":  # listed, with the saving its replay gives
        found = next(f for f in o["recommendations"] if f["kind"] == "grad_accum_allreduce")
        assert found["estimated"] == "replay" and found["saving_us"] < 0.1 * r.planted_us
        assert "no_sync" in found["text"]


@pytest.mark.parametrize("pair", [pytest.param(p, marks=pytest.mark.xfail(strict=True, reason=MISSES[p]))
                                  if p in MISSES else p for p in CAUSES])
def test_the_prediction_is_within_25_percent_of_the_fixed_twin(pair: str) -> None:
    r = row(pair)
    assert r.replayed or pair in NOT_SHOWN, "no fix replayed"
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
