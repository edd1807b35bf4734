"""The frontend's pure logic (time formats, label eliding, step merging, track levels) under Node: frontend/unit.mjs
bundles frontend/test/*.test.ts with esbuild and runs every case."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

FRONTEND = Path(__file__).resolve().parents[2] / "frontend"


def test_frontend_unit_cases_pass() -> None:
    node = shutil.which("node")
    assert node, "Node.js is needed for the frontend's unit tests (make test installs the frontend's tools)"
    assert (FRONTEND / "node_modules" / "esbuild").exists(), "run npm ci in frontend/ first"
    out = subprocess.run([node, "unit.mjs"], cwd=FRONTEND, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    summary = re.search(r"^(\d+) passed, 0 failed$", out.stdout, re.MULTILINE)
    assert summary and int(summary.group(1)) >= 12, out.stdout
    assert "not ok" not in out.stdout
