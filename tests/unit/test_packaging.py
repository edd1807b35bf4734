"""The wheel carries the built frontend and registers the TensorBoard entry point."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.conftest import REPO


def test_wheel_contains_the_frontend_and_the_entry_point(tmp_path: Path) -> None:
    bundle = REPO / "tb_plugin" / "static" / "index.js"
    if not bundle.exists():
        pytest.fail("tb_plugin/static/index.js is missing: `make build` (make test builds it first)")
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(REPO), "--no-deps", "--no-build-isolation", "-q",
                    "-w", str(tmp_path)], check=True, capture_output=True, timeout=600)
    (wheel,) = tmp_path.glob("pytorch_tb_profiler-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        assert "tb_plugin/static/index.js" in names
        assert b"render" in zf.read("tb_plugin/static/index.js")
        chunks = [n for n in names if n.startswith("tb_plugin/static/chunk-") and n.endswith(".js")]
        assert chunks, "the lazily loaded chunks (plotly, views) ship too"
        entry = next(n for n in names if n.endswith("entry_points.txt"))
        text = zf.read(entry).decode()
    assert "[tensorboard_plugins]" in text and "pytorch_profiler = tb_plugin.plugin:ProfilerLoader" in text
    assert "[console_scripts]" in text and "pytorch-tb-profiler = tb_plugin.cli:console" in text
