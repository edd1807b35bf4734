"""Big text inflated into a scratch file (loader/read.py: SPILL_BYTES): the same model as inflated in memory, the
same limits and errors, no file left behind; the parts' chunks, found as they are reached, are the same events."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from tb_plugin.loader import TraceLoadError, load_bytes, read
from tb_plugin.loader.limits import Limits
from tb_plugin.model.tables import TraceModel
from tests.conftest import real_trace_files


def assert_same_model(a: TraceModel, b: TraceModel) -> None:
    assert a.strings == b.strings and a.meta == b.meta
    assert a.tables.keys() == b.tables.keys()
    for name, cols in a.tables.items():
        for col, values in cols.items():
            np.testing.assert_array_equal(values, b.tables[name][col], err_msg=f"{name}.{col}")


@pytest.fixture()
def spill_everything(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(read, "SPILL_BYTES", 0)
    monkeypatch.setattr(read, "_PROBE_BYTES", 1024)
    monkeypatch.setattr(read, "_SPILL_PIECE", 1 << 16)  # many pieces


@pytest.mark.parametrize("path", [f for f in real_trace_files() if "transformer_bf16" in str(f) or "v100" in str(f)
                                  ][:3], ids=lambda p: p.parent.name)
def test_a_spilled_text_gives_the_same_model(path: Path, tmp_path: Path, spill_everything: None) -> None:
    raw = path.read_bytes()
    text = read.decompress(raw, path.name, Limits(scratch_dir=str(tmp_path)))
    assert not isinstance(text, bytes) and bytes(text) == gzip.decompress(raw)  # a mapped scratch file
    assert list(tmp_path.iterdir()) == []  # unlinked: nothing left behind
    spilled = load_bytes(raw, path.name, limits=Limits(scratch_dir=str(tmp_path)))
    assert_same_model(spilled, load_bytes(raw, path.name))


def test_spilling_keeps_the_limits(tmp_path: Path, spill_everything: None) -> None:
    doc = json.dumps({"traceEvents": [{"ph": "X", "name": "a" * 50, "ts": i, "dur": 1} for i in range(20000)]})
    raw = gzip.compress(doc.encode())
    bomb = Limits(max_ratio=2, always_inflate_bytes=1000, scratch_dir=str(tmp_path))
    with pytest.raises(TraceLoadError, match="decompression bomb"):
        read.decompress(raw, "bomb.json.gz", bomb)
    with pytest.raises(TraceLoadError, match="cut short"):
        read.decompress(raw[:-5000], "cut.json.gz", Limits(scratch_dir=str(tmp_path)))
    two = raw + gzip.compress(b" ")  # two members: both inflated, in order
    assert bytes(read.decompress(two, "two.json.gz", Limits(scratch_dir=str(tmp_path)))) == doc.encode() + b" "
    assert list(tmp_path.iterdir()) == []


def test_chunks_found_as_reached_are_the_same_events() -> None:
    path = next(f for f in real_trace_files() if "transformer_bf16" in str(f))
    data = gzip.decompress(path.read_bytes())
    found = read.outline_by_text(data)
    assert found is not None
    _, lo, hi = found
    lazy = [e for _, _, chunk in read.text_chunks(data, lo, hi, 1 << 16) for e in chunk]
    whole = [e for start, stop in read.split_text(data, lo, hi, 1) for e in read.decode_text(data[start:stop])]
    assert len(lazy) > 10000 and lazy == whole
