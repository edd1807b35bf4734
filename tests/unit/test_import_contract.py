"""The one-way data flow, enforced (as Perfetto's tools/check_imports does): each package of tb_plugin may import
only the layers below it. A change that needs an upward import belongs in a lower layer or is passed in."""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

from tests.conftest import REPO

PACKAGE = REPO / "tb_plugin"

# What each part of tb_plugin may import (besides itself), lowest layers first; docs/architecture.md draws it.
ALLOWED: dict[str, set[str]] = {
    "model": set(),
    "catalog": set(),
    "loader": {"catalog", "model"},
    "jobs": {"catalog", "loader", "model"},
    "analysis": {"model"},
    "timeline": {"model", "analysis"},
    "scaleout": {"catalog", "jobs", "loader", "model", "analysis"},
    "workspace": {"catalog", "jobs", "loader", "model", "analysis", "timeline", "scaleout"},
    # what a training script imports (the allocator's history; capture from a running job, whose requester side
    # the server and the CLI use): torch only when called, and of ours only the catalog's URL handling
    "capture": {"catalog"},
    "api": {"catalog", "model", "analysis", "timeline", "workspace", "capture"},
    "plugin": {"api", "catalog", "jobs", "workspace"},
    "sdk": {"catalog", "jobs", "loader", "model", "analysis"},
    "cli": {"sdk", "__init__", "scaleout", "jobs", "capture"},
    "__init__": {"sdk", "capture"},
}


def _part(path: Path, root: Path = PACKAGE) -> str:
    rel = path.relative_to(root).parts
    return rel[0] if len(rel) > 1 else rel[0].removesuffix(".py")


def _targets(path: Path, root: Path = PACKAGE) -> set[str]:
    """The tb_plugin parts one module imports (relative and absolute imports, module level or inside functions)."""
    here = list(path.relative_to(root).parent.parts)
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = here[: len(here) - (node.level - 1)]
            dotted = base + (node.module.split(".") if node.module else [])
            out.update([dotted[0]] if dotted else [alias.name for alias in node.names])
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tb_plugin."):
            out.add(node.module.split(".")[1])  # type: ignore[union-attr]
        elif isinstance(node, ast.Import):
            out.update(a.name.split(".")[1] for a in node.names if a.name.startswith("tb_plugin."))
    return {"__init__" if t in {"__version__", "open", "diff", "open_snapshot", "SnapshotError",
                                "record_memory_history"} else t for t in out}


def violations(root: Path = PACKAGE) -> list[str]:
    found = []
    for path in sorted(root.rglob("*.py")):
        part = _part(path, root)
        for target in sorted(_targets(path, root) - {part}):
            if target not in ALLOWED.get(part, set()):
                found.append(f"{path.relative_to(root.parent)}: {part} imports {target}")
    return found


def test_every_package_imports_only_the_layers_below_it() -> None:
    assert set(ALLOWED) >= {_part(p) for p in PACKAGE.rglob("*.py")}, "a new part of tb_plugin needs its layer here"
    assert violations() == []


def test_the_contract_catches_an_upward_import(tmp_path: Path) -> None:
    copy = tmp_path / "tb_plugin"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("static", "__pycache__"))
    assert violations(copy) == []
    (copy / "analysis" / "planted.py").write_text("from ..api.routes import Api\n")
    (copy / "model" / "planted.py").write_text("def f():\n    from tb_plugin.timeline import index\n")
    assert violations(copy) == ["tb_plugin/analysis/planted.py: analysis imports api",
                                "tb_plugin/model/planted.py: model imports timeline"]
