"""A page reads its answers as ``docs/api/openapi.yaml`` types them (``Answer<route>``, generated into
``frontend/src/generated/api.ts``): a field renamed in the OpenAPI file, and not where a page reads it, fails
``npm run typecheck`` (what ``make typecheck`` runs). Planted here on a copy of the frontend."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from tests.conftest import REPO


def test_a_field_renamed_in_the_openapi_file_fails_the_frontend_typecheck(tmp_path: Path) -> None:
    node = shutil.which("node")
    assert node, "node is needed to typecheck the frontend"
    frontend = tmp_path / "frontend"
    for name in ("src", "test", "scripts"):
        shutil.copytree(REPO / "frontend" / name, frontend / name, ignore=shutil.ignore_patterns("generated"))
    for name in ("tsconfig.json", "package.json"):
        shutil.copy(REPO / "frontend" / name, frontend / name)
    (frontend / "node_modules").symlink_to(REPO / "frontend" / "node_modules")
    spec = (REPO / "docs" / "api" / "openapi.yaml").read_text(encoding="utf-8")
    planted = spec.replace("        flows_truncated: {type: boolean}", "        flows_cut: {type: boolean}")
    assert planted != spec and planted.count("flows_cut") == 1
    (tmp_path / "docs" / "api").mkdir(parents=True)
    (tmp_path / "docs" / "api" / "openapi.yaml").write_text(planted, encoding="utf-8")
    done = subprocess.run([node, "scripts/generate-api.mjs"], cwd=frontend, capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    tsc = frontend / "node_modules" / "typescript" / "bin" / "tsc"
    done = subprocess.run([node, str(tsc), "--noEmit", "-p", "."], cwd=frontend, capture_output=True, text=True,
                          timeout=600, check=False)
    assert done.returncode != 0, "the typecheck passed with a field the server no longer sends"
    errors = [line for line in done.stdout.splitlines() if "error TS" in line]
    assert errors and all("flows_truncated" in e for e in errors), done.stdout[-3000:]
    assert any(e.startswith("src/views/trace/traceData.ts(") for e in errors), errors
