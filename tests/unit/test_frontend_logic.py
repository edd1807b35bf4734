"""The frontend's pure logic (kernel short names, call-stack frames, VS Code detection and lines), run under node.

``frontend/tests/logic.test.ts`` holds the checks; it is bundled with the frontend's own esbuild and run by node,
so the functions tested are the ones the bundle ships.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from tests.conftest import REPO

FRONTEND = REPO / "frontend"


def test_frontend_pure_logic(tmp_path: Path) -> None:
    node = shutil.which("node")
    esbuild = FRONTEND / "node_modules" / ".bin" / "esbuild"
    assert node, "node is needed (it builds the frontend too)"
    assert esbuild.exists(), "frontend/node_modules is missing: npm ci in frontend/ (make test does this)"
    out = tmp_path / "logic.test.mjs"
    subprocess.run([str(esbuild), "tests/logic.test.ts", "--bundle", "--platform=node", "--format=esm",
                    f"--outfile={out}", "--log-level=warning"], cwd=FRONTEND, check=True, timeout=120)
    run = subprocess.run([node, str(out)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.strip().endswith("checks passed"), run.stdout
