"""The frontend's import rules (``frontend/scripts/check-imports.mjs``, run by ``make lint``): a page never imports
another page or the shell, ``views/common/`` never imports a page, the shared modules of ``src/`` never import a
view. The check reads the TypeScript compiler's list of every import form; here it passes on the tree and fails on
each planted crossing."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from tests.conftest import REPO

FRONTEND = REPO / "frontend"


def check(src: Path | None = None) -> subprocess.CompletedProcess[str]:
    node = shutil.which("node")
    assert node, "node is needed to check the frontend's imports"
    args = [node, "scripts/check-imports.mjs", *([str(src)] if src else [])]
    return subprocess.run(args, cwd=FRONTEND, capture_output=True, text=True, timeout=120, check=False)


def test_the_frontend_keeps_its_layers() -> None:
    done = check()
    assert done.returncode == 0, done.stderr


def test_a_planted_crossing_of_each_kind_fails(tmp_path: Path) -> None:
    src = tmp_path / "src"
    shutil.copytree(FRONTEND / "src", src, ignore=shutil.ignore_patterns("generated"))
    assert check(src).returncode == 0
    (src / "views" / "kernel" / "planted.ts").write_text('import { OP_HELP } from "../operator/operator";\n')
    (src / "views" / "common" / "planted.ts").write_text('export { render } from "../trace/trace";\n')
    (src / "views" / "gpu" / "planted.ts").write_text('export const v = () => import("../../app");\n')
    (src / "planted.ts").write_text('import type { ViewContext } from "./views/types";\n')
    done = check(src)
    assert done.returncode == 1
    assert done.stderr.splitlines()[:4] == [
        "src/planted.ts: core imports common (./views/types)",
        "src/views/common/planted.ts: common imports page:trace (../trace/trace)",
        "src/views/gpu/planted.ts: page:gpu imports shell (../../app)",
        "src/views/kernel/planted.ts: page:kernel imports page:operator (../operator/operator)",
    ]
