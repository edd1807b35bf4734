"""The recorded snapshots (samples/memory_snapshot/, made by samples/scripts/memory_snapshot.py on an H100 with
torch 2.11): the plugin's numbers against what torch itself reported in the same process (the ``*.torch.json``
beside each snapshot) and against the snapshot dicts read directly."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tb_plugin
from tb_plugin.analysis.snapshot_history import device_history
from tb_plugin.loader.unpickle import load_data
from tb_plugin.model.snapshot import A
from tests.conftest import SAMPLES

RUNS = SAMPLES / "memory_snapshot"


def raw(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = load_data(gzip.decompress(path.read_bytes()))
    return data


@pytest.fixture(scope="module")
def train() -> tuple[Any, dict[str, Any], dict[str, Any]]:
    path = RUNS / "train" / "train.pickle.gz"
    return tb_plugin.open_snapshot(str(path)), json.loads((RUNS / "train" / "train.torch.json").read_text()), raw(path)


@pytest.fixture(scope="module")
def oom() -> tuple[Any, dict[str, Any], dict[str, Any]]:
    (path,) = (RUNS / "oom").glob("memory_snapshot_oom_*.pickle.gz")
    return tb_plugin.open_snapshot(str(path)), json.loads((RUNS / "oom" / "oom.torch.json").read_text()), raw(path)


def test_the_training_runs_peak_is_torchs_own(train: Any) -> None:
    s, torch_said, _ = train
    summary = s.summary()
    at_end = torch_said["memory_stats_at_end"]
    # torch's peak counters were reset when recording began: the history's peak is theirs, to the byte
    assert summary["peak_live_bytes"] == at_end["requested_bytes.all.peak"] == 155_847_944
    assert summary["live_bytes"] == at_end["requested_bytes.all.current"]
    assert summary["reserved_bytes"] == at_end["reserved_bytes.all.current"]


def test_live_bytes_at_the_mid_step_snapshot_are_its_live_blocks(train: Any) -> None:
    s, torch_said, _ = train
    mid = torch_said["mid_step_snapshot"]
    h = device_history(s.data, 0)
    marks = np.flatnonzero(s.data.ev_action[h.rows] == A["snapshot"])
    at = int(marks[mid["snapshot_entry_number"] - 1])
    assert h.live_at(at) == mid["active_requested_bytes"] == mid["memory_stats"]["requested_bytes.all.current"]
    assert int(s.data.ev_size[h.rows[at]]) == mid["active_block_bytes"]  # the entry torch left: block bytes
    assert h.reserved_at(at) == mid["reserved_bytes"]


def test_the_end_is_the_segments_own(train: Any) -> None:
    s, _, d = train
    blocks = [b for seg in d["segments"] for b in seg["blocks"] if b["state"] == "active_allocated"]
    assert s.summary()["live_bytes"] == sum(b["requested_size"] for b in blocks)
    assert s.segments()["bytes"].sum() == sum(seg["total_size"] for seg in d["segments"])


def test_the_recorded_out_of_memory_matches_torchs_record(oom: Any) -> None:
    s, torch_said, d = oom
    summary = s.summary()
    entries = d["device_traces"][0]
    where = [i for i, e in enumerate(entries) if e["action"] == "oom"]
    assert len(where) == 1
    entry = entries[where[0]]
    o = summary["oom"]
    assert o["position"] == where[0] and o["requested_bytes"] == entry["size"] == 512 << 20
    assert o["time_us"] == entry["time_us"] and o["device_free_bytes"] == entry["device_free"]
    asked = re.search(r"Tried to allocate ([\d.]+) MiB", torch_said["exception"])
    assert asked is not None and float(asked.group(1)) * 2**20 == o["requested_bytes"]
    at_oom = torch_said["observer"]["memory_stats"]  # taken in an observer at the same moment
    assert o["live_bytes"] == at_oom["requested_bytes.all.current"]
    assert summary["reserved_bytes"] == at_oom["reserved_bytes.all.current"]
    # torch: "16.45 MiB is reserved by PyTorch but unallocated": reserved less the allocated blocks
    assert o["free_in_reserved_bytes"] == at_oom["reserved_bytes.all.current"] - at_oom["allocated_bytes.all.current"]
    assert o["limit_bytes"] == torch_said["observer"]["limit_bytes"] == int(1.5 * 2**30)
    assert o["reason"] == "live_data"
    finding = summary["findings"][0]
    assert finding["kind"] == "oom_live_data" and "at step 2 asking 512.0 MiB" in finding["headline"]
    assert "the process may use 1.50 GiB (set_per_process_memory_fraction)" in finding["headline"]


def test_the_out_of_memorys_live_set_is_mostly_activations_of_the_forward(oom: Any) -> None:
    s, _, _ = oom
    live = s.live_at(s.summary()["oom"]["position"])
    by_category = live.groupby("category")["size_bytes"].sum()
    assert by_category.idxmax() == "activation" and by_category["activation"] > 0.9 * live["size_bytes"].sum()
    assert live.loc[live["size_bytes"].idxmax(), "frame"] == "memory_snapshot.py:57 forward"
