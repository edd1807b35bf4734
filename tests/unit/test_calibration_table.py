"""benchmarks/calibration_table.py, the script that regenerates the guide's calibration table, on a corpus laid out
as run_calibration.sh writes it (MANIFEST.json, <pair>/<variant>/ traces), built here from samples: the numbers in
its rows are the replay's and the fixed twin's measured cadence, and the table lands between the guide's markers.
(The calibration itself, each pair within 25 %, is checked on the recorded corpus by test_calibration.py.)"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from benchmarks.calibration_table import main, markdown, table, write_guide
from tb_plugin.analysis.whatif.replay import measured_step_us
from tb_plugin.analysis.whatif.what_if import what_if
from tb_plugin.loader import load_trace
from tests.conftest import SAMPLES


def corpus(root: Path) -> Path:
    pairs = [("item_sync", "host_device_sync", "item_sync", "transformer_bf16", ("planted", "fixed")),
             ("healthy", "none", "transformer_bf16", "transformer_bf16", ("run1", "run2"))]
    entries = []
    for pair, cause, first, second, variants in pairs:
        for variant, sample in zip(variants, (first, second)):
            for f in (SAMPLES / sample).glob("*.pt.trace.json.gz"):
                (root / pair / variant).mkdir(parents=True, exist_ok=True)
                shutil.copy(f, root / pair / variant / f.name)
        entries.append({"pair": pair, "root_cause": cause, "variants": {v: {"run": f"{pair}/{v}"} for v in variants}})
    (root / "MANIFEST.json").write_text(json.dumps({"environment": {"gpus": ["NVIDIA H200"]}, "pairs": entries}))
    return root


def test_rows_are_the_replay_against_the_fixed_twin(tmp_path: Path) -> None:
    root = corpus(tmp_path / "calibration")
    sync, healthy = table(root)
    planted = load_trace(str(next((root / "item_sync" / "planted").glob("*.gz"))))
    fixed = load_trace(str(next((root / "item_sync" / "fixed").glob("*.gz"))))
    assert (sync.verdict, sync.replayed) == ("sync_bound", ["sync_bound"])
    assert sync.predicted_us == pytest.approx(what_if(planted, ["sync_bound"])["predicted_step_us"])
    assert sync.measured_us == pytest.approx(measured_step_us(fixed))
    assert sync.error == pytest.approx((sync.predicted_us - sync.measured_us) / sync.measured_us)
    # the healthy pair: the largest saving any replayable finding promises, as a share of its step
    assert healthy.healthy and healthy.error == pytest.approx(
        (healthy.planted_us - healthy.predicted_us) / healthy.planted_us)
    text = markdown([sync, healthy], {"environment": {"gpus": ["NVIDIA H200"]}})
    assert text.startswith("Recorded on NVIDIA H200.")
    assert f"| item_sync | host_device_sync | sync_bound | sync_bound | {sync.planted_us / 1000:.2f} |" in text


def test_the_table_lands_between_the_guide_markers(tmp_path: Path) -> None:
    guide = tmp_path / "overview.md"
    guide.write_text("before\n<!-- calibration:start -->\nold\n<!-- calibration:end -->\nafter\n")
    write_guide("| new |\n", guide)
    assert guide.read_text() == "before\n<!-- calibration:start -->\n| new |\n<!-- calibration:end -->\nafter\n"
    assert main([str(tmp_path / "nowhere")]) == 2
