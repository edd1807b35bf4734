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


def _imported(path: Path, root: Path = PACKAGE) -> list[list[str]]:
    """Every module one file imports, as an absolute dotted name split in parts (``tb_plugin.api.routes`` →
    ``["tb_plugin", "api", "routes"]``), whatever the form: ``import tb_plugin.x as y``, ``from tb_plugin import x``,
    ``from tb_plugin.x import y``, relative ``from ..x import y`` / ``from .. import x``, and
    ``importlib.import_module("tb_plugin.x")``; at module level or inside functions. ``from M import n`` gives
    ``M.n`` (``n`` may be a module of ``M``; :func:`_part_of` reads whether it is)."""
    here = ["tb_plugin", *path.relative_to(root).parent.parts]
    out: list[list[str]] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                if node.level - 1 >= len(here):
                    continue  # beyond the package: Python refuses it anyway
                base = here[: len(here) - (node.level - 1)] + (node.module.split(".") if node.module else [])
            else:
                base = (node.module or "").split(".")
            out.extend(base + [alias.name] for alias in node.names)
        elif isinstance(node, ast.Import):
            out.extend(alias.name.split(".") for alias in node.names)
        elif (isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", "")) == "import_module"
              and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            out.append(node.args[0].value.split("."))
    return [dotted for dotted in out if dotted[0] == "tb_plugin"]


def _part_of(dotted: list[str], root: Path = PACKAGE) -> str:
    """The part of tb_plugin a module belongs to: its first name below ``tb_plugin`` when that is a subpackage or
    a module, else ``__init__`` (``import tb_plugin``, ``from tb_plugin import open``: the package's own names)."""
    if len(dotted) < 2:
        return "__init__"
    name = dotted[1]
    return name if (root / name).is_dir() or (root / f"{name}.py").is_file() else "__init__"


def _targets(path: Path, root: Path = PACKAGE) -> set[str]:
    """The tb_plugin parts one module imports (:func:`_imported`)."""
    return {_part_of(dotted, root) for dotted in _imported(path, root)}


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


def test_the_contract_reads_every_import_form(tmp_path: Path) -> None:
    """Each form of import names its part: the package's own module (``from tb_plugin import workspace``), an
    alias (``import tb_plugin.x as y``), relative imports of a module or of a name from any depth, a bare
    ``import tb_plugin``, ``importlib.import_module``; ``from tb_plugin import open`` is the package's ``__init__``."""
    copy = tmp_path / "tb_plugin"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("static", "__pycache__"))
    planted = {
        "analysis/p1.py": "from tb_plugin import workspace\n",
        "analysis/diagnosis/p2.py": "from ... import plugin\n",
        "analysis/diagnosis/p3.py": "from ...api import routes as r\n",
        "model/p4.py": "import tb_plugin.jobs.cache as c\n",
        "model/p5.py": "import tb_plugin\n",
        "catalog/p6.py": "import importlib\nm = importlib.import_module('tb_plugin.loader')\n",
        "loader/p7.py": "from tb_plugin import open as o\n",
        "timeline/p8.py": "from . import index\nfrom ..model import tables\nfrom .. import analysis\n",
    }
    for name, text in planted.items():
        (copy / name).write_text(text)
    assert violations(copy) == [
        "tb_plugin/analysis/diagnosis/p2.py: analysis imports plugin",
        "tb_plugin/analysis/diagnosis/p3.py: analysis imports api",
        "tb_plugin/analysis/p1.py: analysis imports workspace",
        "tb_plugin/catalog/p6.py: catalog imports loader",
        "tb_plugin/loader/p7.py: loader imports __init__",
        "tb_plugin/model/p4.py: model imports jobs",
        "tb_plugin/model/p5.py: model imports __init__",
    ]  # timeline/p8.py imports only what the timeline may


def allowed_table(allowed: dict[str, set[str]] = ALLOWED) -> list[str]:
    """``ALLOWED`` as the table docs/architecture.md shows, one row per part in the table's order."""
    rows = ["| part | may import |", "|---|---|"]
    for part, targets in allowed.items():
        names = ", ".join(f"`{t}`" for t in sorted(targets)) or "nothing of ours"
        rows.append(f"| `{part}` | {names} |")
    return rows


def documented_table(text: str) -> list[str]:
    start = text.index("<!-- import rules:")
    end = text.index("<!-- end of import rules -->")
    return [line for line in text[start:end].splitlines()[1:] if line.strip()]


def test_the_architecture_document_states_this_contract() -> None:
    """The import rules docs/architecture.md gives are this test's, row for row; a changed rule changes both."""
    doc = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert documented_table(doc) == allowed_table()
    drifted = {**ALLOWED, "analysis": {"model", "timeline"}}
    assert documented_table(doc) != allowed_table(drifted)
